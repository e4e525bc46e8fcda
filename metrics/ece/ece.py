# Copyright 2025 The calibkit authors. Licensed under the Apache License, Version 2.0.
"""ECE and MCE as an `evaluate` metric (calibkit)."""

import evaluate

from calibkit.evaluate_modules import ARGS_DOC, CORE_METRICS, bibtex
from calibkit.evaluate_modules.metric import CalibrationMetric
from calibkit.metrics.settings import UNSET, CalibrationSettings

_CITATION = bibtex("guo2017", "naeini2015")

_DESCRIPTION = """\
Expected calibration error (ECE, Guo et al. 2017) and maximum calibration error (MCE, Naeini et
al. 2015). The top-label confidence max_k p_k of each prediction goes into `n_bins` equal-width
bins ((m-1)/M, m/M]; ECE = sum_b n_b/N |acc_b - conf_b|, the gap between the accuracy and the mean
confidence of each bin weighted by its share of the samples, and MCE = max_b |acc_b - conf_b| over
the non-empty bins. Binary input given as P(class 1) bins that probability against the fraction of
positives. Computed by calibkit's functional core in one pass (`calibkit.ece`, `calibkit.mce`).
"""

_KWARGS_DESCRIPTION = (
    ARGS_DOC
    + """\
    n_bins (`int`, defaults to 15): equal-width bins ((m-1)/M, m/M] of the top-label confidence.
Returns:
    ece (`float`): expected calibration error, in [0, 1]; 0 is perfectly calibrated.
    mce (`float`): maximum calibration error over the non-empty bins, in [0, 1].
Examples:
    >>> metric = evaluate.load("ece")
    >>> predictions = [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]]
    >>> results = metric.compute(predictions=predictions, references=[0, 1, 1, 1])
    >>> print({key: round(results[key], 4) for key in ('ece', 'mce')})
    {'ece': 0.3, 'mce': 0.6}

    Token classification, logits and labels padded with -100 as `Trainer` gives them:

    >>> metric = evaluate.load("ece", "token")
    >>> logits = [[[2.0, -1.0], [0.5, 0.1], [-100.0, -100.0]], [[-1.0, 1.5], [0.2, 0.3], [1.0, 0.0]]]
    >>> results = metric.compute(predictions=logits, references=[[0, 1, -100], [1, 1, 0]], from_logits=True)
    >>> print({key: round(results[key], 4) for key in ('ece', 'mce')})
    {'ece': 0.2932, 'mce': 0.5987}
"""
)

_LIMITATIONS = """\
A binned estimate: it depends on `n_bins`, is biased upwards on small samples, and the crowded
high-confidence bin of a fine-tuned transformer dominates it, so the rare low-confidence regions and
the minority classes barely count (see `rbece` and `cece`). MCE rests on a single, often tiny, bin.
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Ece(CalibrationMetric):
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
        return self._run(CORE_METRICS["ece"], predictions, references, settings=settings, **keywords)
