"""Trainer callbacks: see the Trainer integration issue."""
