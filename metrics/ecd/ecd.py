# Copyright 2025 The calibkit authors. Licensed under the Apache License, Version 2.0.
"""ECD as an `evaluate` metric (calibkit)."""

import evaluate

import calibkit
from calibkit.evaluate_modules import ARGS_DOC, bibtex
from calibkit.evaluate_modules.metric import CalibrationMetric
from calibkit.metrics.settings import UNSET, CalibrationSettings

_CITATION = bibtex("sumler2025")

_DESCRIPTION = """\
Entropic calibration difference (Sumler et al. 2025, eq 12 and 15): ECD = mean_i [sum_k p_ik log
p_ik - log p_{i,y_i}]; for binary input mean (p - y) log(p / (1 - p)). Positive means over-confident,
negative under-confident, so unlike ECE it tells the two apart; no binning. Computed by calibkit's
functional core (`calibkit.ecd`).
"""

_KWARGS_DESCRIPTION = (
    ARGS_DOC
    + """\
    eps (`float`, defaults to 1e-12): probabilities are clipped to [eps, 1] inside the logarithms.
Returns:
    ecd (`float`): entropic calibration difference; > 0 over-confident, < 0 under-confident, 0 for
        p = 0.5 whatever the label and for p = 1 on the right class.
Examples:
    >>> metric = evaluate.load("ecd")
    >>> predictions = [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]]
    >>> results = metric.compute(predictions=predictions, references=[0, 1, 1, 1])
    >>> round(results['ecd'], 4)
    -0.127

    Token classification, logits and labels padded with -100 as `Trainer` gives them:

    >>> metric = evaluate.load("ecd", "token")
    >>> logits = [[[2.0, -1.0], [0.5, 0.1], [-100.0, -100.0]], [[-1.0, 1.5], [0.2, 0.3], [1.0, 0.0]]]
    >>> results = metric.compute(predictions=logits, references=[[0, 1, -100], [1, 1, 0]], from_logits=True)
    >>> round(results['ecd'], 4)
    -0.0818
"""
)

_LIMITATIONS = """\
Unbounded: one confident mistake (p_y near 0) can dominate the mean, which `eps` caps at -log(eps).
Over- and under-confident samples cancel, so ECD near 0 does not by itself mean calibrated. The
entropic paper's single-datum bound and its Table II single-datum bins reproduce; its Table I noisy
columns do not follow from its stated simulation. What calibkit reproduces from each seed paper,
and what it cannot: calibkit's README, "Reproducing the papers" (tests in `tests/papers/`).
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Ecd(CalibrationMetric):
    def _compute(
        self,
        predictions,
        references,
        eps: float = UNSET.eps,
        from_logits: bool = UNSET.from_logits,
        ignore_index: int = UNSET.ignore_index,
        settings: CalibrationSettings | None = None,
    ) -> dict:
        keywords = {"eps": eps, "from_logits": from_logits, "ignore_index": ignore_index}
        return self._run(calibkit.ecd, predictions, references, settings=settings, **keywords)
