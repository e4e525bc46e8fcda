"""Score decomposition: a proper score split into miscalibration, discrimination and uncertainty.

For a binary problem (probabilities ``p`` of outcomes ``y`` in {0, 1}) and a proper score ``S``
(Brier: ``(y - p)^2``; log: ``-y log p - (1 - y) log(1 - p)``), the CORP decomposition (Dimitriadis,
Gneiting and Jordan 2021; model-diagnostics' ``decompose``) is

    S(p) = MCB - DSC + UNC,   MCB = S(p) - S(r),   DSC = S(ybar) - S(r),   UNC = S(ybar),

where ``r`` is the isotonic recalibration of ``p`` (pool adjacent violators of ``y`` on ``p``, tied
``p`` pooled, ``p`` closer than the float64 resolution tied as scikit-learn's isotonic fit, the
reference's, ties them) and ``ybar`` the mean outcome, each ``S`` a mean over the samples. MCB is what
recalibrating would remove, DSC what the forecasts know beyond the base rate.

For class probabilities ``(N, K)`` the binary problem is the top label's: its confidence against
whether it is right (``top_label``); ``per_class`` adds each class's one-vs-rest problem,
``p_k`` against ``y = k``. The isotonic fit needs every row at once: like AURC, the decomposition
is computed where the rows are held, not from streamed sums.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibkit.metrics.corp import PARTS, SCORES, binary_decomposition
from calibkit.metrics.engines import fill_statistics
from calibkit.metrics.registry import plan
from calibkit.metrics.report import NO_SAMPLE
from calibkit.metrics.settings import UNSET, CalibrationSettings, resolve_settings
from calibkit.metrics.smooth import smooth_rows
from calibkit.metrics.validation import prepare_for


def score_decomposition(
    probs: Any,
    labels: Any,
    *,
    score: str = "brier",
    per_class: bool = False,
    from_logits: bool = UNSET.from_logits,
    ignore_index: int = UNSET.ignore_index,
    next_token: bool = UNSET.next_token,
    settings: CalibrationSettings | None = None,
) -> dict[str, Any]:
    """Split a proper score into miscalibration, discrimination and uncertainty (CORP).

    Parameters
    ----------
    probs : array-like of shape (N,), (N, K) or (N, L, K)
        Probabilities (or logits with ``from_logits``); 1-D: the probability of class 1.
    labels : array-like of int, shape (N,) or (N, L)
        True classes; ``ignore_index`` rows are skipped.
    score : {"brier", "log"}, default "brier"
        The binary proper score decomposed.
    per_class : bool, default False
        Also decompose each class's one-vs-rest problem.
    from_logits : bool, default False
    ignore_index : int, default -100
    next_token : bool, default False
        Causal-LM input, as in :func:`calibkit.calibration_report`.
    settings : CalibrationSettings, optional
        All settings at once, instead of the settings keywords (not both).

    Returns
    -------
    dict
        ``top_label``: the decomposition (``miscalibration``, ``discrimination``,
        ``uncertainty``, ``score``) of the top label's confidence against whether it is right
        (for 1-D input: of the class-1 probability against ``y = 1``); with ``per_class``,
        ``per_class``: each part as an array over the classes.

    Raises
    ------
    ValueError
        On bad input, naming the argument and the first bad row, or with no sample left, as the
        metrics do.

    Examples
    --------
    >>> probs = np.array([[0.8, 0.2], [0.6, 0.4], [0.3, 0.7], [0.9, 0.1]])
    >>> d = score_decomposition(probs, np.array([0, 1, 1, 0]))["top_label"]
    >>> round(d["score"], 4) == round(d["miscalibration"] - d["discrimination"] + d["uncertainty"], 4)
    True
    """
    if score not in SCORES:
        raise ValueError(f"`score` must be one of {list(SCORES)}, got {score!r}")
    settings = resolve_settings(settings, from_logits=from_logits, ignore_index=ignore_index, next_token=next_token)
    from_logits, ignore_index = settings.from_logits, settings.ignore_index
    prep = prepare_for(probs, labels, settings)
    fill_statistics(prep, plan(["ece"], settings), ignore_index=ignore_index, engine="numba")  # checks every value
    kept = np.asarray(prep.labels) != ignore_index
    if not kept.any():  # as every metric: no number of nothing
        raise ValueError(NO_SAMPLE.format(ignore_index))
    # the top label's confidence and correctness as the registry's brier_* columns read them: one convention
    out = {"top_label": binary_decomposition(*smooth_rows(prep, ignore_index), score)}
    if per_class:
        values, y = np.asarray(prep.values, dtype=np.float64)[kept], np.asarray(prep.labels)[kept].astype(np.int64)
        if values.shape[1] == 1:  # 1-D binary: the class-1 probability
            p1 = 1.0 / (1.0 + np.exp(-values[:, 0])) if from_logits else values[:, 0]
            values = np.stack([1.0 - p1, p1], axis=1)
        elif from_logits:
            values = np.exp(values - values.max(axis=1, keepdims=True))
            values /= values.sum(axis=1, keepdims=True)
        parts = [binary_decomposition(values[:, k], (y == k).astype(np.float64), score) for k in range(values.shape[1])]
        out["per_class"] = {name: np.array([d[name] for d in parts]) for name in PARTS}
    return out
