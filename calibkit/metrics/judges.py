"""An LLM judge checked against people, and pass rates corrected for the judge's errors.

A judge (a language model) grades each answer ``verdict`` (1 pass, 0 fail, or a score in [0, 1]);
people label some of the answers (``label``, on the same scale). The functions here are the
statistics of that setting, pure numpy with no loop over samples; each one that takes arrays also
takes a stack of them (leading axes: repeats of a simulation) and answers per stack entry.

- The judge against people on the labelled slice (0/1 verdicts): the 2x2 table
  ``counts = (tp, fn, fp, tn)`` (label 1 judged 1, label 1 judged 0, label 0 judged 1, label 0
  judged 0), agreement, Cohen's kappa, the true and false positive rates
  (:func:`agreement_from_counts`, :func:`judge_agreement` with seeded bootstrap intervals).
- Rogan-Gladen (Rogan and Gladen 1978; ``judgy``'s estimate): the judge's pass rate ``q`` on the
  unlabelled samples corrected with its rates on the labelled ones,
  ``theta = (q + TNR - 1) / (TPR + TNR - 1)`` clipped to [0, 1], undefined when
  ``TPR + TNR <= 1`` (:func:`rogan_gladen`, :func:`rogan_gladen_from_counts`). Its interval
  carries both sources of noise: a seeded bootstrap that resamples the labelled 2x2 table
  (multinomial) *and* the unlabelled passes (binomial), or the delta method.
- PPI++ (Angelopoulos, Duchi and Zrnic 2023, "PPI++: Efficient Prediction-Powered Inference";
  ``ppi-python``'s ``ppi_mean_ci`` and ``ppi_mean_pointestimate``): the mean
  ``lambda * mean(f_unlabelled) + mean(y - lambda * f_labelled)`` with the power-tuned
  ``lambda = cov(y, f) / ((1 + n / N) var(f))`` clipped to [0, 1], and the normal interval
  (:func:`ppi_mean`, :func:`ppi_lambda`, :func:`ppi_mean_difference`).
- The human-only mean and the judge's naive rate: the normal (CLT) interval of a mean, as
  ``ppi-python``'s ``classical_mean_ci`` (:func:`classical_mean`).

Every interval is two-sided at ``level`` (default 0.95).
"""

from __future__ import annotations

import warnings
from statistics import NormalDist
from typing import Any

import numpy as np

from calibkit.metrics.sampling import SAMPLING_DEFAULTS

__all__ = [
    "COUNT_CELLS",
    "agreement_from_counts",
    "classical_mean",
    "confusion_counts",
    "judge_agreement",
    "normal_quantile",
    "ppi_lambda",
    "ppi_mean",
    "ppi_mean_difference",
    "rogan_gladen",
    "rogan_gladen_from_counts",
    "rogan_gladen_point",
]

COUNT_CELLS = ("tp", "fn", "fp", "tn")
"""The 2x2 table's cells in the order of ``counts[..., 0:4]``: (label, verdict) = (1, 1), (1, 0),
(0, 1), (0, 0)."""

AGREEMENT = ("agreement", "kappa", "tpr", "fpr", "tnr")
"""The numbers of :func:`agreement_from_counts`, in the order of every output."""

RG_METHODS = ("bootstrap", "delta")
"""The Rogan-Gladen intervals: seeded bootstrap of both sets (default) or the delta method."""

ROGAN_GLADEN_REPLICATES = 2000
"""Rogan-Gladen's bootstrap replicates by default: twice the settings' 1,000, as its estimate is a ratio whose
percentile tails (2.5% each) are read from replicates drawing both the labelled table and the unlabelled rate."""


def normal_quantile(level: float) -> float:
    """Return the two-sided normal quantile ``z`` of ``level`` (1.959964 for 0.95).

    Parameters
    ----------
    level : float
        In (0, 1).

    Returns
    -------
    float
    """
    if not (isinstance(level, (int, float)) and 0.0 < level < 1.0):
        raise ValueError(f"`level` must be a number in (0, 1), got {level!r}")
    return NormalDist().inv_cdf(1.0 - (1.0 - level) / 2.0)


