"""One function per calibration metric, on numpy arrays or torch tensors, grouped by family as the papers group them.

Every function takes ``probs`` of shape ``(N,)`` (probability of class 1, binary), ``(N, K)``
or ``(N, L, K)`` (token classification) and integer ``labels`` of shape ``(N,)`` or
``(N, L)``; positions whose label is ``ignore_index`` (-100, as ``transformers`` pads) are
skipped. ``from_logits=True`` applies softmax (sigmoid for 1-D input) on the fly. Each is one
call of the one-shot report (:func:`calibkit.metrics.report.exact_report`) on the batch, so
:func:`calibration_report` costs about as much as a single metric. Conventions: SPEC.md.

- :mod:`~calibkit.metrics.functional.binned`: ECE (L1, L2, max, debiased), MCE, ACE, overconfidence;
- :mod:`~calibkit.metrics.functional.classwise`: SCE, subset ECE, CECE, MSECE, WSECE, ECE variance;
- :mod:`~calibkit.metrics.functional.regions`: RBECE;
- :mod:`~calibkit.metrics.functional.fuzzy`: FCE;
- :mod:`~calibkit.metrics.functional.entropic`: ECD, ESCE;
- :mod:`~calibkit.metrics.functional.proper`: Brier score, NLL;
- :mod:`~calibkit.metrics.functional.multilabel`: every binary metric per label, averaged, for multi-label heads;
- :mod:`~calibkit.metrics.functional.selective`: risk-coverage curve, AURC, selective accuracy;
- :mod:`~calibkit.metrics.functional.smooth`: smooth ECE and the smooth reliability curve (no bins);
- :mod:`~calibkit.metrics.functional.core`: :func:`calibration_report` and :func:`reliability_bins`.
"""

from calibkit.metrics.functional.binned import ace, ece, ece_l2, ece_l2_debiased, mce, overconfidence
from calibkit.metrics.functional.classwise import cece, ece_variance, msece, sce, subset_ece, wsece
from calibkit.metrics.functional.core import NORMS, calibration_report, reliability_bins
from calibkit.metrics.functional.entropic import ecd, esce
from calibkit.metrics.functional.fuzzy import fce
from calibkit.metrics.functional.multilabel import multilabel_report
from calibkit.metrics.functional.proper import brier, nll
from calibkit.metrics.functional.regions import rbece
from calibkit.metrics.functional.selective import aurc, risk_coverage, selective_accuracy
from calibkit.metrics.functional.smooth import smece, smooth_reliability

__all__ = [
    "NORMS",
    "ace",
    "aurc",
    "brier",
    "calibration_report",
    "cece",
    "ecd",
    "ece",
    "ece_l2",
    "ece_l2_debiased",
    "ece_variance",
    "esce",
    "fce",
    "mce",
    "msece",
    "multilabel_report",
    "nll",
    "overconfidence",
    "rbece",
    "reliability_bins",
    "risk_coverage",
    "sce",
    "selective_accuracy",
    "smece",
    "smooth_reliability",
    "subset_ece",
    "wsece",
]
