# Copyright 2025 The calibkit authors. Licensed under the Apache License, Version 2.0.
"""overconfidence (OF) as an `evaluate` metric (calibkit)."""

import evaluate

import calibkit
from calibkit.evaluate_modules import ARGS_DOC, bibtex
from calibkit.evaluate_modules.metric import CalibrationMetric
from calibkit.metrics.settings import UNSET, CalibrationSettings

_CITATION = bibtex("bihani2023")

_DESCRIPTION = """\
Overconfidence OF (Bihani & Rayz 2023, eq 7): the mean top-label confidence of the wrong
predictions. A well-calibrated model is unsure when it is wrong; a high OF means its mistakes come
with high confidence. Computed by calibkit's functional core (`calibkit.overconfidence`).
"""

_KWARGS_DESCRIPTION = (
    ARGS_DOC
    + """\
Returns:
    overconfidence (`float`): mean confidence over the incorrect predictions, in [0, 1]; NaN when every
        prediction is correct.
Examples:
    >>> metric = evaluate.load("overconfidence")
    >>> predictions = [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]]
    >>> results = metric.compute(predictions=predictions, references=[0, 1, 1, 1])
    >>> round(results['overconfidence'], 4)
    0.6

    Token classification, logits and labels padded with -100 as `Trainer` gives them:

    >>> metric = evaluate.load("overconfidence", "token")
    >>> logits = [[[2.0, -1.0], [0.5, 0.1], [-100.0, -100.0]], [[-1.0, 1.5], [0.2, 0.3], [1.0, 0.0]]]
    >>> results = metric.compute(predictions=logits, references=[[0, 1, -100], [1, 1, 0]], from_logits=True)
    >>> round(results['overconfidence'], 4)
    0.5987
"""
)

_LIMITATIONS = """\
Says nothing about the correct predictions (a model that is always unsure scores well) and rests on
the wrong predictions only, which are few for an accurate model: read it with ECE and accuracy.
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Overconfidence(CalibrationMetric):
    def _compute(
        self,
        predictions,
        references,
        from_logits: bool = UNSET.from_logits,
        ignore_index: int = UNSET.ignore_index,
        settings: CalibrationSettings | None = None,
    ) -> dict:
        keywords = {"from_logits": from_logits, "ignore_index": ignore_index}
        return self._run(calibkit.overconfidence, predictions, references, settings=settings, **keywords)
