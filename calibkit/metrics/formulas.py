"""Every metric as a function of the per-bin sums: vectorised numpy on small tables, no pass over the data.

Each function reads a table of :class:`~calibkit.metrics.statistics.CalibrationStatistics`
(the top-label table, the class-wise, fuzzy or ACE sums) and returns the metric; the registry
(:mod:`calibkit.metrics.registry`) says which function gives which metric. Formulas and
conventions: SPEC.md.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from calibkit.metrics import _kernels as kernels
from calibkit.metrics._kernels.bins import ace_bucket_bounds


class MissingClassWarning(UserWarning):
    """Some classes have no sample: their ECE_k is NaN and class-wise summaries skip them."""


class EmptyRegionWarning(UserWarning):
    """No bin holds more than ``theta`` samples, so RBECE is undefined (NaN)."""


class NoWrongPredictionWarning(UserWarning):
    """Every prediction is right, so overconfidence (the mean confidence of the wrong ones) is undefined (NaN)."""


def overconfidence_from_sums(wrong_confidence: float, wrong: float) -> float:
    """Compute overconfidence, the mean top-label confidence of the wrong predictions.

    Parameters
    ----------
    wrong_confidence : float
        Sum of the confidences of the wrong predictions.
    wrong : float
        How many predictions are wrong.

    Returns
    -------
    float
        ``wrong_confidence / wrong``; NaN, with a :class:`NoWrongPredictionWarning`, when
        ``wrong`` is 0.
    """
    if wrong > 0:
        return float(wrong_confidence / wrong)
    warnings.warn(
        "overconfidence: every prediction is right, so there is no wrong prediction to average; returning NaN.",
        NoWrongPredictionWarning,
        stacklevel=3,
    )
    return float("nan")


def binned_gaps(table: np.ndarray) -> dict[str, np.ndarray]:
    """Compute per-bin count, mean confidence, accuracy and signed gap ``acc - conf`` (NaN if empty).

    Parameters
    ----------
    table : ndarray of shape (..., M, >= 3)
        Per bin: count, sum of confidence, sum of correct.

    Returns
    -------
    dict of str to ndarray
        ``count``, ``confidence``, ``accuracy`` and ``gap``, each of shape ``(..., M)``.
    """
    count, conf_sum, out_sum = table[..., 0], table[..., 1], table[..., 2]
    with np.errstate(invalid="ignore", divide="ignore"):
        confidence = conf_sum / count
        accuracy = out_sum / count
    return {"count": count, "confidence": confidence, "accuracy": accuracy, "gap": accuracy - confidence}


def ece_from_table(table: np.ndarray) -> float:
    """Compute ECE ``sum_b n_b/N |acc_b - conf_b|`` = ``sum_b |S_correct - S_conf| / N`` from one table.

    Parameters
    ----------
    table : ndarray of shape (M, 4)
        One top-label table: per bin, count, sum of confidence, sum of correct (and of ECD).

    Returns
    -------
    float
        ECE; NaN for an empty table.
    """
    n = table[:, 0].sum()
    return float(np.abs(table[:, 2] - table[:, 1]).sum() / n) if n > 0 else float("nan")


def mce_from_table(table: np.ndarray) -> float:
    """Compute MCE ``max_b |acc_b - conf_b|`` over the non-empty bins of one table.

    Parameters
    ----------
    table : ndarray of shape (M, 4)
        One top-label table: per bin, count, sum of confidence, sum of correct (and of ECD).

    Returns
    -------
    float
        MCE; NaN when every bin is empty.
    """
    nonempty = table[:, 0] > 0
    if not nonempty.any():
        return float("nan")
    return float(np.max(np.abs(table[nonempty, 2] - table[nonempty, 1]) / table[nonempty, 0]))


def esce_from_table(table: np.ndarray) -> float:
    """Compute ESCE ``sum_b n_b/N (acc_b - conf_b)`` from one table (negative: over-confident).

    Parameters
    ----------
    table : ndarray of shape (M, 4)
        One top-label table: per bin, count, sum of confidence, sum of correct (and of ECD).

    Returns
    -------
    float
        ESCE; NaN for an empty table.
    """
    n = table[:, 0].sum()
    return float((table[:, 2] - table[:, 1]).sum() / n) if n > 0 else float("nan")


def rbece_from_table(table: np.ndarray, theta: float) -> float:
    """Compute RBECE, the unweighted mean ``|acc_b - conf_b|`` over bins holding more than ``theta`` samples.

    Parameters
    ----------
    table : ndarray of shape (M, 4)
        One top-label table: per bin, count, sum of confidence, sum of correct (and of ECD).
    theta : float
        A bin counts only with more than ``theta`` samples.

    Returns
    -------
    float
        RBECE; NaN, with an :class:`EmptyRegionWarning`, when no bin counts.
    """
    dense = table[:, 0] > theta
    if not dense.any():
        warnings.warn(
            f"RBECE: no bin holds more than theta={theta:g} samples (largest bin: {int(table[:, 0].max())}); "
            "returning NaN. Lower `theta` or use fewer bins.",
            EmptyRegionWarning,
            stacklevel=3,
        )
        return float("nan")
    return float(np.mean(np.abs(table[dense, 2] - table[dense, 1]) / table[dense, 0]))


def per_class_ece(table: np.ndarray) -> np.ndarray:
    """Compute ``ECE_k``, the top-label ECE on the subset ``y = k``, for every class.

    Parameters
    ----------
    table : ndarray of shape (K, M, 4)
        The top-label table split by true class (:meth:`CalibrationStatistics.top_table`).

    Returns
    -------
    ndarray of shape (K,)
        ``ECE_k``; NaN for a class without samples.
    """
    n_k = table[:, :, 0].sum(axis=1)
    gap = np.abs(table[:, :, 2] - table[:, :, 1]).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_k > 0, gap / np.where(n_k > 0, n_k, 1), np.nan)


def class_wise_summary(class_ece: Any, class_counts: Any, overall_ece: float) -> dict[str, float]:
    """Compute CECE, MSECE, WSECE and ECE variance from per-class ECEs (class-wise paper, eq 3.4-3.7).

    Classes whose ``ECE_k`` is NaN (absent from the data) are left out, ``K`` = classes present.

    Parameters
    ----------
    class_ece : array-like of shape (K,)
        ``ECE_k`` per class (NaN for absent classes).
    class_counts : array-like of shape (K,)
        Samples of each class (the weights of WSECE).
    overall_ece : float
        The ECE over all samples (the centre of the ECE variance).

    Returns
    -------
    dict of str to float
        ``cece``, ``msece``, ``wsece`` and ``ece_variance``; all NaN when no class is present.

    Examples
    --------
    >>> s = class_wise_summary([0.05, 0.1, 0.6], [1, 1, 1], overall_ece=0.08)
    >>> round(s["cece"], 4), round(s["msece"], 4), round(s["ece_variance"], 4)
    (0.4967, 0.25, 0.0906)
    """
    e = np.asarray(class_ece, dtype=np.float64)
    n = np.asarray(class_counts, dtype=np.float64)
    present = ~np.isnan(e)
    e, n = e[present], n[present]
    if e.size == 0:
        nan = float("nan")
        return {"cece": nan, "msece": nan, "wsece": nan, "ece_variance": nan}
    total = e.sum()
    return {
        "cece": float((e**2).sum() / total) if total > 0 else 0.0,
        "msece": float(e.mean()),
        "wsece": float((n * e).sum() / n.sum()) if n.sum() > 0 else float(e.mean()),
        "ece_variance": float(((e - overall_ece) ** 2).mean()),
    }


def fce_from_table(fuzzy: np.ndarray, variant: str = "paper") -> float:
    """Compute FCE from the fuzzy sums: ``sum_m G_m |acc_m - conf_m| / sum_m G_m`` = ``sum_m |A_m - C_m| / sum_m G_m``.

    ``variant="paper"`` (eq 4-6): ``G_m = sum_i mu_m(c_i)``, ``A_m = sum_i mu_m(c_i) a_i``,
    ``C_m = sum_i mu_m(c_i) c_i``. ``variant="authors"`` (their ``calibration_metrics.py``):
    their memberships rounded as their ``round(mu, 3)``, and ``C_m = sum_i mu_m(c_i) a_i c_i``, the
    confidence of the correct predictions only; ``A_m - C_m = sum_i mu_m(c_i) a_i (1 - c_i) >= 0``
    then, so no over- and under-confidence cancel within a bin.

    Parameters
    ----------
    fuzzy : ndarray of shape (M, 6)
        :attr:`CalibrationStatistics.fuzzy`.
    variant : {"paper", "authors"}, default "paper"
        Which three columns to read.

    Returns
    -------
    float
        FCE; NaN for empty sums.
    """
    g, a, c = (fuzzy[:, 0], fuzzy[:, 1], fuzzy[:, 2]) if variant == "paper" else (fuzzy[:, 3], fuzzy[:, 4], fuzzy[:, 5])
    total = g.sum()
    return float(np.abs(a - c).sum() / total) if total > 0 else float("nan")


def sce_from_table(
    classwise: np.ndarray,
    n: float,
    classes: np.ndarray | None = None,
    *,
    missing_mass: float = 0.0,
    missing_classes: int = 0,
) -> float:
    """Compute SCE ``1/K sum_k sum_b n_bk/N |acc_bk - conf_bk|`` from the class-wise table.

    A class with no label has ``acc_bk = 0`` in every bin, so its sum over bins is its column's
    mass ``sum_i p_ik``: a vocabulary's table keeps rows for the labels that occur only, and the
    other classes enter through ``missing_mass`` and ``missing_classes``.

    Parameters
    ----------
    classwise : ndarray of shape (K, M, 3)
        :attr:`CalibrationStatistics.classwise`.
    n : float
        ``N``, the samples counted.
    classes : ndarray of bool, shape (K,), optional
        The rows averaged over (default all; over a vocabulary, those with a label).
    missing_mass : float, default 0.0
        The summed probability of the classes averaged over that have no row.
    missing_classes : int, default 0
        How many they are.

    Returns
    -------
    float
        SCE.
    """
    if classes is not None:
        classwise = classwise[classes]
    gaps = np.abs(classwise[:, :, 2] - classwise[:, :, 1]).sum() + missing_mass
    return float(gaps / ((classwise.shape[0] + missing_classes) * n))


def sce_from_rows(
    classwise: np.ndarray, rows: np.ndarray, column_first: np.ndarray, n: float, classes: np.ndarray | None = None
) -> float:
    """Compute SCE from a vocabulary's class-wise sums: rows for some columns, every column's first bin.

    The columns without a row have nothing above their first bin and no label, so their
    ``sum_b |acc_bk - conf_bk|`` is their first bin's sum of ``p_k`` (SPEC.md).

    Parameters
    ----------
    classwise : ndarray of shape (R, M, 3)
        The rows (``CalibrationStatistics.classwise``), whose first bins hold the labels only.
    rows : ndarray of int64, shape (R,)
        Their classes (``classwise_classes``).
    column_first : ndarray of shape (K, 2)
        Every column's first-bin count and sum.
    n : float
        ``N``, the samples counted.
    classes : ndarray of bool, shape (K,), optional
        The classes averaged over (default all K; over a vocabulary, those with a label).

    Returns
    -------
    float
        SCE, equal to :func:`sce_from_table` on the dense (K, M, 3) table.
    """
    averaged = np.ones(len(column_first), dtype=bool) if classes is None else classes
    table = classwise.copy()
    table[:, 0, :2] = column_first[rows]
    others = averaged.copy()
    others[rows] = False
    mass = float(column_first[others, 1].sum())
    return sce_from_table(table[averaged[rows]], n, missing_mass=mass, missing_classes=int(others.sum()))


def ece_l2_from_table(table: np.ndarray) -> float:
    """Compute the L2 calibration error ``sqrt(sum_b n_b/N (acc_b - conf_b)^2)`` from one table.

    torchmetrics' ``norm="l2"`` (Kumar et al. 2019's plug-in estimate).

    Parameters
    ----------
    table : ndarray of shape (M, 4)
        One top-label table: per bin, count, sum of confidence, sum of correct (and of ECD).

    Returns
    -------
    float
        The L2 calibration error; NaN for an empty table.
    """
    count = table[:, 0]
    n = count.sum()
    if n <= 0:
        return float("nan")
    nonempty = count > 0
    gap = (table[nonempty, 2] - table[nonempty, 1]) / count[nonempty]
    return float(np.sqrt(np.sum(count[nonempty] * gap**2) / n))


def ece_l2_debiased_from_table(table: np.ndarray) -> float:
    """Compute the debiased L2 calibration error (Kumar et al. 2019, their ``unbiased_l2_ce``) from one table.

    Per bin with ``n_b >= 2``: ``(acc_b - conf_b)^2 - acc_b (1 - acc_b) / (n_b - 1)``, the
    squared gap less the variance of ``acc_b`` (bins of one sample count 0); these are weighted
    by ``n_b / N``, and the result is the square root of the positive part of the sum.

    Parameters
    ----------
    table : ndarray of shape (M, 4)
        One top-label table: per bin, count, sum of confidence, sum of correct (and of ECD).

    Returns
    -------
    float
        The debiased L2 calibration error; NaN for an empty table.
    """
    count = table[:, 0]
    n = count.sum()
    if n <= 0:
        return float("nan")
    used = count >= 2
    m = count[used]
    accuracy = table[used, 2] / m
    gap = accuracy - table[used, 1] / m
    square = np.sum(m * (gap**2 - accuracy * (1.0 - accuracy) / (m - 1.0))) / n
    return float(np.sqrt(max(square, 0.0)))


def ace_from_points(
    ace: np.ndarray,
    points: dict[str, np.ndarray],
    partial: tuple[np.ndarray, np.ndarray] | None = None,
    classes: np.ndarray | None = None,
) -> tuple[float, float]:
    """Compute ACE (and a bound on its error) from boundary points.

    ``partial`` gives, per point, the exact sums of p and outcome over the ``inside`` samples
    of its bucket where a boundary cuts the bucket, NaN elsewhere (the exact path, data held).
    Without it the bucket is split in proportion (streaming path) and the returned bound is
    ``1/(K R) sum_k sum_r (e_r + e_{r+1}) / n_r`` with ``e = min(u, n_j - u) (w_j + o_j)``: ``u``
    samples taken from bucket ``j`` of ``n_j``, width ``w_j``, ``o_j`` = 1 if its outcomes are
    mixed, else 0. It holds for any data.

    Parameters
    ----------
    ace : ndarray of shape (K, B, 3)
        :attr:`CalibrationStatistics.ace`.
    points : dict of str to ndarray
        From :func:`ace_points`.
    partial : tuple of ndarray, optional
        The exact within-bucket sums of p and of the outcome per point (NaN where no boundary
        cuts a bucket), from :func:`exact_ace_partials` or ``ExactACE.partials``.
    classes : ndarray of bool, shape (K,), optional
        The classes averaged over (default all K; over a vocabulary, those with a label).

    Returns
    -------
    ace : float
        ACE; NaN when every range is empty.
    bound : float
        A bound on ``|ACE - ACE_exact|``: 0 where ``partial`` resolves every cut.
    """
    k_idx = np.arange(ace.shape[0])[:, None]
    bucket, inside, before = points["bucket"], points["inside"], points["before"]
    stats = ace[k_idx, bucket]  # (K, R+1, 3)
    count = stats[:, :, 0]
    share = np.divide(inside, count, out=np.zeros_like(inside, dtype=np.float64), where=count > 0)
    part_p = share * stats[:, :, 1]
    part_o = share * stats[:, :, 2]
    lower, upper = ace_bucket_bounds(ace.shape[1])
    width = upper[bucket] - lower[bucket]
    mixed = (stats[:, :, 2] > 0) & (stats[:, :, 2] < count)
    point_error = np.minimum(inside, count - inside) * (width + mixed)
    if partial is not None:  # exact sums where a boundary cuts a bucket (NaN elsewhere)
        exact = ~np.isnan(partial[0])
        part_p = np.where(exact, partial[0], part_p)
        part_o = np.where(exact, partial[1], part_o)
        point_error = np.where(exact, 0.0, point_error)
    sum_p = before[:, :, 1] + part_p
    sum_o = before[:, :, 2] + part_o
    size = np.diff(points["ranks"]).astype(np.float64)
    nonempty = size > 0
    if not nonempty.any():
        return float("nan"), float("nan")
    gaps = np.abs(np.diff(sum_o, axis=1) - np.diff(sum_p, axis=1))[:, nonempty] / size[nonempty]
    bound = (point_error[:, 1:] + point_error[:, :-1])[:, nonempty] / size[nonempty]
    if classes is not None:
        gaps, bound = gaps[classes], bound[classes]
    return float(gaps.mean()), float(bound.mean())


def isotonic_points(
    scores: np.ndarray, outcomes: np.ndarray, *, resolution: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Fit a non-decreasing map of ``scores`` onto 0/1 ``outcomes`` (pool adjacent violators).

    Equal scores share one fitted value; the map is given by its interpolation points, each
    block's first and last distinct score (one point where they coincide).

    Parameters
    ----------
    scores : ndarray of shape (n,)
    outcomes : ndarray of float64, shape (n,)
    resolution : float, default 0.0
        Scores less than this above the first of a run of close scores count as equal to it and
        share its interpolation point, scikit-learn's ``IsotonicRegression`` grouping with
        ``np.finfo(np.float64).resolution`` (what the score decomposition uses); 0: only equal
        scores.

    Returns
    -------
    thresholds, values : ndarray
        Sorted interpolation points and the fitted values there.
    """
    x, inverse = np.unique(scores, return_inverse=True)
    if resolution > 0 and x.size > 1 and (np.diff(x) < resolution).any():
        group = kernels.near_tie_groups(x, resolution)
        first = np.concatenate([[True], group[1:] != group[:-1]])
        x, inverse = x[first], group[inverse.ravel()]
    weight = np.bincount(inverse, minlength=x.size).astype(np.float64)
    mean = np.bincount(inverse, weights=outcomes, minlength=x.size) / weight
    values, ends = kernels.pool_adjacent_violators(mean, weight)
    starts = np.concatenate([[0], ends[:-1]])
    xs = np.stack([x[starts], x[ends - 1]], axis=1).ravel()
    vs = np.repeat(values, 2)
    keep = np.concatenate([[True], xs[1:] != xs[:-1]])
    return xs[keep], vs[keep]
