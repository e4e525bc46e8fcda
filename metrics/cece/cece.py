# Copyright 2025 The calibkit authors. Licensed under the Apache License, Version 2.0.
"""CECE, MSECE, WSECE, ECE variance and per-class ECE as an `evaluate` metric (calibkit)."""

import evaluate

from calibkit.evaluate_modules import ARGS_DOC, CORE_METRICS, bibtex
from calibkit.evaluate_modules.metric import CalibrationMetric
from calibkit.metrics.settings import UNSET, CalibrationSettings

_CITATION = bibtex("obadinma2021")

_DESCRIPTION = """\
Class-wise calibration (Obadinma et al. 2021). ECE_k is the top-label expected calibration error
(`n_bins` equal-width confidence bins) on the samples whose true class is k, so a minority class
whose probabilities cannot be trusted is not hidden behind the majority class, as it is in ECE.
The module returns their contraharmonic mean CECE = sum_k ECE_k^2 / sum_k ECE_k (eq 3.4), which
the worst-calibrated classes dominate, the mean MSECE (eq 3.5), the class-frequency-weighted mean
WSECE (eq 3.6), the variance of the ECE_k around the overall ECE (eq 3.7) and every ECE_k, in one
pass of calibkit's functional core (`calibkit.cece`, `calibkit.msece`, ...).
"""

_KWARGS_DESCRIPTION = (
    ARGS_DOC
    + """\
    n_bins (`int`, defaults to 15): equal-width bins ((m-1)/M, m/M] of the top-label confidence.
Returns:
    cece (`float`): contraharmonic ECE over the classes present, 0 when every ECE_k is 0.
    msece (`float`): mean of the ECE_k.
    wsece (`float`): sum_k n_k/N ECE_k.
    ece_variance (`float`): sum_k (ECE_k - ECE)^2 / K over the K classes present.
    per_class_ece (`list` of `float`): ECE_k for every class, NaN (and a warning) for a class
        absent from `references`; absent classes are left out of the four summaries.
Examples:
    >>> metric = evaluate.load("cece")
    >>> predictions = [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]]
    >>> results = metric.compute(predictions=predictions, references=[0, 1, 1, 1])
    >>> print({key: round(results[key], 4) for key in ('cece', 'msece', 'wsece', 'ece_variance')})
    {'cece': 0.3095, 'msece': 0.2333, 'wsece': 0.3, 'ece_variance': 0.0222}

    Token classification, logits and labels padded with -100 as `Trainer` gives them:

    >>> metric = evaluate.load("cece", "token")
    >>> logits = [[[2.0, -1.0], [0.5, 0.1], [-100.0, -100.0]], [[-1.0, 1.5], [0.2, 0.3], [1.0, 0.0]]]
    >>> results = metric.compute(predictions=logits, references=[[0, 1, -100], [1, 1, 0]], from_logits=True)
    >>> print({key: round(results[key], 4) for key in ('cece', 'msece', 'wsece', 'ece_variance')})
    {'cece': 0.3174, 'msece': 0.2707, 'wsece': 0.2932, 'ece_variance': 0.0132}
"""
)

_LIMITATIONS = """\
Each ECE_k is a binned estimate on the samples of class k only: with few samples in a class it is
noisy and biased upwards, and it depends on `n_bins`. CECE is dominated by the worst classes by
design; read it with `per_class_ece` and the class counts. Classes absent from `references` are left
out, so two runs with different classes present are not directly comparable. The class-wise paper's
Table 3 (CECE, MSECE, ECE variance) follows from its Table 1's per-class ECEs to 4 decimals; what
calibkit reproduces from each seed paper, and what it cannot: calibkit's README, "Reproducing the
papers" (tests in `tests/papers/`).
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Cece(CalibrationMetric):
    def _compute(
        self,
        predictions,
        references,
        n_bins: int = UNSET.n_bins,
        from_logits: bool = UNSET.from_logits,
        ignore_index: int = UNSET.ignore_index,
        settings: CalibrationSettings | None = None,
    ) -> dict:
        keywords = {"n_bins": n_bins, "from_logits": from_logits, "ignore_index": ignore_index}
        return self._run(CORE_METRICS["cece"], predictions, references, settings=settings, **keywords)
