"""Calibrators (temperature scaling and friends): see the calibrators issue."""
