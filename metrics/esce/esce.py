# Copyright 2025 The calibkit authors. Licensed under the Apache License, Version 2.0.
"""ESCE as an `evaluate` metric (calibkit)."""

import evaluate

import calibkit
from calibkit.evaluate_modules import ARGS_DOC, bibtex
from calibkit.evaluate_modules.metric import CalibrationMetric
from calibkit.metrics.settings import UNSET, CalibrationSettings

_CITATION = bibtex("sumler2025")

_DESCRIPTION = """\
Expected signed calibration error (Sumler et al. 2025, eq 6): ESCE = sum_b n_b/N (acc_b - conf_b)
over `esce_bins` equal-width bins of the top-label confidence (of P(class 1) against the fraction of
positives for binary input). Negative means over-confident. Computed by calibkit's functional core
(`calibkit.esce`).
"""

_KWARGS_DESCRIPTION = (
    ARGS_DOC
    + """\
    esce_bins (`int`, defaults to 10): equal-width bins of the confidence.
    n_bins (deprecated): the old name of `esce_bins`, accepted with a `FutureWarning` until the next release.
Returns:
    esce (`float`): expected signed calibration error, in [-1, 1]; < 0 over-confident.
Examples:
    >>> metric = evaluate.load("esce")
    >>> predictions = [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]]
    >>> results = metric.compute(predictions=predictions, references=[0, 1, 1, 1])
    >>> round(results['esce'], 4)
    0.0

    Token classification, logits and labels padded with -100 as `Trainer` gives them:

    >>> metric = evaluate.load("esce", "token")
    >>> logits = [[[2.0, -1.0], [0.5, 0.1], [-100.0, -100.0]], [[-1.0, 1.5], [0.2, 0.3], [1.0, 0.0]]]
    >>> results = metric.compute(predictions=logits, references=[[0, 1, -100], [1, 1, 0]], from_logits=True)
    >>> round(results['esce'], 4)
    0.0537
"""
)

_LIMITATIONS = """\
Signed gaps of different bins cancel: a model over-confident at high confidence and under-confident
at low confidence can score 0. Binned, so it depends on `esce_bins`; read it with ECE.
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Esce(CalibrationMetric):
    def _compute(
        self,
        predictions,
        references,
        esce_bins: int = UNSET.esce_bins,  # told apart from a value passed (old names)
        from_logits: bool = UNSET.from_logits,
        ignore_index: int = UNSET.ignore_index,
        n_bins: int | None = None,
        settings: CalibrationSettings | None = None,
    ) -> dict:
        keywords = {"esce_bins": esce_bins, "from_logits": from_logits, "ignore_index": ignore_index}
        keywords["n_bins"] = n_bins  # deprecated name: calibkit.esce warns and resolves it
        return self._run(calibkit.esce, predictions, references, settings=settings, **keywords)
