# Copyright 2025 The calibkit authors. Licensed under the Apache License, Version 2.0.
"""RBECE as an `evaluate` metric (calibkit)."""

import evaluate

import calibkit
from calibkit.evaluate_modules import ARGS_DOC, bibtex
from calibkit.evaluate_modules.metric import CalibrationMetric
from calibkit.metrics.settings import UNSET, CalibrationSettings

_CITATION = bibtex("dawkins2022")

_DESCRIPTION = """\
Region-balanced ECE (Dawkins & Nejadgholi 2022, eq 2): the unweighted mean of |acc_b - conf_b|
over the top-label confidence bins holding more than `theta` samples. Every region of certainty
counts the same, so the low- and mid-confidence predictions that ECE drowns under the crowded top
bin (the non-entity class of NER) are measured. Computed by calibkit's functional core
(`calibkit.rbece`).
"""

_KWARGS_DESCRIPTION = (
    ARGS_DOC
    + """\
    rbece_bins (`int`, defaults to 20): equal-width bins of the top-label confidence.
    theta (`float`, defaults to 40): a bin counts only if it holds more than `theta` samples.
    n_bins (deprecated): the old name of `rbece_bins`, accepted with a `FutureWarning` until the next release.
Returns:
    rbece (`float`): region-balanced calibration error, in [0, 1]; NaN (with a warning) when no bin
        holds more than `theta` samples.
Examples:
    >>> metric = evaluate.load("rbece")
    >>> predictions = [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]]
    >>> results = metric.compute(predictions=predictions, references=[0, 1, 1, 1], theta=0)
    >>> round(results['rbece'], 4)
    0.3

    Token classification, logits and labels padded with -100 as `Trainer` gives them:

    >>> metric = evaluate.load("rbece", "token")
    >>> logits = [[[2.0, -1.0], [0.5, 0.1], [-100.0, -100.0]], [[-1.0, 1.5], [0.2, 0.3], [1.0, 0.0]]]
    >>> results = metric.compute(predictions=logits, references=[[0, 1, -100], [1, 1, 0]], from_logits=True, theta=0)
    >>> round(results['rbece'], 4)
    0.2932
"""
)

_LIMITATIONS = """\
Bins just above `theta` samples count as much as bins with millions, so RBECE is noisier than ECE;
with fewer than about `theta` x `rbece_bins` samples many regions drop out (lower `theta` for small
evaluation sets). The value depends on both `rbece_bins` and `theta`: report them.
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Rbece(CalibrationMetric):
    def _compute(
        self,
        predictions,
        references,
        rbece_bins: int = UNSET.rbece_bins,  # told apart from a value passed (old names)
        theta: float = UNSET.theta,
        from_logits: bool = UNSET.from_logits,
        ignore_index: int = UNSET.ignore_index,
        n_bins: int | None = None,
        settings: CalibrationSettings | None = None,
    ) -> dict:
        keywords = {"rbece_bins": rbece_bins, "theta": theta, "from_logits": from_logits, "ignore_index": ignore_index}
        keywords["n_bins"] = n_bins  # deprecated name: calibkit.rbece warns and resolves it
        return self._run(calibkit.rbece, predictions, references, settings=settings, **keywords)