def _values(x: Any, name: str, *, binary: bool = False, least: int = 1) -> np.ndarray:
    """Return ``x`` as float64 with a last axis of at least ``least`` samples, in [0, 1] (0/1 if ``binary``)."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 0 or a.shape[-1] < least:
        raise ValueError(f"`{name}` needs at least {least} samples along its last axis, got shape {a.shape}")
    if binary:
        bad = np.flatnonzero((a != 0) & (a != 1))
        if bad.size:
            raise ValueError(f"`{name}` must hold 0 or 1 only; {bad.size} values are not (first: {a.flat[bad[0]]!r})")
    else:
        bad = np.flatnonzero(~((a >= 0) & (a <= 1)))
        if bad.size:
            raise ValueError(f"`{name}` must be in [0, 1]; {bad.size} values are not (first: {a.flat[bad[0]]!r})")
    return a


def confusion_counts(verdicts: Any, labels: Any) -> np.ndarray:
    """Count the 2x2 table of 0/1 verdicts against 0/1 labels.

    Parameters
    ----------
    verdicts, labels : array-like of shape (..., n)
        The judge's 0/1 verdicts and the people's 0/1 labels of the same samples.

    Returns
    -------
    ndarray of int64, shape (..., 4)
        ``(tp, fn, fp, tn)`` (:data:`COUNT_CELLS`).

    Examples
    --------
    >>> confusion_counts([1, 1, 0, 0, 1], [1, 0, 0, 1, 1]).tolist()
    [2, 1, 1, 1]
    """
    f = _values(verdicts, "verdicts", binary=True)
    y = _values(labels, "labels", binary=True)
    if f.shape != y.shape:
        raise ValueError(f"`verdicts` and `labels` must have the same shape, got {f.shape} and {y.shape}")
    tp = (y * f).sum(-1)
    fn = (y * (1 - f)).sum(-1)
    fp = ((1 - y) * f).sum(-1)
    tn = ((1 - y) * (1 - f)).sum(-1)
    return np.stack([tp, fn, fp, tn], axis=-1).astype(np.int64)


def agreement_from_counts(counts: Any) -> dict[str, np.ndarray]:
    """Agreement, Cohen's kappa and the judge's rates from 2x2 tables.

    Parameters
    ----------
    counts : array-like of shape (..., 4)
        ``(tp, fn, fp, tn)`` per table.

    Returns
    -------
    dict of str to ndarray of shape (...)
        ``agreement`` ``(tp + tn) / n``; ``kappa`` ``(p_o - p_e) / (1 - p_e)`` with
        ``p_e = ((tp + fp)(tp + fn) + (fn + tn)(fp + tn)) / n^2`` (NaN when ``p_e = 1``: one class on
        both sides); ``tpr`` ``tp / (tp + fn)`` (NaN without a labelled pass); ``fpr``
        ``fp / (fp + tn)`` and ``tnr = 1 - fpr`` (NaN without a labelled fail).

    Examples
    --------
    >>> out = agreement_from_counts([40, 10, 5, 45])
    >>> [round(float(out[k]), 4) for k in ("agreement", "kappa", "tpr", "fpr")]
    [0.85, 0.7, 0.8, 0.1]
    """
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim == 0 or c.shape[-1] != 4:
        raise ValueError(f"`counts` must have a last axis of 4 cells (tp, fn, fp, tn), got shape {c.shape}")
    tp, fn, fp, tn = (c[..., i] for i in range(4))
    n = tp + fn + fp + tn
    with np.errstate(divide="ignore", invalid="ignore"):
        agreement = (tp + tn) / n
        chance = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n)
        kappa = np.where(chance < 1, (agreement - chance) / (1 - chance), np.nan)
        tpr = tp / (tp + fn)
        fpr = fp / (fp + tn)
    return {"agreement": agreement, "kappa": kappa, "tpr": tpr, "fpr": fpr, "tnr": 1.0 - fpr}


def _percentiles(draws: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval over axis 0, leaving out NaN draws (all NaN: NaN)."""
    tail = 100.0 * (1.0 - level) / 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an entry whose every draw is NaN: NaN
        lower, upper = np.nanpercentile(draws, [tail, 100.0 - tail], axis=0)
    return lower, upper


