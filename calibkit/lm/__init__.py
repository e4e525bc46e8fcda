"""Language models: calibration of their answers.

- :mod:`~calibkit.lm.multiple_choice`: multiple-choice benchmarks read from lm-evaluation-harness
  and lighteval logs (the softmax over each question's choices), with temperature scaling over
  the choices.
"""
