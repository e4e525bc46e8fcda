"""Fuzzy calibration error (FCE, Bihani & Rayz 2023): soft bin memberships instead of hard bins."""

from __future__ import annotations

from calibkit.metrics.functional.core import ArrayLike, _report
from calibkit.metrics.settings import UNSET, CalibrationSettings, renamed, resolve_settings


def fce(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    fce_bins: int = UNSET.fce_bins,
    fce_variant: str = UNSET.fce_variant,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    n_bins: int | None = None,
    variant: str | None = None,
    settings: CalibrationSettings | None = None,
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
    next_token : bool, default False
        Causal-LM input: logits ``(N, T, V)`` at position ``t`` scored against ``labels[:, t + 1]``,
        as the model's own loss shifts them (labels unshifted).
    n_bins : int, optional
        The old name of ``fce_bins`` here; still works, with a FutureWarning.
    variant : str, optional
        The old name of ``fce_variant``; still works, with a FutureWarning.
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords above (not both: a keyword given
        with ``settings`` is a ``ValueError`` naming both).

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
    fce_bins = renamed("n_bins", n_bins, "fce_bins", fce_bins, "fce()")
    fce_variant = renamed("variant", variant, "fce_variant", fce_variant, "fce()")
    settings = resolve_settings(
        settings,
        fce_bins=fce_bins,
        fce_variant=fce_variant,
        from_logits=from_logits,
        ignore_index=ignore_index,
        next_token=next_token,
    )
    return _report(probs, labels, ("fce",), settings)[0]["fce"]
