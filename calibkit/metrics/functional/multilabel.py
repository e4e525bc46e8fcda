"""Multi-label classifiers (one sigmoid per label, ``problem_type="multi_label_classification"``).

Each label is a binary problem: its probability ``p_ik`` against its multi-hot label ``y_ik``,
every binary metric computed on it as on 1-D binary input (the confidence is the probability
that the label is present, SPEC.md). The labels' values are then summarised three ways, as
scikit-learn averages multi-label scores:

- ``macro``: the mean over the labels that have a value;
- ``weighted``: weighted by each label's support (the rows where it is present);
- ``micro``: the metric on all label decisions pooled (``N x K`` binary decisions).

And, the class-wise paper's idea applied to labels, CECE, MSECE, WSECE and the ECE variance of
the per-label ECEs (weights: support; centre of the variance: the micro ECE). Nothing is guessed
from the data: multi-label input is asked for by calling this function (or ``multilabel=True``
where a door offers it); a ``(N, K)`` 0/1 label matrix given to a single-label metric is refused
with a message that names this function.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from calibkit.metrics.formulas import class_wise_summary
from calibkit.metrics.functional.core import ArrayLike, calibration_report
from calibkit.metrics.registry import METRICS, OVER_CLASSES
from calibkit.metrics.validation import check_bool, check_ignore_index, to_numpy

LABEL_METRICS = tuple(m for m in METRICS if m not in OVER_CLASSES) + ("ace",)
"""The metrics computed per label: every metric of one binary problem (ACE over its two columns)."""


def _multilabel_arrays(probs: ArrayLike, labels: ArrayLike, ignore_index: int) -> tuple[np.ndarray, np.ndarray]:
    """Check the shapes and the multi-hot labels; return float values ``(N, K)`` and int64 labels ``(N, K)``."""
    p = to_numpy(probs, "probs")
    y = to_numpy(labels, "labels")
    if p.ndim != 2 or p.shape[1] < 1:
        raise ValueError(f"`probs` must have shape (N, K) for multi-label input (one column per label), got {p.shape}")
    if y.shape != p.shape:
        raise ValueError(f"`labels` must have the shape of `probs` {p.shape} (multi-hot), got {y.shape}")
    if y.dtype == np.bool_:
        y = y.astype(np.int64)
    if y.dtype.kind not in "iuf":
        raise ValueError(f"`labels` must hold 0, 1 (or ignore_index), got dtype {y.dtype}")
    bad = ~np.isin(y, (0, 1, ignore_index))
    if bad.any():
        row, column = (int(v) for v in np.argwhere(bad)[0])
        raise ValueError(
            f"`labels` must be multi-hot (0 or 1, or ignore_index={ignore_index}); got {y[row, column].item()!r} at "
            f"position ({row}, {column})"
        )
    return p, y.astype(np.int64)


def multilabel_report(
    probs: ArrayLike,
    labels: ArrayLike,
    *,
    from_logits: bool = False,
    ignore_index: int = -100,
    **settings: Any,
) -> dict[str, Any]:
    """Compute every binary metric per label, its macro, weighted and micro averages, and CECE over labels.

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N, K)
        The probability of each label (logits with ``from_logits=True``: a sigmoid each).
    labels : array-like of shape (N, K)
        Multi-hot labels: 1 where the label is present, 0 where absent, ``ignore_index`` for a
        decision to skip; ints, bools or floats (``BCEWithLogitsLoss`` takes floats).
    from_logits : bool, default False
    ignore_index : int, default -100
    **settings
        Any setting of :func:`calibkit.calibration_report` (``n_bins``, ``theta``, ...).

    Returns
    -------
    dict
        ``"per_label"``: per metric of :data:`LABEL_METRICS`, an array ``(K,)`` (NaN for a
        label with no decision left); ``"macro"``, ``"weighted"``, ``"micro"``: per metric, one
        value; ``"support"``: the rows where each label is present; ``"n"``: the label decisions
        counted; ``"cece"``, ``"msece"``, ``"wsece"``, ``"ece_variance"``: over the per-label ECEs.

    Raises
    ------
    ValueError
        Naming the argument: shapes that differ, a label that is not 0, 1 or ``ignore_index``,
        NaN or a probability outside [0, 1], a bad setting, or no decision left.

    Examples
    --------
    >>> p = [[0.9, 0.2], [0.8, 0.6], [0.3, 0.1], [0.6, 0.7]]
    >>> y = [[1, 0], [1, 1], [0, 0], [0, 1]]
    >>> r = multilabel_report(p, y, metrics=["ece", "brier"])
    >>> r["per_label"]["brier"].round(4).tolist(), round(r["micro"]["brier"], 4)
    ([0.125, 0.075], 0.1)
    """
    ignore_index = check_ignore_index(ignore_index)
    from_logits = check_bool(from_logits, "from_logits")
    p, y = _multilabel_arrays(probs, labels, ignore_index)
    wanted = settings.pop("metrics", None)
    names = tuple(m for m in LABEL_METRICS if wanted is None or m in ([wanted] if isinstance(wanted, str) else wanted))
    if wanted is not None and not names:
        raise ValueError(f"`metrics` must name metrics of {list(LABEL_METRICS)}, got {wanted!r}")
    k = p.shape[1]
    kept = (y != ignore_index).sum(axis=0)
    if kept.sum() == 0:
        raise ValueError(f"`labels`: no decision to evaluate (every label equals ignore_index={ignore_index})")
    common = dict(from_logits=from_logits, ignore_index=ignore_index, **settings)
    binary = tuple(dict.fromkeys(names + ("ece",)))  # the per-label ECEs feed CECE over labels
    per_label = {m: np.full(k, np.nan) for m in binary}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a label's one-sided data (no positive) is normal here, not news
        for j in np.flatnonzero(kept):  # one binary problem per label: K passes over N rows
            report = calibration_report(p[:, j], y[:, j], metrics=binary, **common)
            for m in binary:
                per_label[m][j] = report[m]
    micro = calibration_report(p.reshape(-1), y.reshape(-1), metrics=binary, **common)
    support = (y == 1).sum(axis=0)
    out: dict[str, Any] = {"per_label": {m: per_label[m] for m in names}, "support": support, "n": int(kept.sum())}
    out["macro"] = {m: _weighted(per_label[m], np.ones(k)) for m in names}
    out["weighted"] = {m: _weighted(per_label[m], support) for m in names}
    out["micro"] = {m: float(micro[m]) for m in names}
    out.update(class_wise_summary(per_label["ece"], support, float(micro["ece"])))
    return out


def _weighted(values: np.ndarray, support: np.ndarray) -> float:
    """Support-weighted mean over the labels with a value (the plain mean if no label is present)."""
    has = np.isfinite(values)
    if not has.any():
        return float("nan")
    w = support[has].astype(np.float64)
    return float((values[has] * w).sum() / w.sum()) if w.sum() > 0 else float(values[has].mean())
