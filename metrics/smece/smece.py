# Copyright 2025 The calibkit authors. Licensed under the Apache License, Version 2.0.
"""Smooth ECE as an `evaluate` metric (calibkit)."""

import evaluate

import calibkit
from calibkit.evaluate_modules import ARGS_DOC, bibtex
from calibkit.evaluate_modules.metric import CalibrationMetric
from calibkit.metrics.registry import module_metrics
from calibkit.metrics.settings import UNSET, CalibrationSettings

_CITATION = bibtex("blasiok2024")

_DESCRIPTION = """\
Smooth ECE (Blasiok and Nakkiran, ICLR 2024): the calibration error of the top-label confidence
without bins. The residuals confidence - correct are smoothed by a Gaussian kernel of bandwidth
sigma, reflected at 0 and 1, and smECE_sigma is the mean absolute smoothed residual weighted by
the density of the confidences. The bandwidth is chosen by the data: sigma = smECE_sigma, the
fixed point found by bisection on (0, 1]. For 1-D input (the probability of class 1) it is the
binary smECE of that probability against label == 1. Equal to the authors' `relplot` 1.0.3
(`relplot.smECE`) to rounding; computed by calibkit's functional core (`calibkit.smece`).
"""

_KWARGS_DESCRIPTION = (
    ARGS_DOC
    + """\
Returns:
    smece (`float`): smooth ECE, in [0, 1]; 0 is perfectly calibrated.
    smece_bandwidth (`float`): the bandwidth sigma it was computed at.
Examples:
    >>> metric = evaluate.load("smece")
    >>> predictions = [[0.9, 0.1], [0.6, 0.4], [0.3, 0.7], [0.8, 0.2]]
    >>> results = metric.compute(predictions=predictions, references=[0, 1, 1, 0])
    >>> round(results['smece'], 4), results['smece_bandwidth']
    (0.1316, 0.1328125)

    Token classification, logits and labels padded with -100 as `Trainer` gives them:

    >>> metric = evaluate.load("smece", "token")
    >>> logits = [[[2.0, -1.0], [0.5, 0.1], [-100.0, -100.0]], [[-1.0, 1.5], [0.2, 0.3], [1.0, 0.0]]]
    >>> results = metric.compute(predictions=logits, references=[[0, 1, -100], [1, 1, 0]], from_logits=True)
    >>> round(results['smece'], 4)
    0.0877
"""
)

_LIMITATIONS = """\
It needs every prediction at once (the bandwidth depends on all of them): no streamed form, and
calibkit's accumulator and bootstrap refuse it. On few samples the bandwidth is wide and the value
is pulled towards the overall gap between accuracy and mean confidence. Top label only: no
class-wise form.
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Smece(CalibrationMetric):
    def _compute(
        self,
        predictions,
        references,
        from_logits: bool = UNSET.from_logits,
        ignore_index: int = UNSET.ignore_index,
        settings: CalibrationSettings | None = None,
    ) -> dict:
        names = module_metrics()["smece"]
        keywords = {"from_logits": from_logits, "ignore_index": ignore_index}
        report = self._run(
            calibkit.calibration_report, predictions, references, metrics=names, settings=settings, **keywords
        )
        return {key: report[key] for key in (*names, "smece_bandwidth")}
