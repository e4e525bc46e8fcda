"""Entropic calibration: the entropic calibration difference (ECD) and signed ECE (ESCE), Sumler et al. 2025."""

from __future__ import annotations

import numpy as np

from calibkit.metrics.functional.core import ArrayLike, _bins, _report
from calibkit.metrics.settings import DEFAULTS, UNSET, CalibrationSettings, is_unset, renamed, resolve_settings


def ecd(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    eps: float = UNSET.eps,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    return_bins: bool = False,
    n_bins: int = UNSET.esce_bins,
    settings: CalibrationSettings | None = None,
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
    next_token : bool, default False
        Causal-LM input: logits ``(N, T, V)`` at position ``t`` scored against ``labels[:, t + 1]``,
        as the model's own loss shifts them (labels unshifted).
    return_bins : bool, default False
        Also return the per-bin means of :func:`reliability_bins` (``n_bins`` bins).
    n_bins : int, default 10
        Bins of the breakdown returned with ``return_bins``; the ECD itself has no bins. The
        default is the entropic paper's 10 (``esce_bins``' default); with ``settings``, its
        ``n_bins``.
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

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
    if settings is None and is_unset(n_bins):  # the breakdown's own default, the paper's, not the settings' 15
        n_bins = DEFAULTS.esce_bins
    settings = resolve_settings(
        settings, eps=eps, n_bins=n_bins, from_logits=from_logits, ignore_index=ignore_index, next_token=next_token
    )
    report, stats = _report(probs, labels, ("ecd", "ece") if return_bins else ("ecd",), settings)
    return (report["ecd"], _bins(stats, settings.n_bins)) if return_bins else report["ecd"]


def esce(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    esce_bins: int = UNSET.esce_bins,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    return_bins: bool = False,
    n_bins: int | None = None,
    settings: CalibrationSettings | None = None,
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
    next_token : bool, default False
        Causal-LM input: logits ``(N, T, V)`` at position ``t`` scored against ``labels[:, t + 1]``,
        as the model's own loss shifts them (labels unshifted).
    return_bins : bool, default False
        Also return :func:`reliability_bins` on the same bins.
    n_bins : int, optional
        The old name of ``esce_bins`` here; still works, with a FutureWarning.
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

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
    esce_bins = renamed("n_bins", n_bins, "esce_bins", esce_bins, "esce()")
    settings = resolve_settings(
        settings, esce_bins=esce_bins, from_logits=from_logits, ignore_index=ignore_index, next_token=next_token
    )
    report, stats = _report(probs, labels, ("esce", "ecd") if return_bins else ("esce",), settings)
    return (report["esce"], _bins(stats, settings.esce_bins)) if return_bins else report["esce"]
