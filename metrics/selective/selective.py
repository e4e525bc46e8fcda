# Copyright 2025 The calibkit authors. Licensed under the Apache License, Version 2.0.
"""AURC and selective accuracy as an `evaluate` metric (calibkit)."""

import evaluate

import calibkit
from calibkit.evaluate_modules import ARGS_DOC, bibtex
from calibkit.evaluate_modules.metric import CalibrationMetric
from calibkit.metrics.registry import module_metrics
from calibkit.metrics.settings import UNSET, CalibrationSettings

_CITATION = bibtex("geifman2017") + "\n" + bibtex("liang2023")

_DESCRIPTION = """\
Selective prediction, HELM's view of calibration: rank the inputs by top-label confidence and
answer only the most confident. `aurc` is the area under the risk-coverage curve (Geifman &
El-Yaniv 2017): the error rate on the k most confident inputs, averaged over every k (lower is
better). `selective_accuracy` is the accuracy on the `coverage` share of inputs the model is most
confident about (HELM, Liang et al. 2023). Ties in confidence count as their expectation over
orders. Computed exactly by calibkit's functional core (`calibkit.aurc`,
`calibkit.selective_accuracy`).
"""

_KWARGS_DESCRIPTION = (
    ARGS_DOC
    + """\
    coverage (`float`, defaults to 0.8): the share of inputs answered, in (0, 1].
Returns:
    aurc (`float`): area under the risk-coverage curve, in [0, 1].
    selective_accuracy (`float`): accuracy on the `ceil(coverage * n)` most confident inputs.
Examples:
    >>> metric = evaluate.load("selective")
    >>> predictions = [[0.9, 0.1], [0.6, 0.4], [0.3, 0.7]]
    >>> results = metric.compute(predictions=predictions, references=[0, 1, 1], coverage=0.5)
    >>> round(results['aurc'], 4), results['selective_accuracy']
    (0.1111, 1.0)

    Token classification, logits and labels padded with -100 as `Trainer` gives them:

    >>> metric = evaluate.load("selective", "token")
    >>> logits = [[[2.0, -1.0], [0.5, 0.1], [-100.0, -100.0]], [[-1.0, 1.5], [0.2, 0.3], [1.0, 0.0]]]
    >>> results = metric.compute(predictions=logits, references=[[0, 1, -100], [1, 1, 0]], from_logits=True)
    >>> round(results['aurc'], 4)
    0.09
"""
)

_LIMITATIONS = """\
Both mix accuracy and ranking: a more accurate model has a lower AURC even when its confidences
rank its errors no better, so compare models of similar accuracy, or read it with ECE. The
selective accuracy depends on `coverage`: report it.
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Selective(CalibrationMetric):
    def _compute(
        self,
        predictions,
        references,
        coverage: float = UNSET.coverage,
        from_logits: bool = UNSET.from_logits,
        ignore_index: int = UNSET.ignore_index,
        settings: CalibrationSettings | None = None,
    ) -> dict:
        names = module_metrics()["selective"]
        keywords = {"coverage": coverage, "from_logits": from_logits, "ignore_index": ignore_index}
        report = self._run(
            calibkit.calibration_report, predictions, references, metrics=names, settings=settings, **keywords
        )
        return {name: report[name] for name in names}
