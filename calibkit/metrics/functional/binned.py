"""Binned top-label calibration errors: ECE and its L2, max and debiased forms, ACE and overconfidence.

Guo et al. 2017 (ECE, MCE), Kumar et al. 2019 (L2 and its debiased estimate), Nixon et al. 2019
(ACE), Thulasidasan et al. 2019 (overconfidence). Formulas: SPEC.md and
:mod:`calibkit.metrics.formulas`.
"""

from __future__ import annotations

import numpy as np

from calibkit.metrics.functional.core import NORMS, ArrayLike, _bins, _report
from calibkit.metrics.settings import UNSET, CalibrationSettings, renamed, resolve_settings


def ece(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    n_bins: int = UNSET.n_bins,
    norm: str = "l1",
    debias: bool = False,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    return_bins: bool = False,
    settings: CalibrationSettings | None = None,
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
    next_token : bool, default False
        Causal-LM input: logits ``(N, T, V)`` at position ``t`` scored against ``labels[:, t + 1]``,
        as the model's own loss shifts them (labels unshifted).
    return_bins : bool, default False
        Also return :func:`reliability_bins` on the same bins.
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

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
    settings = resolve_settings(
        settings, n_bins=n_bins, from_logits=from_logits, ignore_index=ignore_index, next_token=next_token
    )
    report, stats = _report(probs, labels, (name, "ecd") if return_bins else (name,), settings)
    return (report[name], _bins(stats, settings.n_bins)) if return_bins else report[name]


def mce(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    n_bins: int = UNSET.n_bins,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    settings: CalibrationSettings | None = None,
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
    next_token : bool, default False
        Causal-LM input: logits ``(N, T, V)`` at position ``t`` scored against ``labels[:, t + 1]``,
        as the model's own loss shifts them (labels unshifted).
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

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
    settings = resolve_settings(
        settings, n_bins=n_bins, from_logits=from_logits, ignore_index=ignore_index, next_token=next_token
    )
    return _report(probs, labels, ("mce",), settings)[0]["mce"]


def ece_l2(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    n_bins: int = UNSET.n_bins,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    settings: CalibrationSettings | None = None,
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
    next_token : bool, default False
        Causal-LM input: logits ``(N, T, V)`` at position ``t`` scored against ``labels[:, t + 1]``,
        as the model's own loss shifts them (labels unshifted).
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

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
    return ece(
        probs,
        labels,
        n_bins=n_bins,
        norm="l2",
        from_logits=from_logits,
        ignore_index=ignore_index,
        next_token=next_token,
        settings=settings,
    )


def ece_l2_debiased(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    n_bins: int = UNSET.n_bins,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    settings: CalibrationSettings | None = None,
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
    next_token : bool, default False
        Causal-LM input: logits ``(N, T, V)`` at position ``t`` scored against ``labels[:, t + 1]``,
        as the model's own loss shifts them (labels unshifted).
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

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
    return ece(
        probs,
        labels,
        n_bins=n_bins,
        norm="l2",
        debias=True,
        from_logits=from_logits,
        ignore_index=ignore_index,
        next_token=next_token,
        settings=settings,
    )


def ace(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    ace_ranges: int = UNSET.ace_ranges,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    n_ranges: int | None = None,
    settings: CalibrationSettings | None = None,
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
    next_token : bool, default False
        Causal-LM input: logits ``(N, T, V)`` at position ``t`` scored against ``labels[:, t + 1]``,
        as the model's own loss shifts them (labels unshifted).
    n_ranges : int, optional
        The old name of ``ace_ranges``; still works, with a FutureWarning.
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

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
    ace_ranges = renamed("n_ranges", n_ranges, "ace_ranges", ace_ranges, "ace()")
    settings = resolve_settings(
        settings, ace_ranges=ace_ranges, from_logits=from_logits, ignore_index=ignore_index, next_token=next_token
    )
    return _report(probs, labels, ("ace",), settings)[0]["ace"]


def overconfidence(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    settings: CalibrationSettings | None = None,
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
    next_token : bool, default False
        Causal-LM input: logits ``(N, T, V)`` at position ``t`` scored against ``labels[:, t + 1]``,
        as the model's own loss shifts them (labels unshifted).
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

    Returns
    -------
    float
        OF in [0, 1]; NaN, with a :class:`NoWrongPredictionWarning`, when every prediction is correct.

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
    settings = resolve_settings(settings, from_logits=from_logits, ignore_index=ignore_index, next_token=next_token)
    return _report(probs, labels, ("overconfidence",), settings)[0]["overconfidence"]
