# Copyright 2025 The calibkit authors. Licensed under the Apache License, Version 2.0.
"""Brier score as an `evaluate` metric (calibkit)."""

import evaluate

import calibkit
from calibkit.evaluate_modules import ARGS_DOC, bibtex
from calibkit.evaluate_modules.metric import CalibrationMetric
from calibkit.metrics.settings import UNSET, CalibrationSettings

_CITATION = bibtex("brier1950", "galdran")

_DESCRIPTION = """\
Brier score (Brier 1950): mean_i sum_k (p_ik - 1[y_i = k])^2, for binary input given as P(class 1)
mean (p - y)^2. A proper scoring rule: it rewards calibration and sharpness together. Computed by
calibkit's functional core (`calibkit.brier`).
"""

_KWARGS_DESCRIPTION = (
    ARGS_DOC
    + """\
Returns:
    brier (`float`): Brier score, in [0, 2] (in [0, 1] for binary 1-D input); lower is better.
Examples:
    >>> metric = evaluate.load("brier")
    >>> predictions = [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]]
    >>> results = metric.compute(predictions=predictions, references=[0, 1, 1, 1])
    >>> round(results['brier'], 4)
    0.25

    Token classification, logits and labels padded with -100 as `Trainer` gives them:

    >>> metric = evaluate.load("brier", "token")
    >>> logits = [[[2.0, -1.0], [0.5, 0.1], [-100.0, -100.0]], [[-1.0, 1.5], [0.2, 0.3], [1.0, 0.0]]]
    >>> results = metric.compute(predictions=logits, references=[[0, 1, -100], [1, 1, 0]], from_logits=True)
    >>> round(results['brier'], 4)
    0.2658
"""
)

_LIMITATIONS = """\
Mixes calibration with accuracy (refinement): a better classifier scores better even when it is
worse calibrated. The multi-class sum over classes and the binary 1-D form differ by a factor 2 on
the same binary problem.
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Brier(CalibrationMetric):
    def _compute(
        self,
        predictions,
        references,
        from_logits: bool = UNSET.from_logits,
        ignore_index: int = UNSET.ignore_index,
        settings: CalibrationSettings | None = None,
    ) -> dict:
        keywords = {"from_logits": from_logits, "ignore_index": ignore_index}
        return self._run(calibkit.brier, predictions, references, settings=settings, **keywords)
