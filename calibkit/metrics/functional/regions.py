"""Calibration by certainty region: region-balanced ECE (RBECE, Dawkins & Nejadgholi 2022)."""

from __future__ import annotations

from calibkit.metrics.functional.core import ArrayLike, _report
from calibkit.metrics.settings import UNSET, CalibrationSettings, renamed, resolve_settings


def rbece(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    rbece_bins: int = UNSET.rbece_bins,
    theta: float = UNSET.theta,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    n_bins: int | None = None,
    settings: CalibrationSettings | None = None,
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
    next_token : bool, default False
        Causal-LM input: logits ``(N, T, V)`` at position ``t`` scored against ``labels[:, t + 1]``,
        as the model's own loss shifts them (labels unshifted).
    n_bins : int, optional
        The old name of ``rbece_bins`` here; still works, with a FutureWarning.
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

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
    rbece_bins = renamed("n_bins", n_bins, "rbece_bins", rbece_bins, "rbece()")
    settings = resolve_settings(
        settings,
        rbece_bins=rbece_bins,
        theta=theta,
        from_logits=from_logits,
        ignore_index=ignore_index,
        next_token=next_token,
    )
    return _report(probs, labels, ("rbece",), settings)[0]["rbece"]
