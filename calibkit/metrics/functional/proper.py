"""Proper scoring rules: the Brier score and the negative log-likelihood."""

from __future__ import annotations

from calibkit.metrics.functional.core import ArrayLike, _report
from calibkit.metrics.settings import UNSET, CalibrationSettings, resolve_settings


def brier(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    settings: CalibrationSettings | None = None,
) -> float:
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
    next_token : bool, default False
        Causal-LM input: logits ``(N, T, V)`` at position ``t`` scored against ``labels[:, t + 1]``,
        as the model's own loss shifts them (labels unshifted).
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

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
    settings = resolve_settings(settings, from_logits=from_logits, ignore_index=ignore_index, next_token=next_token)
    return _report(probs, labels, ("brier",), settings)[0]["brier"]


def nll(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    eps: float = UNSET.eps,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    settings: CalibrationSettings | None = None,
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
    next_token : bool, default False
        Causal-LM input: logits ``(N, T, V)`` at position ``t`` scored against ``labels[:, t + 1]``,
        as the model's own loss shifts them (labels unshifted).
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

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
    settings = resolve_settings(
        settings, eps=eps, from_logits=from_logits, ignore_index=ignore_index, next_token=next_token
    )
    return _report(probs, labels, ("nll",), settings)[0]["nll"]
