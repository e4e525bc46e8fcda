"""The functional core: every calibration metric, computed from additive per-bin statistics.

The conventions are fixed in ``SPEC.md``: at the root of the repository and of the sdist, and
copied into every ``evaluate`` module folder (so the metric cards on the Hub link to it, and the
wheel installs it with the modules: ``calibkit.evaluate_module_path(name)``). Each function's
docstring gives its formula and paper.
"""

from calibkit.metrics.accumulator import CalibrationAccumulator
from calibkit.metrics.conformal import coverage, set_size
from calibkit.metrics.decomposition import score_decomposition
from calibkit.metrics.formulas import (
    EmptyRegionWarning,
    MissingClassWarning,
    NoWrongPredictionWarning,
    class_wise_summary,
)
from calibkit.metrics.functional import (
    ace,
    aurc,
    brier,
    calibration_report,
    cece,
    ecd,
    ece,
    ece_l2,
    ece_l2_debiased,
    ece_variance,
    esce,
    fce,
    mce,
    msece,
    multilabel_report,
    nll,
    overconfidence,
    rbece,
    reliability_bins,
    risk_coverage,
    sce,
    selective_accuracy,
    smece,
    smooth_reliability,
    subset_ece,
    wsece,
)
from calibkit.metrics.preferences import preference_metrics, preference_probability
from calibkit.metrics.registry import METRICS, REGISTRY, report_from_statistics
from calibkit.metrics.report import compute_statistics
from calibkit.metrics.settings import CalibrationSettings
from calibkit.metrics.statistics import CalibrationStatistics

__all__ = [
    "METRICS",
    "REGISTRY",
    "CalibrationAccumulator",
    "CalibrationSettings",
    "CalibrationStatistics",
    "EmptyRegionWarning",
    "MissingClassWarning",
    "NoWrongPredictionWarning",
    "ace",
    "aurc",
    "brier",
    "calibration_report",
    "cece",
    "class_wise_summary",
    "compute_statistics",
    "coverage",
    "ece",
    "ece_l2",
    "ece_l2_debiased",
    "ece_variance",
    "ecd",
    "esce",
    "fce",
    "mce",
    "msece",
    "multilabel_report",
    "nll",
    "overconfidence",
    "preference_metrics",
    "preference_probability",
    "rbece",
    "reliability_bins",
    "risk_coverage",
    "report_from_statistics",
    "sce",
    "score_decomposition",
    "selective_accuracy",
    "set_size",
    "smece",
    "smooth_reliability",
    "subset_ece",
    "wsece",
]
