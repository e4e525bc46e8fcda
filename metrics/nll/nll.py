# Copyright 2025 The calibkit authors. Licensed under the Apache License, Version 2.0.
"""NLL as an `evaluate` metric (calibkit)."""

import evaluate

import calibkit
from calibkit.evaluate_modules import ARGS_DOC, bibtex
from calibkit.evaluate_modules.metric import CalibrationMetric
from calibkit.metrics.settings import UNSET, CalibrationSettings

_CITATION = bibtex("galdran")

_DESCRIPTION = """\
Negative log-likelihood: mean_i -log p_{i,y_i}, the cross-entropy loss of the predictions. A proper
scoring rule, the quantity temperature scaling minimises. Computed by calibkit's functional core
(`calibkit.nll`).
"""

_KWARGS_DESCRIPTION = (
    ARGS_DOC
    + """\
    eps (`float`, defaults to 1e-12): probabilities are clipped to [eps, 1] inside the logarithm.
Returns:
    nll (`float`): negative log-likelihood, >= 0; lower is better.
Examples:
    >>> metric = evaluate.load("nll")
    >>> predictions = [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]]
    >>> results = metric.compute(predictions=predictions, references=[0, 1, 1, 1])
    >>> round(results['nll'], 4)
    0.4004

    Token classification, logits and labels padded with -100 as `Trainer` gives them:

    >>> metric = evaluate.load("nll", "token")
    >>> logits = [[[2.0, -1.0], [0.5, 0.1], [-100.0, -100.0]], [[-1.0, 1.5], [0.2, 0.3], [1.0, 0.0]]]
    >>> results = metric.compute(predictions=logits, references=[[0, 1, -100], [1, 1, 0]], from_logits=True)
    >>> round(results['nll'], 4)
    0.3996
"""
)

_LIMITATIONS = """\
Unbounded: a single confident mistake can dominate it (capped at -log(eps)); like the Brier score it
mixes calibration with accuracy.
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Nll(CalibrationMetric):
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
        return self._run(calibkit.nll, predictions, references, settings=settings, **keywords)
