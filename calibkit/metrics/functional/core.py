"""What every metric function shares: one call of the one-shot report, and :func:`calibration_report` itself.

Every function of :mod:`calibkit.metrics.functional` takes ``probs`` of shape ``(N,)``
(probability of class 1, binary), ``(N, K)`` or ``(N, L, K)`` (token classification) and
integer ``labels`` of shape ``(N,)`` or ``(N, L)``; positions whose label is ``ignore_index``
(-100, as ``transformers`` pads) are skipped. ``from_logits=True`` applies softmax (sigmoid for
1-D input) on the fly. Each is one call of :func:`calibkit.metrics.report.exact_report` on the
batch, so :func:`calibration_report` costs about as much as a single metric. Conventions: SPEC.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from calibkit.metrics.formulas import binned_gaps
from calibkit.metrics.multilabel import exact_label_report, label_metric_names
from calibkit.metrics.registry import metric_names
from calibkit.metrics.report import exact_report
from calibkit.metrics.settings import UNSET, CalibrationSettings, resolve_settings, settings_keywords
from calibkit.metrics.statistics import CalibrationStatistics
from calibkit.metrics.validation import check_num_threads, prepare_for

ArrayLike = Any


NORMS = ("l1", "l2", "max")
"""``ece(..., norm=)``: the mean absolute gap (ECE), the root mean squared gap, the largest gap (MCE)."""


def _report(
    probs: ArrayLike,
    labels: ArrayLike,
    metrics: tuple[str, ...],
    settings: CalibrationSettings,
    num_threads: int | None = None,
) -> tuple[dict[str, Any], CalibrationStatistics]:
    num_threads = check_num_threads(num_threads)
    prep = prepare_for(probs, labels, settings)
    return exact_report(prep, settings, metrics, num_threads=num_threads)


def _bins(stats: CalibrationStatistics, n_bins: int) -> dict[str, np.ndarray]:
    table = stats.top_table(n_bins).sum(axis=0)
    out = {"edges": np.linspace(0.0, 1.0, n_bins + 1), **binned_gaps(table)}
    n = table[:, 0].sum()
    out["ece_contribution"] = np.abs(table[:, 2] - table[:, 1]) / n
    out["esce_contribution"] = (table[:, 2] - table[:, 1]) / n
    if "rows" in stats.has:
        with np.errstate(invalid="ignore", divide="ignore"):
            out["ecd"] = table[:, 3] / table[:, 0]
    return out


def reliability_bins(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    n_bins: int = UNSET.n_bins,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    settings: CalibrationSettings | None = None,
) -> dict[str, np.ndarray]:
    """Compute the per-bin breakdown behind reliability diagrams and the entropic paper's per-bin tables.

    Equal-width right-closed bins on the top-label confidence (on the class-1 probability for
    1-D binary input). Empty bins hold NaN means and zero contributions.

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes in ``[0, K)``; positions equal to ``ignore_index`` are skipped.
    n_bins : int, default 15
        ``M``, the number of equal-width bins.
    from_logits : bool, default False
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).
    next_token : bool, default False
        Causal-LM input: logits ``(N, T, V)`` at position ``t`` scored against ``labels[:, t + 1]``,
        as the model's own loss shifts them (labels unshifted).
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

    Returns
    -------
    dict of str to ndarray
        ``edges`` (M+1), and per bin ``count``, ``confidence`` (mean), ``accuracy`` (fraction
        correct, or of positives for binary), ``gap = accuracy - confidence``,
        ``ece_contribution = n_b/N |gap|``, ``esce_contribution = n_b/N gap`` and ``ecd`` (mean
        per-sample ECD).

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    Examples
    --------
    >>> b = reliability_bins([[0.9, 0.1], [0.2, 0.8]], [0, 0], n_bins=5)
    >>> b["count"].tolist(), b["gap"][4].round(2)
    ([0.0, 0.0, 0.0, 1.0, 1.0], np.float64(0.1))
    """
    settings = resolve_settings(
        settings, n_bins=n_bins, from_logits=from_logits, ignore_index=ignore_index, next_token=next_token
    )
    _, stats = _report(probs, labels, ("ece", "ecd"), settings)
    return _bins(stats, settings.n_bins)


def calibration_report(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    metrics: Iterable[str] | None = None,
    from_logits: bool | None = None,
    multilabel: bool | None = None,
    next_token: bool | None = None,
    ignore_index: int = UNSET.ignore_index,
    n_bins: int = UNSET.n_bins,
    ace_ranges: int = UNSET.ace_ranges,
    sce_bins: int = UNSET.sce_bins,
    rbece_bins: int = UNSET.rbece_bins,
    theta: float = UNSET.theta,
    fce_bins: int = UNSET.fce_bins,
    esce_bins: int = UNSET.esce_bins,
    eps: float = UNSET.eps,
    num_threads: int | None = None,
    fce_variant: str = UNSET.fce_variant,
    coverage: float = UNSET.coverage,
    settings: CalibrationSettings | None = None,
) -> dict[str, Any]:
    """Compute every metric in one pass over the data, ACE exact.

    Exact ACE adds a second pass that copies only the samples of the fine buckets an
    equal-mass range boundary cuts (on rows of 16 classes or more and up to 32 ``sce_bins``,
    also those a class-wise bin edge cuts: SCE's bins are then built from the ACE buckets
    instead of a second histogram in the first pass).

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes in ``[0, K)``; positions equal to ``ignore_index`` are skipped.
    metrics : iterable of str, optional
        Names from :data:`calibkit.METRICS` (default: all, but ACE only by name over a vocabulary
        or 2,048 classes or more: see Notes); the pass then skips the sums only the others need
        (e.g. the per-entry logs of ECD, NLL and Brier).
    from_logits : bool, optional
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly. Default
        False (None stands for "not given", so that a contradiction with ``settings`` is seen).
    multilabel : bool, optional
        Multi-label input (default False): ``(N, K)`` label probabilities with multi-hot labels;
        the result is then :func:`calibkit.multilabel_report`'s (per label, macro, weighted,
        micro), not this function's.
    next_token : bool, optional
        Causal-LM input (default False): logits ``(N, T, V)`` scored at position ``t`` against
        ``labels[:, t + 1]``, as the model's own loss shifts them (labels ``(N, T)``, unshifted;
        the last position of each sequence has no label).
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).
    n_bins, ace_ranges, sce_bins, rbece_bins, theta, fce_bins, esce_bins, eps, fce_variant, coverage
        The settings of :class:`~calibkit.metrics.settings.CalibrationSettings` (SPEC.md's
        defaults); ``fce_variant="authors"`` reports FCE as the fuzzy-binning authors' code
        computes it (see :func:`fce`). A keyword given with ``settings`` is a ``ValueError``
        naming both values, even when it equals the default.
    num_threads : int, optional
        Threads of the pass (default: the CPUs available).
    settings : CalibrationSettings, optional
        All settings at once, instead of the keywords (not both).

    Returns
    -------
    dict
        The keys of :data:`calibkit.METRICS` (``ece, mce, ece_l2, ece_l2_debiased, ace, sce,
        subset_ece, cece, msece, wsece, ece_variance, rbece, fce, overconfidence, ecd, esce,
        brier, nll``: the functions of the same names, with these settings) or those asked for,
        then ``ace_error_bound`` (0 here: ACE is exact), ``accuracy``, ``n`` (samples after
        masking) and ``num_classes``. Without ``metrics``, ``ace`` and ``ace_error_bound`` are
        left out over a vocabulary (``next_token``) or 2,048 classes or more (see Notes).

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    Notes
    -----
    ACE's sums are ``K x 1,026`` buckets, where every other metric's grow with the entries: at
    16,000 classes ACE alone costs 13 times what it costs at 1,000 classes on the same 3.2M
    entries (``benchmarks/vocabulary_cost.py``). So the default report over a vocabulary
    (``next_token=True``) or over ``calibkit.metrics.registry.WIDE_CLASSES`` (2,048) classes or
    more (a product or entity head) leaves ACE out; ``metrics=[..., "ace"]`` computes it, exact,
    as defined in SPEC.md.

    Examples
    --------
    >>> r = calibration_report([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1, 1], theta=0)
    >>> round(r["ece"], 4), r["accuracy"], r["n"], r["num_classes"]
    (0.3, 0.75, 4, 2)
    """
    given = settings_keywords(locals())
    settings = resolve_settings(settings, **given)
    if settings.multilabel:
        return exact_label_report(probs, labels, label_metric_names(metrics), settings, check_num_threads(num_threads))
    names = metric_names(metrics, settings)  # a bad name is refused before the input is read
    # The default report is chosen by exact_report, which knows the classes (ACE by name only from WIDE_CLASSES on).
    return _report(probs, labels, names if metrics is not None else None, settings, num_threads=num_threads)[0]
