# Copyright 2025 The calibkit authors. Licensed under the Apache License, Version 2.0.
"""The CORP decomposition of the Brier or log score as an `evaluate` metric (calibkit)."""

import evaluate

import calibkit
from calibkit.evaluate_modules import ARGS_DOC, bibtex
from calibkit.evaluate_modules.metric import CalibrationMetric
from calibkit.metrics.settings import UNSET, CalibrationSettings

_CITATION = bibtex("dimitriadis2021")

_DESCRIPTION = """\
A proper score split into what calibration could fix and what the model knows (Dimitriadis,
Gneiting and Jordan 2021, CORP). For the top label's confidence p against whether it is right y
(for 1-D input: the probability of class 1 against label == 1), with r the isotonic recalibration
of p (pool adjacent violators, tied confidences pooled) and ybar the accuracy:
score = S(p), miscalibration = S(p) - S(r), discrimination = S(ybar) - S(r),
uncertainty = S(ybar), so that score = miscalibration - discrimination + uncertainty. S is the
mean Brier score (y - p)^2 or log score. A calibrator should lower the miscalibration and keep
the discrimination. Equal to model-diagnostics' `decompose` to 1e-9; computed by calibkit's
functional core (`calibkit.score_decomposition`).
"""

_KWARGS_DESCRIPTION = (
    ARGS_DOC
    + """\
    score (`str`, defaults to "brier"): the proper score decomposed, "brier" or "log".
Returns:
    miscalibration (`float`): what isotonic recalibration of the confidence would remove (>= 0).
    discrimination (`float`): what the recalibrated confidence knows beyond the accuracy (>= 0).
    uncertainty (`float`): the score of always forecasting the accuracy.
    score (`float`): the mean score itself.
Examples:
    >>> metric = evaluate.load("score_decomposition")
    >>> predictions = [[0.9, 0.1], [0.6, 0.4], [0.3, 0.7], [0.8, 0.2]]
    >>> results = metric.compute(predictions=predictions, references=[0, 0, 1, 1])
    >>> {k: round(v, 4) for k, v in results.items()}
    {'miscalibration': 0.0583, 'discrimination': 0.0208, 'uncertainty': 0.1875, 'score': 0.225}

    Token classification, logits and labels padded with -100 as `Trainer` gives them:

    >>> metric = evaluate.load("score_decomposition", "token")
    >>> logits = [[[2.0, -1.0], [0.5, 0.1], [-100.0, -100.0]], [[-1.0, 1.5], [0.2, 0.3], [1.0, 0.0]]]
    >>> results = metric.compute(predictions=logits, references=[[0, 1, -100], [1, 1, 0]], from_logits=True)
    >>> round(results['score'], 4)
    0.1329
"""
)

_LIMITATIONS = """\
It needs every prediction at once (the isotonic fit): no streamed form, and calibkit's
accumulator and bootstrap refuse it. On few samples the isotonic fit follows the noise: the
miscalibration is then small and the discrimination large. The log score's parts are infinite
where a confidence of 0 or 1 is wrong. Top label only here (`calibkit.score_decomposition(...,
per_class=True)` gives each class's one-vs-rest parts).
"""


def _top_label(probs, labels, **settings):
    return calibkit.score_decomposition(probs, labels, **settings)["top_label"]


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ScoreDecomposition(CalibrationMetric):
    def _compute(
        self,
        predictions,
        references,
        score: str = "brier",
        from_logits: bool = UNSET.from_logits,
        ignore_index: int = UNSET.ignore_index,
        settings: CalibrationSettings | None = None,
    ) -> dict:
        keywords = {"score": score, "from_logits": from_logits, "ignore_index": ignore_index}
        return self._run(_top_label, predictions, references, settings=settings, **keywords)
