"""Multi-label input at every door: one binary problem per label, summarised over the labels.

A multi-label head (``problem_type="multi_label_classification"``) gives ``(N, K)`` independent
label probabilities (or logits: a sigmoid each) and multi-hot ``(N, K)`` labels. Each label is a
1-D binary problem, so its sums are the ordinary :class:`CalibrationStatistics` of its column;
the micro average pools every label decision, and its sums are the labels' sums added. So the
one-shot report (:func:`calibkit.multilabel_report`, ``calibration_report(multilabel=True)``)
and the accumulator (``CalibrationAccumulator(multilabel=True)``: one statistics per label,
merged and reduced like any other) both end in :func:`summarise_labels`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from calibkit.metrics.engines import fill_statistics
from calibkit.metrics.formulas import class_wise_summary
from calibkit.metrics.registry import (
    METRICS,
    OVER_CLASSES,
    metric,
    metric_names,
    module_metrics,
    plan,
    report_from_statistics,
)
from calibkit.metrics.report import exact_report
from calibkit.metrics.settings import CalibrationSettings
from calibkit.metrics.statistics import CalibrationStatistics, sum_statistics
from calibkit.metrics.validation import InputError, prepare_for

NO_DECISION = "`labels`: no decision to evaluate (every label equals ignore_index={})"
"""The error when masking leaves no label decision (``.format(ignore_index)``)."""

LABEL_METRICS = tuple(m for m in METRICS if m not in OVER_CLASSES) + ("ace",)
"""The metrics computed per label: every metric of one binary problem (ACE over its two columns)."""

LABEL_SUMMARIES = tuple(m for m in module_metrics()["cece"] if not metric(m).per_class)
"""The class-wise paper's summaries (CECE, MSECE, WSECE, ECE variance), here over the labels' ECEs:
in every multi-label report."""


def label_metric_names(metrics: Any) -> tuple[str, ...]:
    """Return the metrics of ``LABEL_METRICS`` that ``metrics`` names (all for None).

    Parameters
    ----------
    metrics : iterable of str, str or None

    Returns
    -------
    tuple of str
        In ``LABEL_METRICS``' order.

    Raises
    ------
    ValueError
        When ``metrics`` names an unknown metric, or one not defined per label (SCE, AURC, ...);
        naming only the summaries over labels (CECE, ...) gives ``("ece",)``, which they read.
    """
    if metrics is None:
        return LABEL_METRICS
    wanted = metric_names(metrics)
    other = [m for m in wanted if m not in (*LABEL_METRICS, *LABEL_SUMMARIES)]
    if other:  # named and not computable per label: refused, not dropped
        raise ValueError(
            f"`metrics` {other} are not defined per label; multi-label input takes {list(LABEL_METRICS)} (and "
            f"reports {list(LABEL_SUMMARIES)} over the labels' ECEs)"
        )
    return tuple(m for m in LABEL_METRICS if m in wanted) or ("ece",)


def check_multilabel(probs: Any, labels: Any, ignore_index: int) -> tuple[Any, Any]:
    """Check multi-label input: ``(N, K)`` values and multi-hot ``(N, K)`` labels (numpy or torch, kept as given).

    Parameters
    ----------
    probs : array-like or torch.Tensor of shape (N, K)
    labels : array-like or torch.Tensor of shape (N, K)
        1 where the label is present, 0 where absent, ``ignore_index`` to skip; ints, bools or
        floats (``BCEWithLogitsLoss`` takes floats).
    ignore_index : int

    Returns
    -------
    probs, labels
        ``labels`` as int64 (numpy, or a tensor on its device).

    Raises
    ------
    ValueError
        Naming the argument: a shape, a dtype or a label that is not 0, 1 or ``ignore_index``.
    """
    is_tensor = hasattr(probs, "detach") and not isinstance(probs, np.ndarray)
    p = probs if is_tensor else np.asarray(probs)
    y = labels if hasattr(labels, "detach") else np.asarray(labels)
    if p.ndim != 2 or p.shape[1] < 1:
        raise ValueError(
            f"`probs` must have shape (N, K) for multi-label input (one column per label), got {tuple(p.shape)}"
        )
    if tuple(y.shape) != tuple(p.shape):
        raise ValueError(f"`labels` must have the shape of `probs` {tuple(p.shape)} (multi-hot), got {tuple(y.shape)}")
    kind = str(y.dtype)
    if not any(word in kind for word in ("int", "float", "bool")) or "complex" in kind:
        raise ValueError(f"`labels` must hold 0, 1 (or ignore_index), got dtype {y.dtype}")
    bad = ~((y == 0) | (y == 1) | (y == ignore_index))
    if bool(bad.any()):
        row, column = (int(v) for v in np.argwhere(bad.cpu().numpy() if hasattr(bad, "cpu") else bad)[0])
        raise ValueError(
            f"`labels` must be multi-hot (0 or 1, or ignore_index={ignore_index}); got {y[row, column].item()!r} at "
            f"position ({row}, {column})"
        )
    return p, (y.long() if hasattr(y, "long") else y.astype(np.int64))


@contextmanager
def at_label(j: int) -> Iterator[None]:
    """Place a bad value of label ``j``'s column at ``position (row, label)`` of the ``(N, K)`` input.

    Each label is checked as a 1-D binary problem, whose row alone would not say which label.

    Parameters
    ----------
    j : int
        The label (column).

    Yields
    ------
    None
    """
    try:
        yield
    except InputError as exc:
        raise InputError(exc.head, exc.index, (exc.position, int(j)), exc.tail) from None


def label_statistics(
    probs: Any, labels: Any, names: tuple[str, ...], settings: CalibrationSettings, num_threads: int | None = None
) -> list[CalibrationStatistics]:
    """Fill each label's sums (a 1-D binary problem: its column against its 0/1 labels).

    Parameters
    ----------
    probs, labels
        As :func:`check_multilabel` returns them.
    names : tuple of str
        The metrics to fill the sums for (see :func:`label_metric_names`).
    settings : CalibrationSettings
        ``from_logits`` means a sigmoid per label.
    num_threads : int, optional

    Returns
    -------
    list of CalibrationStatistics
        One per label (a label with every decision skipped has ``n == 0``).
    """
    sums = plan(names, settings)
    out = []
    for j in range(probs.shape[1]):  # one pass per label: a loop over labels, never over samples
        with at_label(j):
            prep = prepare_for(probs[:, j], labels[:, j], settings)  # multi-label: never next-token
            filled = fill_statistics(prep, sums, ignore_index=settings.ignore_index, num_threads=num_threads)
        out.append(filled.statistics)
    return out


def summarise_labels(
    per_label: dict[str, np.ndarray], micro: dict[str, float], support: np.ndarray, names: tuple[str, ...]
) -> dict[str, Any]:
    """Average per-label values (macro, support-weighted) and give the class-wise summaries over labels.

    Parameters
    ----------
    per_label : dict of str to ndarray of shape (K,)
        Each metric's value per label (NaN for a label with no decision), ``ece`` among them.
    micro : dict of str to float
        Each metric on every label decision pooled.
    support : ndarray of shape (K,)
        Rows where each label is present.
    names : tuple of str
        The metrics to report.

    Returns
    -------
    dict
        ``per_label``, ``support``, ``macro``, ``weighted``, ``micro`` and ``cece``, ``msece``,
        ``wsece``, ``ece_variance`` over the labels' ECEs (weights: support; centre: micro ECE).
    """
    k = support.size
    out: dict[str, Any] = {"per_label": {m: per_label[m] for m in names}, "support": support}
    out["macro"] = {m: _weighted(per_label[m], np.ones(k)) for m in names}
    out["weighted"] = {m: _weighted(per_label[m], support) for m in names}
    out["micro"] = {m: float(micro[m]) for m in names}
    out.update(class_wise_summary(per_label["ece"], support, float(micro["ece"])))
    return out


def report_from_label_statistics(
    stats: list[CalibrationStatistics], names: tuple[str, ...], settings: CalibrationSettings
) -> dict[str, Any]:
    """Compute the multi-label report from accumulated per-label sums (ACE per label within its bound).

    Parameters
    ----------
    stats : list of CalibrationStatistics
        One per label, numpy sums.
    names : tuple of str
        Metrics of ``LABEL_METRICS``.
    settings : CalibrationSettings

    Returns
    -------
    dict
        As :func:`calibkit.multilabel_report`; with ACE, ``"ace_error_bound"``: ``{"per_label":
        (K,), "macro", "weighted", "micro"}``, how far each streamed ACE may be from the exact one.
    """
    binary = tuple(dict.fromkeys(names + ("ece",)))  # the per-label ECEs feed CECE over labels
    per_label = {m: np.full(len(stats), np.nan) for m in binary}
    bound = np.full(len(stats), np.nan)  # ACE per label: a streaming estimate within this
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a label's one-sided data (no positive) is normal here, not news
        for j, s in enumerate(stats):
            if s.n:
                report = report_from_statistics(s, binary, settings)
                for m in binary:
                    per_label[m][j] = report[m]
                bound[j] = report.get("ace_error_bound", np.nan)
    micro = report_from_statistics(sum_statistics(stats), binary, settings)
    support = np.array([s.top[0, :, :, 2].sum() for s in stats]).round().astype(np.int64)
    out = summarise_labels(per_label, micro, support, names)
    out["n"] = int(sum(s.n for s in stats))
    if "ace" in names:  # an average of values each within its bound is within the average of the bounds
        out["ace_error_bound"] = {
            "per_label": bound,
            "macro": _weighted(bound, np.ones(bound.size)),
            "weighted": _weighted(bound, support),
            "micro": float(micro["ace_error_bound"]),
        }
    return out


def exact_label_report(
    probs: Any, labels: Any, names: tuple[str, ...], settings: CalibrationSettings, num_threads: int | None = None
) -> dict[str, Any]:
    """Compute the multi-label report in one go, every metric exact (ACE too): the one-shot door.

    Parameters
    ----------
    probs, labels
        ``(N, K)`` label probabilities (logits with ``settings.from_logits``) and multi-hot labels.
    names : tuple of str
        Metrics of ``LABEL_METRICS``.
    settings : CalibrationSettings
    num_threads : int, optional

    Returns
    -------
    dict
        As :func:`calibkit.multilabel_report`.

    Raises
    ------
    ValueError
        On bad input, or when no label decision is left.
    """
    p, y = check_multilabel(probs, labels, settings.ignore_index)
    single = settings.replace(multilabel=False)
    k = p.shape[1]
    kept = np.asarray([int((y[:, j] != settings.ignore_index).sum()) for j in range(k)])
    if kept.sum() == 0:
        raise ValueError(NO_DECISION.format(settings.ignore_index))
    binary = tuple(dict.fromkeys(names + ("ece",)))  # the per-label ECEs feed CECE over labels

    def one(values: Any, targets: Any) -> dict[str, Any]:
        prep = prepare_for(values, targets, single)
        return exact_report(prep, single, binary, num_threads=num_threads)[0]

    per_label = {m: np.full(k, np.nan) for m in binary}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a label's one-sided data (no positive) is normal here, not news
        for j in np.flatnonzero(kept):  # one binary problem per label: K passes over N rows
            with at_label(j):
                report = one(p[:, j], y[:, j])
            for m in binary:
                per_label[m][j] = report[m]
    micro = one(p.reshape(-1), y.reshape(-1))
    support = np.asarray([int((y[:, j] == 1).sum()) for j in range(k)])
    out = summarise_labels(per_label, micro, support, names)
    out["n"] = int(kept.sum())
    return out


def _weighted(values: np.ndarray, support: np.ndarray) -> float:
    """Support-weighted mean over the labels with a value (the plain mean if no label is present)."""
    has = np.isfinite(values)
    if not has.any():
        return float("nan")
    w = support[has].astype(np.float64)
    return float((values[has] * w).sum() / w.sum()) if w.sum() > 0 else float(values[has].mean())
