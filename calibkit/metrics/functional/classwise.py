"""Class-wise calibration: per-class ECE and its summaries (CECE, MSECE, WSECE, ECE variance), SCE and subset ECE.

Obadinma et al. 2021 (the class-wise summaries), Nixon et al. 2019 (SCE). Formulas: SPEC.md and
:mod:`calibkit.metrics.formulas`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibkit.metrics.functional.core import ArrayLike, _report
from calibkit.metrics.settings import UNSET, CalibrationSettings, renamed, resolve_settings


def sce(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    sce_bins: int = UNSET.sce_bins,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    n_bins: int | None = None,
    settings: CalibrationSettings | None = None,
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
    next_token : bool, default False
        Causal-LM input: logits ``(N, T, V)`` at position ``t`` scored against ``labels[:, t + 1]``,
        as the model's own loss shifts them (labels unshifted).
    n_bins : int, optional
        The old name of ``sce_bins`` here; still works, with a FutureWarning.
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

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
    sce_bins = renamed("n_bins", n_bins, "sce_bins", sce_bins, "sce()")
    settings = resolve_settings(
        settings, sce_bins=sce_bins, from_logits=from_logits, ignore_index=ignore_index, next_token=next_token
    )
    return _report(probs, labels, ("sce",), settings)[0]["sce"]


def subset_ece(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    n_bins: int = UNSET.n_bins,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    settings: CalibrationSettings | None = None,
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
    next_token : bool, default False
        Causal-LM input: logits ``(N, T, V)`` at position ``t`` scored against ``labels[:, t + 1]``,
        as the model's own loss shifts them (labels unshifted).
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

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
    return _class_wise("subset_ece", probs, labels, settings, n_bins, from_logits, ignore_index, next_token)


def _class_wise(name: str, probs, labels, settings, n_bins, from_logits, ignore_index, next_token) -> Any:
    settings = resolve_settings(
        settings, n_bins=n_bins, from_logits=from_logits, ignore_index=ignore_index, next_token=next_token
    )
    return _report(probs, labels, (name,), settings)[0][name]


def cece(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    n_bins: int = UNSET.n_bins,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    settings: CalibrationSettings | None = None,
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
    next_token : bool, default False
        Causal-LM input: logits ``(N, T, V)`` at position ``t`` scored against ``labels[:, t + 1]``,
        as the model's own loss shifts them (labels unshifted).
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

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
    return _class_wise("cece", probs, labels, settings, n_bins, from_logits, ignore_index, next_token)


def msece(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    n_bins: int = UNSET.n_bins,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    settings: CalibrationSettings | None = None,
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
    next_token : bool, default False
        Causal-LM input: logits ``(N, T, V)`` at position ``t`` scored against ``labels[:, t + 1]``,
        as the model's own loss shifts them (labels unshifted).
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

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
    return _class_wise("msece", probs, labels, settings, n_bins, from_logits, ignore_index, next_token)


def wsece(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    n_bins: int = UNSET.n_bins,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    settings: CalibrationSettings | None = None,
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
    next_token : bool, default False
        Causal-LM input: logits ``(N, T, V)`` at position ``t`` scored against ``labels[:, t + 1]``,
        as the model's own loss shifts them (labels unshifted).
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

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
    return _class_wise("wsece", probs, labels, settings, n_bins, from_logits, ignore_index, next_token)


def ece_variance(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    n_bins: int = UNSET.n_bins,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    settings: CalibrationSettings | None = None,
) -> float:
    """Compute the variance of the per-class ECEs around the overall ECE (class-wise paper [1]_, eq 3.7).

    ``sum_k (ECE_k - ECE)^2 / K`` over the ``K`` classes present, ECE the top-label one (for 1-D
    binary input that of ``[1 - p, p]``, as the ``ECE_k``; :func:`calibkit.ece` bins the class-1
    probability there, SPEC.md).

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
    return _class_wise("ece_variance", probs, labels, settings, n_bins, from_logits, ignore_index, next_token)
