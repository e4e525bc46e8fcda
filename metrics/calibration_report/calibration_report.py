# Copyright 2025 The calibkit authors. Licensed under the Apache License, Version 2.0.
"""every calibration metric in one pass as an `evaluate` metric (calibkit)."""

import evaluate

import calibkit
from calibkit.evaluate_modules import ARGS_DOC, bibtex
from calibkit.evaluate_modules.metric import CalibrationMetric
from calibkit.metrics.settings import UNSET, CalibrationSettings, settings_keywords

_CITATION = bibtex(
    "guo2017", "naeini2015", "nixon2019", "obadinma2021", "dawkins2022", "bihani2023", "sumler2025", "brier1950"
)

_DESCRIPTION = """\
Every calibration metric of calibkit in one pass over the data (`calibkit.calibration_report`):
ECE and MCE, ACE (exact), SCE, the per-class ECE_k and their summaries CECE, MSECE, WSECE and ECE
variance, RBECE, FCE, overconfidence, ECD, ESCE, Brier and NLL, with the accuracy and the number of
samples. Costs about as much as a single metric; see the single-metric modules for each definition.
"""

_KWARGS_DESCRIPTION = (
    ARGS_DOC
    + """\
    n_bins (`int`, defaults to 15): bins for ECE, MCE and the class-wise ECEs.
    ace_ranges (`int`, defaults to 15): equal-mass ranges per class for ACE.
    sce_bins (`int`, defaults to 15): bins of each class probability for SCE.
    rbece_bins (`int`, defaults to 20): bins for RBECE.
    theta (`float`, defaults to 40): RBECE counts a bin only if it holds more than `theta` samples.
    fce_bins (`int`, defaults to 15): fuzzy bins for FCE.
    fce_variant (`str`, defaults to `"paper"`): `"authors"` computes FCE as the fuzzy-binning authors'
        code does (see the `fce` module).
    esce_bins (`int`, defaults to 10): bins for ESCE.
    eps (`float`, defaults to 1e-12): clipping inside the logarithms of ECD and NLL.
Returns:
    ece, mce, ace, sce, cece, msece, wsece, ece_variance, rbece, fce, overconfidence, ecd, esce, brier,
    nll (`float`): the metrics of the modules of the same names.
    subset_ece (`list` of `float`): the per-class ECE_k (NaN for an absent class).
    ace_error_bound (`float`): 0, ACE is exact here. ACE and its bound are left out with 2,048 classes
        or more and in the next_token configuration (their cost grows with the classes, not the
        samples: SPEC.md); `metrics` is not a setting of this module, so use the `ace` module for it.
    accuracy (`float`), n (`int`, samples after masking), num_classes (`int`).
Examples:
    >>> metric = evaluate.load("calibration_report")
    >>> predictions = [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]]
    >>> results = metric.compute(predictions=predictions, references=[0, 1, 1, 1], theta=0)
    >>> print({key: round(results[key], 4) for key in ('ece', 'accuracy', 'n')})
    {'ece': 0.3, 'accuracy': 0.75, 'n': 4}

    Token classification, logits and labels padded with -100 as `Trainer` gives them:

    >>> metric = evaluate.load("calibration_report", "token")
    >>> logits = [[[2.0, -1.0], [0.5, 0.1], [-100.0, -100.0]], [[-1.0, 1.5], [0.2, 0.3], [1.0, 0.0]]]
    >>> results = metric.compute(predictions=logits, references=[[0, 1, -100], [1, 1, 0]], from_logits=True, theta=0)
    >>> print({key: round(results[key], 4) for key in ('ece', 'accuracy', 'n')})
    {'ece': 0.2932, 'accuracy': 0.8, 'n': 5}
"""
)

_LIMITATIONS = """\
Inherits the limitations of each metric (see their cards). RBECE is NaN with a warning when no bin
holds more than `theta` samples, as in the small example above.
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class CalibrationReport(CalibrationMetric):
    def _compute(
        self,
        predictions,
        references,
        n_bins: int = UNSET.n_bins,
        ace_ranges: int = UNSET.ace_ranges,
        sce_bins: int = UNSET.sce_bins,
        rbece_bins: int = UNSET.rbece_bins,
        theta: float = UNSET.theta,
        fce_bins: int = UNSET.fce_bins,
        esce_bins: int = UNSET.esce_bins,
        eps: float = UNSET.eps,
        fce_variant: str = UNSET.fce_variant,
        from_logits: bool = UNSET.from_logits,
        ignore_index: int = UNSET.ignore_index,
        settings: CalibrationSettings | None = None,
    ) -> dict:
        keywords = settings_keywords(locals())  # the settings keywords above, by name
        return self._run(calibkit.calibration_report, predictions, references, settings=settings, **keywords)
