# Copyright 2025 The calibkit authors. Licensed under the Apache License, Version 2.0.
"""SCE (class-wise ECE) as an `evaluate` metric (calibkit)."""

import evaluate

import calibkit
from calibkit.evaluate_modules import ARGS_DOC, bibtex
from calibkit.evaluate_modules.metric import CalibrationMetric
from calibkit.metrics.settings import UNSET, CalibrationSettings

_CITATION = bibtex("nixon2019")

_DESCRIPTION = """\
Static calibration error, also called class-wise ECE (Nixon et al. 2019): for each class k,
equal-width bins on p_ik with the outcome 1[y_i = k]; SCE = 1/K sum_k sum_b n_bk/N |acc_bk -
conf_bk|. Unlike ECE it looks at every class's probability, not only the top one. Computed by
calibkit's functional core (`calibkit.sce`).
"""

_KWARGS_DESCRIPTION = (
    ARGS_DOC
    + """\
    sce_bins (`int`, defaults to 15): equal-width bins of each class probability.
    n_bins (deprecated): the old name of `sce_bins`, accepted with a `FutureWarning` until the next release.
Returns:
    sce (`float`): static calibration error, in [0, 1]; 0 is perfectly calibrated.
Examples:
    >>> metric = evaluate.load("sce")
    >>> predictions = [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]]
    >>> results = metric.compute(predictions=predictions, references=[0, 1, 1, 1])
    >>> round(results['sce'], 4)
    0.3

    Token classification, logits and labels padded with -100 as `Trainer` gives them:

    >>> metric = evaluate.load("sce", "token")
    >>> logits = [[[2.0, -1.0], [0.5, 0.1], [-100.0, -100.0]], [[-1.0, 1.5], [0.2, 0.3], [1.0, 0.0]]]
    >>> results = metric.compute(predictions=logits, references=[[0, 1, -100], [1, 1, 0]], from_logits=True)
    >>> round(results['sce'], 4)
    0.2932
"""
)

_LIMITATIONS = """\
Averaged over classes, so with many classes most terms are the near-zero probabilities of the
classes a sample is clearly not, which pulls SCE towards 0; binned, so it depends on `sce_bins`.
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Sce(CalibrationMetric):
    def _compute(
        self,
        predictions,
        references,
        sce_bins: int = UNSET.sce_bins,  # told apart from a value passed (old names)
        from_logits: bool = UNSET.from_logits,
        ignore_index: int = UNSET.ignore_index,
        n_bins: int | None = None,
        settings: CalibrationSettings | None = None,
    ) -> dict:
        keywords = {"sce_bins": sce_bins, "from_logits": from_logits, "ignore_index": ignore_index}
        keywords["n_bins"] = n_bins  # deprecated name: calibkit.sce warns and resolves it
        return self._run(calibkit.sce, predictions, references, settings=settings, **keywords)
