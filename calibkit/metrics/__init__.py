"""The functional core: every calibration metric, computed from additive per-bin statistics.

See SPEC.md (shipped in the repository) for the conventions; each function's docstring
gives its formula and paper.
"""

from calibkit.metrics.functional import (
    ace,
    brier,
    calibration_report,
    cece,
    ecd,
    ece,
    ece_variance,
    esce,
    fce,
    mce,
    msece,
    nll,
    overconfidence,
    rbece,
    reliability_bins,
    sce,
    subset_ece,
    wsece,
)
from calibkit.metrics.statistics import (
    METRICS,
    CalibrationAccumulator,
    CalibrationStatistics,
    EmptyRegionWarning,
    MissingClassWarning,
    class_wise_summary,
)

__all__ = [
    "METRICS",
    "CalibrationAccumulator",
    "CalibrationStatistics",
    "EmptyRegionWarning",
    "MissingClassWarning",
    "ace",
    "brier",
    "calibration_report",
    "cece",
    "class_wise_summary",
    "ece",
    "ece_variance",
    "ecd",
    "esce",
    "fce",
    "mce",
    "msece",
    "nll",
    "overconfidence",
    "rbece",
    "reliability_bins",
    "sce",
    "subset_ece",
    "wsece",
]
