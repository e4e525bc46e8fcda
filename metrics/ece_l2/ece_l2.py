# Copyright 2025 The calibkit authors. Licensed under the Apache License, Version 2.0.
"""L2 and debiased L2 calibration error as an `evaluate` metric (calibkit)."""

import evaluate

from calibkit.evaluate_modules import ARGS_DOC, CORE_METRICS, bibtex
from calibkit.evaluate_modules.metric import CalibrationMetric
from calibkit.metrics.settings import UNSET, CalibrationSettings

_CITATION = bibtex("kumar2019")

_DESCRIPTION = """\
The L2 calibration error and its debiased estimate (Kumar, Liang and Ma 2019). The top-label
confidence max_k p_k of each prediction goes into `n_bins` equal-width bins ((m-1)/M, m/M], as for
ECE. `ece_l2` = sqrt(sum_b n_b/N (acc_b - conf_b)^2), torchmetrics' `norm="l2"`. The squared gap of
a small bin is biased upwards by the variance of its accuracy; `ece_l2_debiased` subtracts it, as
`uncertainty-calibration`'s `unbiased_l2_ce` does: every bin with n_b >= 2 contributes
n_b/N [(acc_b - conf_b)^2 - acc_b (1 - acc_b) / (n_b - 1)], and the result is the square root of
the positive part of the sum. Computed by calibkit's functional core in one pass
(`calibkit.ece(..., norm="l2")` and `calibkit.ece(..., norm="l2", debias=True)`).
"""

_KWARGS_DESCRIPTION = (
    ARGS_DOC
    + """\
    n_bins (`int`, defaults to 15): equal-width bins ((m-1)/M, m/M] of the top-label confidence.
Returns:
    ece_l2 (`float`): L2 calibration error, in [0, 1]; 0 is perfectly calibrated.
    ece_l2_debiased (`float`): its debiased estimate, in [0, 1]; 0 when the gaps are within what
        the bins' sampling noise explains.
Examples:
    >>> metric = evaluate.load("ece_l2")
    >>> predictions = [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]]
    >>> results = metric.compute(predictions=predictions, references=[0, 1, 1, 1])
    >>> print({key: round(results[key], 4) for key in ('ece_l2', 'ece_l2_debiased')})
    {'ece_l2': 0.3536, 'ece_l2_debiased': 0.0}

    Token classification, logits and labels padded with -100 as `Trainer` gives them:

    >>> metric = evaluate.load("ece_l2", "token")
    >>> logits = [[[2.0, -1.0], [0.5, 0.1], [-100.0, -100.0]], [[-1.0, 1.5], [0.2, 0.3], [1.0, 0.0]]]
    >>> results = metric.compute(predictions=logits, references=[[0, 1, -100], [1, 1, 0]], from_logits=True)
    >>> round(results['ece_l2'], 4)
    0.3645
"""
)

_LIMITATIONS = """\
Binned, so both depend on `n_bins`. The plug-in `ece_l2` is biased upwards on small samples (a
perfectly calibrated model scores above 0); `ece_l2_debiased` removes most of that bias but is
noisier, and is 0 (not negative) when the estimated squared error is below 0. Bins of a single
sample carry no variance estimate and are left out of the debiased sum, as in the reference code.
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class EceL2(CalibrationMetric):
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
        return self._run(CORE_METRICS["ece_l2"], predictions, references, settings=settings, **keywords)
