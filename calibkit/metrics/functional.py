"""One function per calibration metric, on numpy arrays or torch tensors.

Every function takes ``probs`` of shape ``(N,)`` (probability of class 1, binary), ``(N, K)``
or ``(N, L, K)`` (token classification) and integer ``labels`` of shape ``(N,)`` or
``(N, L)``; positions whose label is ``ignore_index`` (-100, as ``transformers`` pads) are
skipped. ``from_logits=True`` applies softmax (sigmoid for 1-D input) on the fly. Each is one
pass of :class:`~calibkit.metrics.statistics.CalibrationAccumulator` over the batch, so
:func:`calibration_report` costs about as much as a single metric. Conventions: SPEC.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from calibkit.metrics.accumulator import exact_report
from calibkit.metrics.registry import metric_names
from calibkit.metrics.settings import CalibrationSettings, either, renamed
from calibkit.metrics.statistics import CalibrationStatistics, binned_gaps
from calibkit.metrics.validation import check_num_threads, prepare

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
    prep = prepare(probs, labels, from_logits=settings.from_logits, ignore_index=settings.ignore_index)
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
    n_bins: int = 15,
    from_logits: bool = False,
    ignore_index: int = -100,
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
    settings = CalibrationSettings(n_bins=n_bins, from_logits=from_logits, ignore_index=ignore_index)
    _, stats = _report(probs, labels, ("ece", "ecd"), settings)
    return _bins(stats, settings.n_bins)


def ece(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    n_bins: int = 15,
    norm: str = "l1",
    debias: bool = False,
    from_logits: bool = False,
    ignore_index: int = -100,
    return_bins: bool = False,
) -> float | tuple[float, dict[str, np.ndarray]]:
    """Compute the expected calibration error (Guo et al. 2017 [1]_): ``sum_b n_b/N |acc_b - conf_b|``.

    Top-label confidence ``max_k p_k`` in ``n_bins`` equal-width bins ``((m-1)/M, m/M]``;
    for 1-D binary input the class-1 probability against the fraction of positives (the
    entropic paper's convention).

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes in ``[0, K)``; positions equal to ``ignore_index`` are skipped.
    n_bins : int, default 15
        ``M``, the number of equal-width bins of the top-label confidence.
    norm : {"l1", "l2", "max"}, default "l1"
        As torchmetrics' ``CalibrationError``: ``"l1"`` the ECE above; ``"l2"`` the L2
        calibration error ``sqrt(sum_b n_b/N (acc_b - conf_b)^2)``; ``"max"`` the largest gap
        of a non-empty bin, :func:`mce`.
    debias : bool, default False
        With ``norm="l2"``: the debiased estimate of Kumar et al. 2019 [2]_ (their
        ``unbiased_l2_ce``): each bin of ``n_b >= 2`` samples contributes
        ``n_b/N [(acc_b - conf_b)^2 - acc_b (1 - acc_b) / (n_b - 1)]`` (its squared gap less the
        variance of ``acc_b``), and the result is the square root of the positive part of the sum.
    from_logits : bool, default False
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).
    return_bins : bool, default False
        Also return :func:`reliability_bins` on the same bins.

    Returns
    -------
    float, or (float, dict) with ``return_bins``
        The calibration error in [0, 1], and the per-bin breakdown.

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    References
    ----------
    .. [1] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger (2017). "On Calibration of Modern
       Neural Networks". ICML 2017, 1321-1330.
    .. [2] A. Kumar, P. Liang and T. Ma (2019). "Verified Uncertainty Calibration". NeurIPS 2019.
    .. [3] SPEC.md, "Binning": the definition, defaults and conventions
       this function follows.

    Examples
    --------
    >>> round(ece([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1, 1]), 4)
    0.3
    >>> round(ece([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1, 1], norm="l2"), 4)
    0.3536
    """
    if norm not in NORMS:
        raise ValueError(f"`norm` must be one of {list(NORMS)}, got {norm!r}")
    if not isinstance(debias, bool):
        raise ValueError(f"`debias` must be True or False, got {debias!r}")
    if debias and norm != "l2":
        raise ValueError(f"`debias=True` is defined for norm='l2' only (Kumar et al. 2019), got norm={norm!r}")
    name = {"l1": "ece", "max": "mce", "l2": "ece_l2_debiased" if debias else "ece_l2"}[norm]
    settings = CalibrationSettings(n_bins=n_bins, from_logits=from_logits, ignore_index=ignore_index)
    report, stats = _report(probs, labels, (name, "ecd") if return_bins else (name,), settings)
    return (report[name], _bins(stats, settings.n_bins)) if return_bins else report[name]


def mce(
    probs: ArrayLike, labels: ArrayLike, *, n_bins: int = 15, from_logits: bool = False, ignore_index: int = -100
) -> float:
    """Compute the maximum calibration error (Naeini et al. 2015 [1]_): ``max_b |acc_b - conf_b|``.

    The largest gap over the non-empty equal-width bins of the top-label confidence (the
    class-1 probability for 1-D binary input); ``ece(..., norm="max")``.

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes in ``[0, K)``; positions equal to ``ignore_index`` are skipped.
    n_bins : int, default 15
        ``M``, the number of equal-width bins of the top-label confidence.
    from_logits : bool, default False
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).

    Returns
    -------
    float
        MCE in [0, 1].

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    References
    ----------
    .. [1] M. P. Naeini, G. F. Cooper and M. Hauskrecht (2015). "Obtaining Well Calibrated
       Probabilities Using Bayesian Binning". AAAI 2015, 2901-2907.
    .. [2] SPEC.md, "Metrics": the definition, defaults and conventions
       this function follows.

    Examples
    --------
    >>> mce([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1, 1])
    0.6
    """
    settings = CalibrationSettings(n_bins=n_bins, from_logits=from_logits, ignore_index=ignore_index)
    return _report(probs, labels, ("mce",), settings)[0]["mce"]


def ece_l2(
    probs: ArrayLike, labels: ArrayLike, *, n_bins: int = 15, from_logits: bool = False, ignore_index: int = -100
) -> float:
    """Compute the L2 calibration error: ``sqrt(sum_b n_b/N (acc_b - conf_b)^2)``, i.e. ``ece(..., norm="l2")``.

    The plug-in estimate of Kumar et al. 2019 [1]_ (torchmetrics' ``norm="l2"``); it is biased
    upwards on small bins, which :func:`ece_l2_debiased` corrects.

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes in ``[0, K)``; positions equal to ``ignore_index`` are skipped.
    n_bins : int, default 15
        ``M``, the number of equal-width bins of the top-label confidence.
    from_logits : bool, default False
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).

    Returns
    -------
    float
        The L2 calibration error in [0, 1].

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    References
    ----------
    .. [1] A. Kumar, P. Liang and T. Ma (2019). "Verified Uncertainty Calibration". NeurIPS 2019.
    .. [2] SPEC.md, "Metrics": the definition, defaults and conventions
       this function follows.

    Examples
    --------
    >>> round(ece_l2([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1, 1]), 4)
    0.3536
    """
    return ece(probs, labels, n_bins=n_bins, norm="l2", from_logits=from_logits, ignore_index=ignore_index)


def ece_l2_debiased(
    probs: ArrayLike, labels: ArrayLike, *, n_bins: int = 15, from_logits: bool = False, ignore_index: int = -100
) -> float:
    """Compute the debiased L2 calibration error of Kumar et al. 2019 [1]_: ``ece(..., norm="l2", debias=True)``.

    Each bin of ``n_b >= 2`` samples contributes ``n_b/N [(acc_b - conf_b)^2 - acc_b (1 - acc_b) /
    (n_b - 1)]``, its squared gap less the sampling variance of ``acc_b`` (their
    ``unbiased_l2_ce``); the result is the square root of the positive part of the sum.

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes in ``[0, K)``; positions equal to ``ignore_index`` are skipped.
    n_bins : int, default 15
        ``M``, the number of equal-width bins of the top-label confidence.
    from_logits : bool, default False
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).

    Returns
    -------
    float
        The debiased L2 calibration error, >= 0.

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    References
    ----------
    .. [1] A. Kumar, P. Liang and T. Ma (2019). "Verified Uncertainty Calibration". NeurIPS 2019.
    .. [2] SPEC.md, "Metrics": the definition, defaults and conventions
       this function follows.
    """
    return ece(probs, labels, n_bins=n_bins, norm="l2", debias=True, from_logits=from_logits, ignore_index=ignore_index)


def ace(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    ace_ranges: int = 15,
    from_logits: bool = False,
    ignore_index: int = -100,
    n_ranges: int | None = None,
) -> float:
    """Compute the adaptive calibration error (Nixon et al. 2019 [1]_), class-conditional over equal-mass ranges.

    ``1/(K R) sum_k sum_r |acc_rk - conf_rk|``: for every class ``k`` the column ``p_k`` is
    sorted and cut into ``R`` ranges of equal size (``np.array_split`` sizes); ``acc_rk`` is the
    fraction with ``y = k`` and ``conf_rk`` the mean ``p_k`` in range ``r``. Empty ranges
    (``N < R``) are left out of the mean. Tied values that a range boundary cuts share their
    mean outcome, so the result does not depend on the order of the samples.

    Exact: a fine histogram locates the boundaries and only the samples of the buckets they
    cut are sorted. (:class:`CalibrationAccumulator` gives the streaming estimate with a bound.)

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes in ``[0, K)``; positions equal to ``ignore_index`` are skipped.
    ace_ranges : int, default 15
        ``R``, the number of equal-mass ranges per class column.
    from_logits : bool, default False
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).
    n_ranges : int, optional
        The old name of ``ace_ranges``; still works, with a FutureWarning.

    Returns
    -------
    float
        ACE in [0, 1].

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    References
    ----------
    .. [1] J. Nixon, M. W. Dusenberry, L. Zhang, G. Jerfel and D. Tran (2019). "Measuring
       Calibration in Deep Learning". CVPR Workshops 2019.
    .. [2] SPEC.md, "Metrics": the definition, defaults and conventions
       this function follows.

    Examples
    --------
    >>> ace([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1, 1], ace_ranges=2)
    0.25
    """
    ace_ranges = renamed("n_ranges", n_ranges, "ace_ranges", ace_ranges, 15, "ace()")
    settings = CalibrationSettings(ace_ranges=ace_ranges, from_logits=from_logits, ignore_index=ignore_index)
    return _report(probs, labels, ("ace",), settings)[0]["ace"]


def sce(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    sce_bins: int = 15,
    from_logits: bool = False,
    ignore_index: int = -100,
    n_bins: int | None = None,
) -> float:
    """Compute the static calibration error, also called class-wise ECE (Nixon et al. 2019 [1]_).

    ``1/K sum_k sum_b n_bk/N |acc_bk - conf_bk|`` with equal-width bins on each column ``p_k``
    and outcome ``1[y = k]``; 1-D binary input counts both columns ``1 - p`` and ``p``.

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes in ``[0, K)``; positions equal to ``ignore_index`` are skipped.
    sce_bins : int, default 15
        ``M``, the number of equal-width bins per class column.
    from_logits : bool, default False
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).
    n_bins : int, optional
        The old name of ``sce_bins`` here; still works, with a FutureWarning.

    Returns
    -------
    float
        SCE in [0, 1].

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    References
    ----------
    .. [1] J. Nixon, M. W. Dusenberry, L. Zhang, G. Jerfel and D. Tran (2019). "Measuring
       Calibration in Deep Learning". CVPR Workshops 2019.
    .. [2] SPEC.md, "Metrics": the definition, defaults and conventions
       this function follows.

    Examples
    --------
    >>> round(sce([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1, 1]), 4)
    0.3
    """
    sce_bins = renamed("n_bins", n_bins, "sce_bins", sce_bins, 15, "sce()")
    settings = CalibrationSettings(sce_bins=sce_bins, from_logits=from_logits, ignore_index=ignore_index)
    return _report(probs, labels, ("sce",), settings)[0]["sce"]


def subset_ece(
    probs: ArrayLike, labels: ArrayLike, *, n_bins: int = 15, from_logits: bool = False, ignore_index: int = -100
) -> np.ndarray:
    """Compute each class's ECE ``ECE_k``: top-label ECE on the subset ``{i : y_i = k}`` (class-wise paper [1]_, §3.1).

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes in ``[0, K)``; positions equal to ``ignore_index`` are skipped.
    n_bins : int, default 15
        ``M``, the number of equal-width bins of the top-label confidence.
    from_logits : bool, default False
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).

    Returns
    -------
    ndarray of shape (K,)
        ``ECE_k`` per class; NaN (with a :class:`MissingClassWarning`) for absent classes.

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    References
    ----------
    .. [1] S. Obadinma, H. Guo and X. Zhu (2021). "Class-wise Calibration: A Case Study on
       COVID-19 Hate Speech". Canadian Conference on Artificial Intelligence 2021.
    .. [2] SPEC.md, "Metrics": the definition, defaults and conventions
       this function follows.

    Examples
    --------
    >>> subset_ece([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1, 1]).round(4).tolist()
    [0.1, 0.3667]
    """
    return _class_wise("subset_ece", probs, labels, n_bins, from_logits, ignore_index)


def _class_wise(name: str, probs, labels, n_bins, from_logits, ignore_index) -> Any:
    settings = CalibrationSettings(n_bins=n_bins, from_logits=from_logits, ignore_index=ignore_index)
    return _report(probs, labels, (name,), settings)[0][name]


def cece(
    probs: ArrayLike, labels: ArrayLike, *, n_bins: int = 15, from_logits: bool = False, ignore_index: int = -100
) -> float:
    """Compute the contraharmonic ECE (class-wise paper [1]_, eq 3.4): ``sum_k ECE_k^2 / sum_k ECE_k``.

    Over the classes present; 0 when every ``ECE_k`` is 0. Dominated by the worst-calibrated
    classes, unlike ECE, which the majority class dominates.

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes in ``[0, K)``; positions equal to ``ignore_index`` are skipped.
    n_bins : int, default 15
        ``M``, the number of equal-width bins of the top-label confidence.
    from_logits : bool, default False
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).

    Returns
    -------
    float
        CECE in [0, 1].

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    References
    ----------
    .. [1] S. Obadinma, H. Guo and X. Zhu (2021). "Class-wise Calibration: A Case Study on
       COVID-19 Hate Speech". Canadian Conference on Artificial Intelligence 2021.
    .. [2] SPEC.md, "Metrics": the definition, defaults and conventions
       this function follows.

    Examples
    --------
    >>> round(cece([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1, 1]), 4)
    0.3095
    """
    return _class_wise("cece", probs, labels, n_bins, from_logits, ignore_index)


def msece(
    probs: ArrayLike, labels: ArrayLike, *, n_bins: int = 15, from_logits: bool = False, ignore_index: int = -100
) -> float:
    """Compute the mean subset ECE (class-wise paper [1]_, eq 3.5): ``mean_k ECE_k`` over the classes present.

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes in ``[0, K)``; positions equal to ``ignore_index`` are skipped.
    n_bins : int, default 15
        ``M``, the number of equal-width bins of the top-label confidence.
    from_logits : bool, default False
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).

    Returns
    -------
    float
        MSECE in [0, 1].

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    References
    ----------
    .. [1] S. Obadinma, H. Guo and X. Zhu (2021). "Class-wise Calibration: A Case Study on
       COVID-19 Hate Speech". Canadian Conference on Artificial Intelligence 2021.
    .. [2] SPEC.md, "Metrics": the definition, defaults and conventions
       this function follows.

    Examples
    --------
    >>> round(msece([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1, 1]), 4)
    0.2333
    """
    return _class_wise("msece", probs, labels, n_bins, from_logits, ignore_index)


def wsece(
    probs: ArrayLike, labels: ArrayLike, *, n_bins: int = 15, from_logits: bool = False, ignore_index: int = -100
) -> float:
    """Compute the weighted subset ECE (class-wise paper [1]_, eq 3.6): ``sum_k n_k/N ECE_k``.

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes in ``[0, K)``; positions equal to ``ignore_index`` are skipped.
    n_bins : int, default 15
        ``M``, the number of equal-width bins of the top-label confidence.
    from_logits : bool, default False
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).

    Returns
    -------
    float
        WSECE in [0, 1].

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    References
    ----------
    .. [1] S. Obadinma, H. Guo and X. Zhu (2021). "Class-wise Calibration: A Case Study on
       COVID-19 Hate Speech". Canadian Conference on Artificial Intelligence 2021.
    .. [2] SPEC.md, "Metrics": the definition, defaults and conventions
       this function follows.

    Examples
    --------
    >>> round(wsece([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1, 1]), 4)
    0.3
    """
    return _class_wise("wsece", probs, labels, n_bins, from_logits, ignore_index)


def ece_variance(
    probs: ArrayLike, labels: ArrayLike, *, n_bins: int = 15, from_logits: bool = False, ignore_index: int = -100
) -> float:
    """Compute the variance of the per-class ECEs around the overall ECE (class-wise paper [1]_, eq 3.7).

    ``sum_k (ECE_k - ECE)^2 / K`` over the ``K`` classes present.

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes in ``[0, K)``; positions equal to ``ignore_index`` are skipped.
    n_bins : int, default 15
        ``M``, the number of equal-width bins of the top-label confidence.
    from_logits : bool, default False
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).

    Returns
    -------
    float
        The variance, >= 0.

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    References
    ----------
    .. [1] S. Obadinma, H. Guo and X. Zhu (2021). "Class-wise Calibration: A Case Study on
       COVID-19 Hate Speech". Canadian Conference on Artificial Intelligence 2021.
    .. [2] SPEC.md, "Metrics": the definition, defaults and conventions
       this function follows.

    Examples
    --------
    >>> round(ece_variance([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1, 1]), 4)
    0.0222
    """
    return _class_wise("ece_variance", probs, labels, n_bins, from_logits, ignore_index)


def rbece(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    rbece_bins: int = 20,
    theta: float = 40,
    from_logits: bool = False,
    ignore_index: int = -100,
    n_bins: int | None = None,
) -> float:
    """Compute the region-balanced ECE (region-balanced paper [1]_, eq 2): ``mean_{b : n_b > theta} |acc_b - conf_b|``.

    Unweighted, so the rare low-confidence regions count as much as the crowded top bin.

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes in ``[0, K)``; positions equal to ``ignore_index`` are skipped.
    rbece_bins : int, default 20
        The number of equal-width bins of the top-label confidence.
    theta : float, default 40
        A bin counts only when it holds more than ``theta`` samples.
    from_logits : bool, default False
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).
    n_bins : int, optional
        The old name of ``rbece_bins`` here; still works, with a FutureWarning.

    Returns
    -------
    float
        RBECE in [0, 1]; NaN with an :class:`EmptyRegionWarning` when no bin holds more than
        ``theta`` samples.

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    References
    ----------
    .. [1] H. Dawkins and I. Nejadgholi (2022). "Region-dependent temperature scaling for
       certainty calibration and application to class-imbalanced token classification". ACL 2022.
    .. [2] SPEC.md, "Metrics": the definition, defaults and conventions
       this function follows.

    Examples
    --------
    >>> round(rbece([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1, 1], theta=0), 4)
    0.3
    """
    rbece_bins = renamed("n_bins", n_bins, "rbece_bins", rbece_bins, 20, "rbece()")
    settings = CalibrationSettings(
        rbece_bins=rbece_bins, theta=theta, from_logits=from_logits, ignore_index=ignore_index
    )
    return _report(probs, labels, ("rbece",), settings)[0]["rbece"]


def fce(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    fce_bins: int = 15,
    fce_variant: str = "paper",
    from_logits: bool = False,
    ignore_index: int = -100,
    n_bins: int | None = None,
    variant: str | None = None,
) -> float:
    """Compute the fuzzy calibration error (Bihani & Rayz 2023 [1]_, the fuzzy-binning paper, eq 4-6).

    The top-label confidence ``c_i`` (class-1 probability for 1-D binary input) belongs to
    ``fce_bins`` overlapping trapezoid bins: bin ``m`` spans ``[t0, t1]``, width ``w = 1/M``,
    corners ``t0 -/+ w/4`` and ``t1 -/+ w/4`` (the authors' code), so
    ``mu_m(c) = clip(min((c - t0 + w/4)/(w/2), 1, (t1 + w/4 - c)/(w/2)), 0, 1)``. With
    ``G_m = sum_i mu_m(c_i)``, ``A_m = sum_i mu_m(c_i) a_i`` (``a_i`` = 1 if correct) and ``C_m``:

    ``FCE = sum_m G_m |A_m/G_m - C_m/G_m| / sum_m G_m = sum_m |A_m - C_m| / sum_m G_m``.

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes in ``[0, K)``; positions equal to ``ignore_index`` are skipped.
    fce_bins : int, default 15
        ``M``, the number of fuzzy bins. The authors' code also uses ``M`` fuzzy bins (only its
        ECE's ``M`` means ``M - 1`` bins; SPEC.md).
    fce_variant : {"paper", "authors"}, default "paper"
        ``"paper"``: eq 4-6, ``C_m = sum_i mu_m(c_i) c_i``, confidence over all predictions.
        ``"authors"``: what their published code (``paper_demo/calibration_metrics.py``)
        computes, for comparing with their numbers: each membership computed with their
        corners (ticks ``i / M``, the last one 1.0) and ``skfuzzy.trapmf``'s branches, then
        rounded as their ``round(mu, 3)`` (exact binary value, half to even on exact ties), and
        ``C_m = sum_i mu_m(c_i) a_i c_i``, the confidence of the correct predictions only.
        Then ``A_m - C_m = sum_i mu_m a_i (1 - c_i) >= 0``: no cancellation in a bin, and FCE
        is about the mean of ``a_i (1 - c_i)``, nearly independent of ``M``.
        It reproduces their ``fuzzy_eval.csv`` (``tests/papers``; README "Reproducing the
        papers"). Their code rounds the FCE itself to 3 decimals; this returns it unrounded.
        On float64 input the rounded memberships are theirs bit for bit; their published run
        computed memberships of float32 confidences in float32 (numpy < 2), which moves a few by
        0.001 (their per-bin values differ by up to 7e-6, their FCE by 7e-8).
    from_logits : bool, default False
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).
    n_bins : int, optional
        The old name of ``fce_bins`` here; still works, with a FutureWarning.
    variant : str, optional
        The old name of ``fce_variant``; still works, with a FutureWarning.

    Returns
    -------
    float
        FCE in [0, 1].

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    References
    ----------
    .. [1] G. Bihani and J. T. Rayz (2023). "Calibration Error Estimation Using Fuzzy Binning".
       Code: https://github.com/bihani-g/fce.
    .. [2] SPEC.md, "Metrics" and "FCE membership": the definition, defaults and conventions
       this function follows.

    Examples
    --------
    >>> round(fce([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1, 1]), 4)
    0.3
    >>> round(fce([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1, 1], fce_variant="authors"), 4)
    0.15
    """
    fce_bins = renamed("n_bins", n_bins, "fce_bins", fce_bins, 15, "fce()")
    fce_variant = renamed("variant", variant, "fce_variant", fce_variant, "paper", "fce()")
    settings = CalibrationSettings(
        fce_bins=fce_bins, fce_variant=fce_variant, from_logits=from_logits, ignore_index=ignore_index
    )
    return _report(probs, labels, ("fce",), settings)[0]["fce"]


def overconfidence(
    probs: ArrayLike, labels: ArrayLike, *, from_logits: bool = False, ignore_index: int = -100
) -> float:
    """Compute the overconfidence OF (fuzzy-binning paper [1]_, eq 7): mean confidence of the wrong predictions.

    The confidence is the top-label probability ``max_k p_k`` (``max(p, 1 - p)`` for 1-D binary input).

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes in ``[0, K)``; positions equal to ``ignore_index`` are skipped.
    from_logits : bool, default False
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).

    Returns
    -------
    float
        OF in [0, 1]; NaN when every prediction is correct.

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    References
    ----------
    .. [1] G. Bihani and J. T. Rayz (2023). "Calibration Error Estimation Using Fuzzy Binning".
       Code: https://github.com/bihani-g/fce.
    .. [2] SPEC.md, "Metrics": the definition, defaults and conventions
       this function follows.

    Examples
    --------
    >>> overconfidence([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1, 1])
    0.6
    """
    settings = CalibrationSettings(from_logits=from_logits, ignore_index=ignore_index)
    return _report(probs, labels, ("overconfidence",), settings)[0]["overconfidence"]


def ecd(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    eps: float = 1e-12,
    from_logits: bool = False,
    ignore_index: int = -100,
    return_bins: bool = False,
    n_bins: int = 10,
) -> float | tuple[float, dict[str, np.ndarray]]:
    """Compute the entropic calibration difference (entropic paper [1]_, eq 12 and 15).

    ``mean_i [sum_k p_ik log p_ik - log p_{i,y_i}]``; binary: ``mean (p - y) log(p / (1 - p))``.
    Positive means over-confident, negative under-confident.

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes in ``[0, K)``; positions equal to ``ignore_index`` are skipped.
    eps : float, default 1e-12
        Logs clip probabilities at ``eps``.
    from_logits : bool, default False
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).
    return_bins : bool, default False
        Also return the per-bin means of :func:`reliability_bins` (``n_bins`` bins).
    n_bins : int, default 10
        Bins of the breakdown returned with ``return_bins``; the ECD itself has no bins.

    Returns
    -------
    float, or (float, dict) with ``return_bins``
        ECD (signed, 0 is calibrated), and the per-bin breakdown.

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    References
    ----------
    .. [1] D. J. Sumler, L. Devlin, S. Maskell and R. O. Lane (2025). "An Entropic Metric for
       Measuring Calibration of Machine Learning Models".
    .. [2] SPEC.md, "Metrics": the definition, defaults and conventions
       this function follows.

    Examples
    --------
    >>> ecd([0.5, 0.5, 1.0], [0, 1, 1])
    0.0
    """
    settings = CalibrationSettings(eps=eps, n_bins=n_bins, from_logits=from_logits, ignore_index=ignore_index)
    report, stats = _report(probs, labels, ("ecd", "ece") if return_bins else ("ecd",), settings)
    return (report["ecd"], _bins(stats, settings.n_bins)) if return_bins else report["ecd"]


def esce(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    esce_bins: int = 10,
    from_logits: bool = False,
    ignore_index: int = -100,
    return_bins: bool = False,
    n_bins: int | None = None,
) -> float | tuple[float, dict[str, np.ndarray]]:
    """Compute the expected signed calibration error (entropic paper [1]_, eq 6): ``sum_b n_b/N (acc_b - conf_b)``.

    Negative means over-confident. 1-D binary input: fraction of positives minus mean
    class-1 probability per bin.

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes in ``[0, K)``; positions equal to ``ignore_index`` are skipped.
    esce_bins : int, default 10
        The number of equal-width bins of the top-label confidence.
    from_logits : bool, default False
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).
    return_bins : bool, default False
        Also return :func:`reliability_bins` on the same bins.
    n_bins : int, optional
        The old name of ``esce_bins`` here; still works, with a FutureWarning.

    Returns
    -------
    float, or (float, dict) with ``return_bins``
        ESCE in [-1, 1], and the per-bin breakdown.

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    References
    ----------
    .. [1] D. J. Sumler, L. Devlin, S. Maskell and R. O. Lane (2025). "An Entropic Metric for
       Measuring Calibration of Machine Learning Models".
    .. [2] SPEC.md, "Metrics": the definition, defaults and conventions
       this function follows.

    Examples
    --------
    >>> round(esce([[0.9, 0.1], [0.8, 0.2], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1, 1]), 4)
    -0.25
    """
    esce_bins = renamed("n_bins", n_bins, "esce_bins", esce_bins, 10, "esce()")
    settings = CalibrationSettings(esce_bins=esce_bins, from_logits=from_logits, ignore_index=ignore_index)
    report, stats = _report(probs, labels, ("esce", "ecd") if return_bins else ("esce",), settings)
    return (report["esce"], _bins(stats, settings.esce_bins)) if return_bins else report["esce"]


def brier(probs: ArrayLike, labels: ArrayLike, *, from_logits: bool = False, ignore_index: int = -100) -> float:
    """Compute the Brier score [1]_: ``mean_i sum_k (p_ik - 1[y_i = k])^2``; 1-D binary input: ``mean (p - y)^2``.

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes in ``[0, K)``; positions equal to ``ignore_index`` are skipped.
    from_logits : bool, default False
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).

    Returns
    -------
    float
        The Brier score in [0, 2] (in [0, 1] for 1-D binary input).

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    References
    ----------
    .. [1] G. W. Brier (1950). "Verification of Forecasts Expressed in Terms of Probability".
       Monthly Weather Review 78(1), 1-3.
    .. [2] SPEC.md, "Metrics": the definition, defaults and conventions
       this function follows.

    Examples
    --------
    >>> round(brier([[0.9, 0.1], [0.2, 0.8]], [0, 1]), 4)
    0.05
    """
    settings = CalibrationSettings(from_logits=from_logits, ignore_index=ignore_index)
    return _report(probs, labels, ("brier",), settings)[0]["brier"]


def nll(
    probs: ArrayLike, labels: ArrayLike, *, eps: float = 1e-12, from_logits: bool = False, ignore_index: int = -100
) -> float:
    """Compute the negative log-likelihood [1]_: ``mean_i -log max(p_{i,y_i}, eps)``.

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N,), (N, K) or (N, L, K)
        Probabilities (logits with ``from_logits=True``): of class 1 for binary input, one row
        per sample, or one row per token.
    labels : array-like of int, shape (N,) or (N, L)
        True classes in ``[0, K)``; positions equal to ``ignore_index`` are skipped.
    eps : float, default 1e-12
        Probabilities are clipped at ``eps`` inside the log.
    from_logits : bool, default False
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).

    Returns
    -------
    float
        NLL, >= 0.

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    References
    ----------
    .. [1] A. Galdran and M. Riera i Marin. "Part III: Model Calibration (tutorial slides)".
    .. [2] SPEC.md, "Metrics": the definition, defaults and conventions
       this function follows.

    Examples
    --------
    >>> round(nll([[0.5, 0.5], [0.2, 0.8]], [0, 1]), 4)
    0.4581
    """
    settings = CalibrationSettings(eps=eps, from_logits=from_logits, ignore_index=ignore_index)
    return _report(probs, labels, ("nll",), settings)[0]["nll"]


def calibration_report(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    metrics: Iterable[str] | None = None,
    from_logits: bool = False,
    ignore_index: int = -100,
    n_bins: int = 15,
    ace_ranges: int = 15,
    sce_bins: int = 15,
    rbece_bins: int = 20,
    theta: float = 40,
    fce_bins: int = 15,
    esce_bins: int = 10,
    eps: float = 1e-12,
    num_threads: int | None = None,
    fce_variant: str = "paper",
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
        Names from :data:`calibkit.METRICS` (default: all); the pass then skips the sums only
        the others need (e.g. the per-entry logs of ECD, NLL and Brier).
    from_logits : bool, default False
        ``probs`` holds logits: softmax (sigmoid for 1-D input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (``transformers`` pads labels with -100).
    n_bins, ace_ranges, sce_bins, rbece_bins, theta, fce_bins, esce_bins, eps, fce_variant
        The settings of :class:`~calibkit.metrics.settings.CalibrationSettings` (SPEC.md's
        defaults); ``fce_variant="authors"`` reports FCE as the fuzzy-binning authors' code
        computes it (see :func:`fce`).
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
        masking) and ``num_classes``.

    Raises
    ------
    ValueError
        On bad input, naming the argument and the position: NaN or inf, probabilities outside
        [0, 1] or rows not summing to 1, labels outside ``[0, K)``, shapes that do not match, a
        bad setting, or no sample left after masking.

    Examples
    --------
    >>> r = calibration_report([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], [0, 1, 1, 1], theta=0)
    >>> round(r["ece"], 4), r["accuracy"], r["n"], r["num_classes"]
    (0.3, 0.75, 4, 2)
    """
    given = CalibrationSettings(
        n_bins=n_bins,
        ace_ranges=ace_ranges,
        sce_bins=sce_bins,
        rbece_bins=rbece_bins,
        theta=theta,
        fce_bins=fce_bins,
        fce_variant=fce_variant,
        esce_bins=esce_bins,
        eps=eps,
        from_logits=from_logits,
        ignore_index=ignore_index,
    )
    names = metric_names(metrics)
    return _report(probs, labels, names, either(settings, given), num_threads=num_threads)[0]