def _check_draws(bootstrap: int, seed: int) -> None:
    if not (isinstance(bootstrap, (int, np.integer)) and not isinstance(bootstrap, bool) and 1 <= bootstrap <= 100_000):
        raise ValueError(f"`bootstrap` must be an integer in [1, 100000], got {bootstrap!r}")
    if not (isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0):
        raise ValueError(f"`seed` must be an integer >= 0, got {seed!r}")


def _resampled_tables(counts: np.ndarray, bootstrap: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap the labelled samples of each table: multinomial counts, shape (bootstrap, ..., 4)."""
    n = counts.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(n[..., None] > 0, counts / np.maximum(n, 1)[..., None], 0.25)
    return rng.multinomial(n, p, size=(bootstrap, *n.shape))


def judge_agreement(
    verdicts: Any,
    labels: Any,
    *,
    bootstrap: int = SAMPLING_DEFAULTS.bootstrap,
    level: float = SAMPLING_DEFAULTS.level,
    seed: int = SAMPLING_DEFAULTS.seed,
) -> dict[str, Any]:
    """Judge the judge against people on the labelled slice, with seeded bootstrap intervals.

    Parameters
    ----------
    verdicts, labels : array-like of shape (n,)
        The judge's 0/1 verdicts and the people's 0/1 labels of the same samples.
    bootstrap : int, default 1000
        Replicates: each resamples the ``n`` samples (drawn as multinomial counts of the 2x2
        table, which is the same distribution with no pass over the samples). 0 draws none.
    level : float, default 0.95
    seed : int, default 0

    Returns
    -------
    dict
        ``n``, ``counts`` (dict of :data:`COUNT_CELLS`), ``agreement``, ``kappa``, ``tpr``,
        ``fpr``, ``tnr`` (float, NaN where undefined) and, with ``bootstrap``, ``intervals``:
        name -> ``[lower, upper]`` (percentile; replicates where a rate is undefined, say no
        labelled fail, are left out of that rate's interval and counted in ``undefined``).

    Examples
    --------
    >>> out = judge_agreement([1, 1, 0, 0, 1, 1], [1, 0, 0, 1, 1, 1], bootstrap=0)
    >>> out["agreement"], out["tpr"]
    (0.6666666666666666, 0.75)
    """
    counts = confusion_counts(verdicts, labels)
    if counts.ndim != 1:
        raise ValueError(f"`verdicts` must be 1-D here, got shape {np.shape(verdicts)}")
    normal_quantile(level)
    point = agreement_from_counts(counts)
    out: dict[str, Any] = {"n": int(counts.sum()), "counts": dict(zip(COUNT_CELLS, counts.tolist()))}
    out.update({k: float(v) for k, v in point.items()})
    if bootstrap == 0:
        return out
    _check_draws(bootstrap, seed)
    draws = agreement_from_counts(_resampled_tables(counts, bootstrap, np.random.default_rng(seed)))
    out["intervals"] = {k: [float(b) for b in _percentiles(v, level)] for k, v in draws.items()}
    out["undefined"] = {k: int(np.isnan(v).sum()) for k, v in draws.items()}
    return out


def rogan_gladen_point(q: Any, tpr: Any, tnr: Any) -> np.ndarray:
    """Rogan-Gladen's corrected rate ``(q + TNR - 1) / (TPR + TNR - 1)``, clipped to [0, 1].

    Parameters
    ----------
    q, tpr, tnr : array-like, broadcast together
        The judge's pass rate on the unlabelled samples, and its true positive and true
        negative rates on the labelled ones.

    Returns
    -------
    ndarray
        NaN where ``TPR + TNR <= 1`` (the judge no better than chance: undefined) or a rate is NaN.

    Examples
    --------
    >>> round(float(rogan_gladen_point(0.65, 0.9, 0.8)), 4)
    0.6429
    """
    q, tpr, tnr = (np.asarray(v, dtype=np.float64) for v in (q, tpr, tnr))
    youden = tpr + tnr - 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = np.clip((q + tnr - 1.0) / youden, 0.0, 1.0)
    return np.where(youden > 0, theta, np.nan)


def rogan_gladen_from_counts(
    counts: Any,
    passes: Any,
    total: Any,
    *,
    method: str = "bootstrap",
    bootstrap: int = ROGAN_GLADEN_REPLICATES,
    level: float = SAMPLING_DEFAULTS.level,
    seed: int = SAMPLING_DEFAULTS.seed,
) -> dict[str, np.ndarray]:
    """Rogan-Gladen's corrected pass rate and interval from counts, for a stack of data sets.

    Parameters
    ----------
    counts : array-like of shape (..., 4)
        The labelled slice's 2x2 table ``(tp, fn, fp, tn)``.
    passes, total : array-like of shape (...)
        The judge's passes among the ``total`` unlabelled samples (``total >= 1``).
    method : {"bootstrap", "delta"}, default "bootstrap"
        ``bootstrap``: each replicate resamples the labelled samples (multinomial over the table)
        and the unlabelled ones (binomial passes), the percentile interval of the clipped
        estimate; replicates where the estimate is undefined (no labelled pass or fail, or
        ``TPR + TNR <= 1``) are left out and counted in ``undefined``. ``delta``: the estimate
        plus or minus ``z`` times the delta-method standard error
        ``sqrt(q(1-q)/N + theta^2 TPR(1-TPR)/n_pass + (1-theta)^2 TNR(1-TNR)/n_fail) / (TPR+TNR-1)``
        (theta unclipped), clipped to [0, 1].
    bootstrap : int, default 2000
        Replicates of ``method="bootstrap"``.
    level : float, default 0.95
    seed : int, default 0

    Returns
    -------
    dict of str to ndarray of shape (...)
        ``estimate``, ``ci_lower``, ``ci_upper``, ``q``, ``tpr``, ``tnr`` and, by bootstrap,
        ``undefined`` (replicates left out). NaN where the estimate is undefined.
    """
    if method not in RG_METHODS:
        raise ValueError(f"`method` must be one of {list(RG_METHODS)}, got {method!r}")
    z = normal_quantile(level)
    c = np.asarray(counts, dtype=np.int64)
    if c.ndim == 0 or c.shape[-1] != 4 or (c < 0).any():
        raise ValueError(f"`counts` must be non-negative with a last axis of 4 cells, got shape {c.shape}")
    passes, total = np.asarray(passes, dtype=np.int64), np.asarray(total, dtype=np.int64)
    if (total < 1).any() or (passes < 0).any() or (passes > total).any():
        raise ValueError("`passes` must be in [0, `total`] and `total` >= 1")
    rates = agreement_from_counts(c)
    q = passes / total
    theta = rogan_gladen_point(q, rates["tpr"], rates["tnr"])
    out = {"estimate": theta, "q": q, "tpr": rates["tpr"], "tnr": rates["tnr"]}
    if method == "delta":
        tpr, tnr = rates["tpr"], rates["tnr"]
        youden = tpr + tnr - 1.0
        with np.errstate(divide="ignore", invalid="ignore"):
            raw = (q + tnr - 1.0) / youden
            pos, neg = c[..., 0] + c[..., 1], c[..., 2] + c[..., 3]
            var = q * (1 - q) / total + raw**2 * tpr * (1 - tpr) / pos + (1 - raw) ** 2 * tnr * (1 - tnr) / neg
            se = np.sqrt(var) / youden
        lower, upper = np.clip(raw - z * se, 0, 1), np.clip(raw + z * se, 0, 1)
        defined = ~np.isnan(theta)
        return {**out, "ci_lower": np.where(defined, lower, np.nan), "ci_upper": np.where(defined, upper, np.nan)}
    _check_draws(bootstrap, seed)
    rng = np.random.default_rng(seed)
    tables = agreement_from_counts(_resampled_tables(c, bootstrap, rng))
    q_draws = rng.binomial(total, q, size=(bootstrap, *q.shape)) / total
    draws = rogan_gladen_point(q_draws, tables["tpr"], tables["tnr"])
    lower, upper = _percentiles(draws, level)
    defined = ~np.isnan(theta)
    out.update(ci_lower=np.where(defined, lower, np.nan), ci_upper=np.where(defined, upper, np.nan))
    return {**out, "undefined": np.isnan(draws).sum(0)}


def rogan_gladen(
    labels: Any,
    verdicts: Any,
    unlabelled: Any,
    *,
    method: str = "bootstrap",
    bootstrap: int = ROGAN_GLADEN_REPLICATES,
    level: float = SAMPLING_DEFAULTS.level,
    seed: int = SAMPLING_DEFAULTS.seed,
) -> dict[str, Any]:
    """Rogan-Gladen's corrected pass rate of 0/1 verdicts, with an interval carrying both sets' noise.

    The point estimate is ``judgy.estimate_success_rate``'s on the same samples (``judgy`` 0.1.0:
    ``test_labels=labels``, ``test_preds=verdicts``, ``unlabeled_preds=unlabelled``); the interval
    is not: judgy's bootstraps the labelled samples only, unseeded.

    Parameters
    ----------
    labels : array-like of shape (n,)
        People's 0/1 labels of the labelled samples.
    verdicts : array-like of shape (n,)
        The judge's 0/1 verdicts of the same samples.
    unlabelled : array-like of shape (N,)
        The judge's 0/1 verdicts of the samples without a label.
    method, bootstrap, level, seed
        As :func:`rogan_gladen_from_counts`.

    Returns
    -------
    dict
        ``estimate``, ``ci_lower``, ``ci_upper``, ``q`` (the judge's rate on ``unlabelled``),
        ``tpr``, ``tnr`` (float), ``n``, ``N``, ``method`` and, by bootstrap, ``undefined``.

    Raises
    ------
    ValueError
        When the labels hold no pass or no fail (a rate is undefined), or ``TPR + TNR <= 1``
        (the judge is no better than chance: the correction is undefined), naming the numbers.

    Examples
    --------
    >>> out = rogan_gladen([1, 1, 1, 1, 0, 0, 0], [1, 1, 1, 0, 0, 0, 1], [1, 0, 1, 0], method="delta")
    >>> round(out["estimate"], 4), out["tpr"]
    (0.4, 0.75)
    """
    y = _values(labels, "labels", binary=True)
    f = _values(verdicts, "verdicts", binary=True)
    u = _values(unlabelled, "unlabelled", binary=True)
    if y.ndim != 1 or f.shape != y.shape or u.ndim != 1:
        raise ValueError(
            f"`labels` and `verdicts` must be 1-D of one length, `unlabelled` 1-D; got {y.shape}, {f.shape}"
        )
    counts = confusion_counts(f, y)
    if counts[:2].sum() == 0 or counts[2:].sum() == 0:
        raise ValueError(
            f"`labels` must hold both passes and fails for the judge's rates (got {int(y.sum())} of {y.size} passes)"
        )
    rates = agreement_from_counts(counts)
    if rates["tpr"] + rates["tnr"] <= 1:
        raise ValueError(
            f"Rogan-Gladen is undefined: the judge's TPR + TNR = {float(rates['tpr'] + rates['tnr']):.3f} <= 1 "
            "on the labelled samples (no better than chance)"
        )
    found = rogan_gladen_from_counts(
        counts, int(u.sum()), u.size, method=method, bootstrap=bootstrap, level=level, seed=seed
    )
    out: dict[str, Any] = {k: float(v) for k, v in found.items() if k != "undefined"}
    if "undefined" in found:
        out["undefined"] = int(found["undefined"])
    return {**out, "n": int(y.size), "N": int(u.size), "method": method}


def ppi_lambda(labels: Any, verdicts: Any, unlabelled: Any) -> np.ndarray:
    """PPI++'s power-tuned ``lambda`` of a mean: ``cov(y, f) / ((1 + n / N) var(f))`` clipped to [0, 1].

    As ``ppi-python``'s ``_calc_lam_glm`` for the mean (its ``ppi_mean_ci`` with ``lam=None``):
    the covariance of labels and verdicts on the labelled samples with divisor ``n``; the variance
    of the verdicts on labelled and unlabelled samples together with divisor ``n + N - 1``. Where
    every verdict is the same (variance 0: the judge says nothing) ``lambda`` is 0, the
    human-only mean (ppi-python gives NaN).

    Parameters
    ----------
    labels, verdicts : array-like of shape (..., n)
    unlabelled : array-like of shape (..., N)

    Returns
    -------
    ndarray of shape (...)
    """
    y, f, u = (np.asarray(a, dtype=np.float64) for a in (labels, verdicts, unlabelled))
    n, big_n = y.shape[-1], u.shape[-1]
    cov = ((y - y.mean(-1, keepdims=True)) * (f - f.mean(-1, keepdims=True))).mean(-1)
    var = np.concatenate([f, u], axis=-1).var(-1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = cov / ((1.0 + n / big_n) * var)
    return np.where(var > 0, np.clip(lam, 0.0, 1.0), 0.0)


def ppi_mean(
    labels: Any, verdicts: Any, unlabelled: Any, *, level: float = SAMPLING_DEFAULTS.level, lam: float | None = None
) -> dict[str, Any]:
    """PPI++'s mean (prediction-powered, power-tuned) with its normal interval, for a stack of data sets.

    Equal to ``ppi-python`` 0.2.3's ``ppi_mean_pointestimate(Y, Yhat, Yhat_unlabeled)`` and
    ``ppi_mean_ci(Y, Yhat, Yhat_unlabeled, alpha=1 - level)`` (to rounding):
    ``theta = lambda * mean(u) + mean(y - lambda * f)``, standard error
    ``sqrt(var(lambda * u) / N + var(y - lambda * f) / n)`` (divisors ``N`` and ``n``).

    Parameters
    ----------
    labels : array-like of shape (..., n)
        People's labels (0/1 or scores in [0, 1]) of the labelled samples, ``n >= 2``.
    verdicts : array-like of shape (..., n)
        The judge's verdicts of the same samples.
    unlabelled : array-like of shape (..., N)
        The judge's verdicts of the samples without a label, ``N >= 1``.
    level : float, default 0.95
    lam : float, optional
        Fixed ``lambda`` (1: plain PPI, 0: the labels' mean alone); default: :func:`ppi_lambda`.

    Returns
    -------
    dict
        ``estimate``, ``ci_lower``, ``ci_upper``, ``se``, ``lam`` (float for 1-D input, else
        ndarray of shape (...)), ``n``, ``N``.

    Examples
    --------
    >>> out = ppi_mean([1, 0, 1, 1], [1, 0, 0, 1], [1, 1, 0, 1, 1, 0])
    >>> round(out["estimate"], 4), round(out["lam"], 4)
    (0.7969, 0.2812)
    """
    z = normal_quantile(level)
    y = _values(labels, "labels", least=2)
    f = _values(verdicts, "verdicts", least=2)
    u = _values(unlabelled, "unlabelled")
    if f.shape != y.shape or u.shape[:-1] != y.shape[:-1]:
        raise ValueError(
            f"`labels` and `verdicts` must have one shape and `unlabelled` the same leading axes; "
            f"got {y.shape}, {f.shape}, {u.shape}"
        )
    n, big_n = y.shape[-1], u.shape[-1]
    lam_ = ppi_lambda(y, f, u) if lam is None else np.broadcast_to(np.asarray(lam, dtype=np.float64), y.shape[:-1])
    w = lam_[..., None]
    estimate = (w * u).mean(-1) + (y - w * f).mean(-1)
    se = np.sqrt((w * u).var(-1) / big_n + (y - w * f).var(-1) / n)
    out = {"estimate": estimate, "ci_lower": estimate - z * se, "ci_upper": estimate + z * se, "se": se, "lam": lam_}
    out = {k: float(v) if np.ndim(v) == 0 else np.asarray(v) for k, v in out.items()}
    return {**out, "n": n, "N": big_n}


def classical_mean(values: Any, *, level: float = SAMPLING_DEFAULTS.level) -> dict[str, Any]:
    """Return the mean with its normal (CLT) interval, as ``ppi-python``'s ``classical_mean_ci``.

    The human-only mean of the labelled slice, and the judge's naive rate (its verdicts taken as
    the truth): ``mean +- z * std / sqrt(n)`` (divisor ``n``).

    Parameters
    ----------
    values : array-like of shape (..., n)
        In [0, 1].
    level : float, default 0.95

    Returns
    -------
    dict
        ``estimate``, ``ci_lower``, ``ci_upper``, ``se`` (float for 1-D input), ``n``.

    Examples
    --------
    >>> out = classical_mean([1, 0, 1, 1])
    >>> out["estimate"], round(out["ci_lower"], 4)
    (0.75, 0.3257)
    """
    z = normal_quantile(level)
    v = _values(values, "values")
    estimate = v.mean(-1)
    se = v.std(-1) / np.sqrt(v.shape[-1])
    out = {"estimate": estimate, "ci_lower": estimate - z * se, "ci_upper": estimate + z * se, "se": se}
    return {**{k: float(x) if np.ndim(x) == 0 else x for k, x in out.items()}, "n": v.shape[-1]}


def ppi_mean_difference(
    first: tuple[Any, Any, Any],
    second: tuple[Any, Any, Any],
    *,
    paired: bool = False,
    level: float = SAMPLING_DEFAULTS.level,
) -> dict[str, Any]:
    """Compare two models' pass rates on the same judge: PPI++ of the difference, with its interval.

    Parameters
    ----------
    first, second : tuple of (labels, verdicts, unlabelled)
        Each model's run as :func:`ppi_mean` takes it.
    paired : bool, default False
        ``True``: the two runs are the same questions with the same ones labelled, in the same
        order (``first[0][i]`` and ``second[0][i]`` are one question): PPI++ of the per-question
        differences ``y_a - y_b`` with verdicts ``f_a - f_b`` (one ``lambda``, the pairing's
        correlation counted). ``False``: independent samples (different questions, or labels
        drawn apart): each run's PPI++ with its own ``lambda``, standard errors added in
        quadrature.
    level : float, default 0.95

    Returns
    -------
    dict
        ``estimate`` (first minus second), ``ci_lower``, ``ci_upper``, ``se``, ``lam`` (float, or
        a pair when independent), ``construction`` (``"paired"`` or ``"independent"``).

    Examples
    --------
    >>> a = ([1, 0, 1, 1], [1, 0, 1, 1], [1, 1, 0, 1])
    >>> b = ([0, 0, 1, 0], [0, 0, 1, 1], [0, 1, 0, 0])
    >>> round(ppi_mean_difference(a, b)["estimate"], 4)
    0.5583
    """
    z = normal_quantile(level)
    if paired:
        arrays = [np.asarray(x, dtype=np.float64) for x in (*first, *second)]
        if [a.shape for a in arrays[:3]] != [a.shape for a in arrays[3:]]:
            raise ValueError("`paired` runs must have the same labelled and unlabelled samples (shapes differ)")
        for a, name in zip(arrays, ("first", "first", "first", "second", "second", "second")):
            _values(a, name)
        # differences in [-1, 1] mapped onto [0, 1] and back: lambda is unchanged by the affine map
        d = ppi_mean(*(0.5 * (arrays[i] - arrays[i + 3]) + 0.5 for i in range(3)), level=level)
        est, se = 2 * d["estimate"] - 1, 2 * d["se"]
        return {
            "estimate": est,
            "ci_lower": est - z * se,
            "ci_upper": est + z * se,
            "se": se,
            "lam": d["lam"],
            "construction": "paired",
        }
    a, b = ppi_mean(*first, level=level), ppi_mean(*second, level=level)
    est, se = a["estimate"] - b["estimate"], np.sqrt(a["se"] ** 2 + b["se"] ** 2)
    return {
        "estimate": est,
        "ci_lower": est - z * se,
        "ci_upper": est + z * se,
        "se": se,
        "lam": (a["lam"], b["lam"]),
        "construction": "independent",
    }
