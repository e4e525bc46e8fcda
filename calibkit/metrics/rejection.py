"""Rejection metrics: how well a confidence ranks answers by their quality, as the uncertainty benchmarks publish them.

A confidence ranks the answers; rejecting the least confident first, the kept answers should be
the better ones. Each metric here reads that ranking against a quality in [0, 1] (1 - quality is
the loss; 0/1 correctness is a quality), from the rows (SPEC.md, "Rejection metrics"):

- ``prr``, ``prr_at``: the prediction rejection ratio of LM-Polygraph (its ``PredictionRejectionArea``
  normalised between random and oracle rejection): ``(PRA - random) / (oracle - random)``, PRA the
  mean quality of the kept answers averaged over the rejected shares ``0, 1/n, ..`` up to all but
  one (``prr``) or up to ``max_rejection`` (``prr_at``: LM-Polygraph's ``max_rejection``, PRR@50%).
  The random baseline is in closed form: a random order keeps the mean quality at every share, so
  random PRA is the mean quality (LM-Polygraph averages 1,000 shuffles);
- ``roc_auc``, ``pr_auc``: a wrong answer (quality below ``threshold``) detected by the uncertainty
  ``-confidence``: the ROC AUC (ties count one half, as scikit-learn's trapezoid) and the average
  precision of scikit-learn (``average_precision_score``), the positive class the wrong answers;
- ``aurc``: the mean loss of the ``k`` most confident answers, averaged over ``k`` (Geifman and
  El-Yaniv; ``calibkit.aurc`` over 0/1 correctness);
- ``augrc``: torch-uncertainty's area under the generalized risk-coverage curve (Traub et al.
  2024): the joint rate ``L_k / n`` of kept and wrong, by the trapezoid rule over the coverages
  ``1/n .. 1``, over ``1 - 1/n``;
- ``risk_at_coverage``: the mean loss of the ``coverage`` most confident answers (``1 -`` the
  selective accuracy over 0/1 correctness); ``coverage_at_risk``: the largest share of the most
  confident answers whose mean loss is at most ``risk`` (NaN where none is).

Ties in the confidence: every metric is the mean over the orders of the tied answers (their loss
spread evenly over their ranks, as ``calibkit.aurc``), which is what ROC AUC (scikit-learn) and
average precision (a threshold per distinct value) compute; LM-Polygraph and torch-uncertainty
break ties by their sort's order, so they agree with this where no confidence repeats.

Every metric is computed from per-group sums in one order, sorted once, so a bootstrap replicate
(Poisson weights per answer, ``calibkit.metrics.bootstrap.rejection_intervals``) costs sums, not a
sort; no loop over answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from calibkit.metrics.ranking import _harmonic
from calibkit.metrics.sampling import SAMPLING_DEFAULTS, SamplingSettings
from calibkit.metrics.settings import DEFAULTS
from calibkit.metrics.validation import check_coverage

__all__ = [
    "MAX_REJECTION",
    "REJECTION",
    "RankedRows",
    "check_rejection_settings",
    "prediction_rejection_area",
    "rank_rows",
    "rejection_from_weights",
    "rejection_metrics",
]

MAX_REJECTION = 0.5
"""The share rejected at most by ``prr_at`` (PRR@50%, the share LM-Polygraph's benchmark reports)."""

REJECTION: tuple[tuple[str, str, bool], ...] = (
    ("prr", "prediction rejection ratio: the rejection area between random (0) and oracle (1), LM-Polygraph's", True),
    ("prr_at", "PRR rejecting at most `max_rejection` of the answers (PRR@50%)", True),
    ("roc_auc", "ROC AUC of the uncertainty (-confidence) at detecting a wrong answer", True),
    ("pr_auc", "average precision of the uncertainty at detecting a wrong answer (the positive class)", True),
    ("augrc", "area under the generalized risk-coverage curve: the rate of answers both kept and wrong", False),
    ("risk_at_coverage", "the mean loss of the `coverage` share of answers the confidence ranks first", False),
    ("coverage_at_risk", "the largest share of the most confident answers whose mean loss is at most `risk`", True),
)
"""The rejection metrics the metrics registry adds (name, summary, higher is better; ``aurc`` is there already)."""

_TOLERANCE = 1e-12
"""``coverage_at_risk`` counts a mean loss within this (relative) of ``risk`` as at most ``risk`` (round-off)."""


@dataclass(frozen=True)
class RankedRows:
    """The answers in the two orders the metrics read, with their quality (:func:`rank_rows`).

    Parameters
    ----------
    by_confidence, confidence_starts : ndarray of int64
        The rows, most confident first (stable), and where each run of equal confidence starts.
    by_quality, quality_starts : ndarray of int64
        The rows, best quality first (the oracle's order), and where each run of equal quality starts.
    quality : ndarray of float64
        Each row's quality in [0, 1].
    wrong : ndarray of float64
        1 where the quality is below the threshold.
    """

    by_confidence: np.ndarray
    confidence_starts: np.ndarray
    by_quality: np.ndarray
    quality_starts: np.ndarray
    quality: np.ndarray
    wrong: np.ndarray

    def __len__(self) -> int:
        """Return the number of answers."""
        return self.quality.size


def _runs(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(-key, kind="stable")
    k = key[order]
    return order, np.flatnonzero(np.concatenate([[True], k[1:] != k[:-1]]))


def _vector(values: Any, name: str) -> np.ndarray:
    try:
        x = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be numbers, got {type(values).__name__}") from None
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"`{name}` must be a non-empty 1-D array, got shape {x.shape}")
    bad = np.flatnonzero(~np.isfinite(x))
    if bad.size:
        raise ValueError(f"`{name}` must be finite; row {bad[0]} is {x[bad[0]]}")
    return x


def rank_rows(confidence: Any, quality: Any, threshold: float = SAMPLING_DEFAULTS.threshold) -> RankedRows:
    """Check the rows and sort them once, by confidence and by quality.

    Parameters
    ----------
    confidence : array-like of shape (n,)
        Any finite numbers, higher for an answer more likely good (only their order counts;
        LM-Polygraph's uncertainty is ``-confidence``).
    quality : array-like of shape (n,)
        In [0, 1]: 0/1 correctness, or a score (ROUGE-L, accuracy, a judge's grade).
    threshold : float, default 0.5
        A quality below this is a wrong answer (ROC AUC, average precision).

    Returns
    -------
    RankedRows

    Raises
    ------
    ValueError
        Naming the argument, on an empty or non-finite array, a quality outside [0, 1], lengths
        that differ, or a threshold outside (0, 1].
    """
    c, q = _vector(confidence, "confidence"), _vector(quality, "quality")
    if c.size != q.size:
        raise ValueError(f"`confidence` has {c.size} values and `quality` {q.size}: one each per answer")
    outside = np.flatnonzero((q < 0) | (q > 1))
    if outside.size:
        raise ValueError(f"`quality` must be in [0, 1] (rescale a score first); row {outside[0]} is {q[outside[0]]}")
    threshold = SamplingSettings(threshold=threshold).threshold
    by_c, c_starts = _runs(c)
    by_q, q_starts = _runs(q)
    return RankedRows(by_c, c_starts, by_q, q_starts, q, (q < threshold).astype(np.float64))


def _exact_share(share: float, n: np.ndarray, ceil: bool) -> np.ndarray:
    """``floor`` (or ``ceil``) of ``share * n``, ``share`` read as the decimal it prints as (``coverage_rank``)."""
    ratio = Fraction(repr(float(share)))
    whole = np.rint(n).astype(np.int64).astype(object) * ratio.numerator
    out = -(-whole // ratio.denominator) if ceil else whole // ratio.denominator
    return np.asarray(out, dtype=np.float64)


def _tables(rows: RankedRows, weights: np.ndarray, order: np.ndarray, starts: np.ndarray) -> dict[str, np.ndarray]:
    """Per run of equal key (in ``order``), per replicate: mass, loss, quality and wrong mass, shape (R, G)."""
    w = weights[:, order]
    q, wrong = rows.quality[order], rows.wrong[order]
    mass = np.add.reduceat(w, starts, axis=1)
    good = np.add.reduceat(w * q, starts, axis=1)
    return {"m": mass, "good": good, "loss": mass - good, "wrong": np.add.reduceat(w * wrong, starts, axis=1)}


def _area(m: np.ndarray, value: np.ndarray, first: np.ndarray) -> np.ndarray:
    """``sum_{k=first..n} V_k / k`` per row, ``V_k`` the tie-averaged sum of ``value`` over the top ``k``.

    A run of ``m`` holding ``value`` after ``s`` ranks and ``B`` before adds, for its ranks ``s+j``
    from ``j0``: ``sum_j (B + j value/m) / (s + j)``, differences of harmonic numbers.
    """
    s = np.cumsum(m, axis=1) - m
    before = np.cumsum(value, axis=1) - value
    lo = np.maximum(first[:, None] - s, 1.0)
    count = np.maximum(m - lo + 1.0, 0.0)
    s0 = s + lo - 1.0
    rate = np.divide(value, m, out=np.zeros_like(value), where=m > 0)
    table = _harmonic(np.arange(np.max(s0 + count, initial=0.0) + 1.0))  # H(0..n), once: gathered below
    inverse = table[(s0 + count).astype(np.int64)] - table[s0.astype(np.int64)]
    ranked = count - s0 * inverse
    return ((before + (lo - 1.0) * rate) * inverse + rate * ranked).sum(axis=1)


def _prr(c: dict, o: dict, n: np.ndarray, share: float) -> np.ndarray:
    """PRR rejecting up to ``share``: ``(PRA - random) / (oracle - random)``, NaN where oracle equals random."""
    rejected = _exact_share(share, n, ceil=False)
    first = n - rejected + 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        area = _area(c["m"], c["good"], first) / rejected
        oracle = _area(o["m"], o["good"], first) / rejected
        random = c["good"].sum(axis=1) / n
        prr = (area - random) / (oracle - random)
    return np.where((rejected >= 1) & ~np.isclose(oracle, random, rtol=0.0, atol=1e-12), prr, np.nan)


def _detection(t: dict) -> tuple[np.ndarray, np.ndarray]:
    """ROC AUC and average precision of the uncertainty at detecting a wrong answer (ties: scikit-learn's)."""
    wrong, right = t["wrong"], t["m"] - t["wrong"]
    pos, neg = wrong.sum(axis=1), right.sum(axis=1)
    after = pos[:, None] - np.cumsum(wrong, axis=1)  # wrong mass less confident than the run
    with np.errstate(divide="ignore", invalid="ignore"):
        auc = (right * after + 0.5 * right * wrong).sum(axis=1) / (pos * neg)
        found = np.cumsum(wrong[:, ::-1], axis=1)  # the least confident first: uncertainty descending
        flagged = np.cumsum(t["m"][:, ::-1], axis=1)
        precision = np.divide(found, flagged, out=np.zeros_like(found), where=flagged > 0)
        ap = (wrong[:, ::-1] * precision).sum(axis=1) / pos
    return np.where(pos * neg > 0, auc, np.nan), np.where(pos > 0, ap, np.nan)


def _risk_at(t: dict, n: np.ndarray, coverage: float) -> np.ndarray:
    """Mean loss of the ``ceil(coverage n)`` most confident (tie-averaged)."""
    k = np.maximum(_exact_share(coverage, n, ceil=True), 1.0)
    m, loss = t["m"], t["loss"]
    cum = np.cumsum(m, axis=1)
    g = np.minimum((cum < k[:, None]).sum(axis=1), m.shape[1] - 1)
    rows = np.arange(m.shape[0])
    s, before = cum[rows, g] - m[rows, g], np.cumsum(loss, axis=1)[rows, g] - loss[rows, g]
    with np.errstate(divide="ignore", invalid="ignore"):
        return (before + (k - s) * loss[rows, g] / m[rows, g]) / k


def _coverage_at(t: dict, n: np.ndarray, risk: float) -> np.ndarray:
    """Largest share ``k/n`` of the most confident with mean loss ``L_k / k <= risk`` (NaN where none)."""
    m, loss = t["m"], t["loss"]
    s = np.cumsum(m, axis=1) - m
    before = np.cumsum(loss, axis=1) - loss
    rate = np.divide(loss, m, out=np.zeros_like(loss), where=m > 0)
    tol = _TOLERANCE * np.maximum(s + m, 1.0)
    level, slope = before - risk * s, rate - risk  # L - risk k at rank s + j: level + j slope
    with np.errstate(divide="ignore", invalid="ignore"):
        rising = np.clip(np.floor((tol - level) / slope), 0.0, m)
    falling = np.where(level + m * slope <= tol, m, 0.0)
    j = np.where(m > 0, np.where(slope > 0, rising, falling), 0.0)
    k = np.where(j >= 1, s + j, 0.0).max(axis=1)
    return np.where(k >= 1, k / n, np.nan)


def rejection_from_weights(
    rows: RankedRows,
    weights: np.ndarray,
    *,
    max_rejection: float = MAX_REJECTION,
    coverage: float = DEFAULTS.coverage,
    risk: float = DEFAULTS.abstention_alpha,
) -> dict[str, np.ndarray]:
    """Compute every rejection metric for each row of ``weights`` (each answer counted that many times).

    Parameters
    ----------
    rows : RankedRows
        From :func:`rank_rows`.
    weights : ndarray of shape (R, n)
        Whole counts per answer: ones for the data, Poisson(1) draws for bootstrap replicates.
    max_rejection, coverage, risk : float
        As :func:`rejection_metrics`.

    Returns
    -------
    dict of str to ndarray of shape (R,)
        ``prr``, ``prr_at``, ``roc_auc``, ``pr_auc``, ``aurc``, ``augrc``, ``risk_at_coverage``,
        ``coverage_at_risk``; NaN where a metric is undefined on a replicate.
    """
    c = _tables(rows, weights, rows.by_confidence, rows.confidence_starts)
    o = _tables(rows, weights, rows.by_quality, rows.quality_starts)
    n = c["m"].sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        aurc = _area(c["m"], c["loss"], np.ones_like(n)) / n
        m, loss = c["m"], c["loss"]
        before = np.cumsum(loss, axis=1) - loss
        total = (m * before + loss * (m + 1.0) / 2.0).sum(axis=1)  # sum over k of the tie-averaged L_k
        head = np.argmax(m > 0, axis=1)
        rows_r = np.arange(m.shape[0])
        first = loss[rows_r, head] / m[rows_r, head]
        augrc = (total - (first + loss.sum(axis=1)) / 2.0) / (n * (n - 1.0))
    roc, ap = _detection(c)
    return {
        "prr": _prr(c, o, n, 1.0),
        "prr_at": _prr(c, o, n, max_rejection),
        "roc_auc": roc,
        "pr_auc": ap,
        "aurc": np.where(n >= 1, aurc, np.nan),
        "augrc": np.where(n >= 2, augrc, np.nan),
        "risk_at_coverage": np.where(n >= 1, _risk_at(c, n, coverage), np.nan),
        "coverage_at_risk": np.where(n >= 1, _coverage_at(c, n, risk), np.nan),
    }


def check_rejection_settings(max_rejection: Any, coverage: Any, risk: Any) -> tuple[float, float, float]:
    """Check the shares of the rejection metrics, naming each.

    Parameters
    ----------
    max_rejection, coverage : object
        Numbers in (0, 1].
    risk : object
        A number in [0, 1].

    Returns
    -------
    (float, float, float)
    """
    numeric = (int, float, np.integer, np.floating)
    for value, name, low in ((max_rejection, "max_rejection", 0.0), (risk, "risk", None)):
        if isinstance(value, bool) or not isinstance(value, numeric) or not np.isfinite(value):
            raise ValueError(f"`{name}` must be a number, got {value!r}")
        if (low is not None and not 0 < value <= 1) or (low is None and not 0 <= value <= 1):
            raise ValueError(f"`{name}` must be in {'(0, 1]' if low is not None else '[0, 1]'}, got {value!r}")
    return float(max_rejection), check_coverage(coverage), float(risk)


def rejection_metrics(
    confidence: Any,
    quality: Any,
    *,
    max_rejection: float = MAX_REJECTION,
    coverage: float = DEFAULTS.coverage,
    risk: float = DEFAULTS.abstention_alpha,
    threshold: float = SAMPLING_DEFAULTS.threshold,
) -> dict[str, float]:
    """Judge how well ``confidence`` ranks answers by their ``quality``: PRR, ROC AUC, AUGRC and the rest.

    With ``L_k`` the loss (``1 - quality``) of the ``k`` most confident answers and ``A_k`` their
    quality (each the mean over the orders of tied confidences), ``n`` answers:

    - ``prr = (PRA - mean quality) / (PRA_oracle - mean quality)``, ``PRA = (1/n) sum_k A_k / k``
      and the oracle's ``PRA`` in the order of the quality; ``prr_at`` the same over ``k`` from
      ``n - floor(max_rejection n) + 1`` (the mean over ``floor(max_rejection n)`` shares rejected);
    - ``roc_auc``, ``pr_auc``: ROC AUC and average precision (scikit-learn's) of ``-confidence``
      at detecting a wrong answer (``quality < threshold``, the positive class);
    - ``aurc = (1/n) sum_k L_k / k``; ``augrc = (sum_k L_k - (L_1 + L_n)/2) / (n (n - 1))``;
    - ``risk_at_coverage = L_k / k`` at ``k = ceil(coverage n)``; ``coverage_at_risk``: the
      largest ``k / n`` with ``L_k / k <= risk``.

    Parameters
    ----------
    confidence : array-like of shape (n,)
        Finite numbers, higher for an answer more likely good (only their order counts).
    quality : array-like of shape (n,)
        In [0, 1]: 0/1 correctness or a score.
    max_rejection : float, default 0.5
        The share rejected at most by ``prr_at``, in (0, 1] (LM-Polygraph's ``max_rejection``).
    coverage : float, default 0.8
        The share kept of ``risk_at_coverage``, in (0, 1].
    risk : float, default 0.1
        The mean loss allowed of ``coverage_at_risk``, in [0, 1].
    threshold : float, default 0.5
        A quality below this is a wrong answer.

    Returns
    -------
    dict of str to float
        ``prr``, ``prr_at``, ``roc_auc``, ``pr_auc``, ``aurc``, ``augrc``, ``risk_at_coverage``,
        ``coverage_at_risk``. NaN where undefined: PRR when every quality is equal (oracle and
        random agree) or ``max_rejection n < 1``; ROC AUC and average precision without a wrong
        (or, ROC AUC, a right) answer; AUGRC for one answer; ``coverage_at_risk`` where no share
        meets ``risk``.

    Raises
    ------
    ValueError
        Naming the argument, on bad input (:func:`rank_rows`) or a share out of range.

    References
    ----------
    Malinin et al., Uncertainty in Gradient Boosting via Ensembles, ICLR 2021 (PRR); Vashurin et
    al., Benchmarking Uncertainty Quantification Methods for Large Language Models with
    LM-Polygraph, TACL 2025; Traub et al., Overcoming Common Flaws in the Evaluation of Selective
    Classification Systems, NeurIPS 2024 (AUGRC); Geifman and El-Yaniv, 2017 (AURC).

    Examples
    --------
    >>> out = rejection_metrics([0.9, 0.8, 0.3, 0.2], [1, 1, 0, 1])
    >>> round(out["prr"], 4), round(out["roc_auc"], 4), round(out["aurc"], 4), out["augrc"]
    (0.5556, 0.6667, 0.1458, 0.125)
    """
    max_rejection, coverage, risk = check_rejection_settings(max_rejection, coverage, risk)
    rows = rank_rows(confidence, quality, threshold)
    values = rejection_from_weights(
        rows, np.ones((1, len(rows))), max_rejection=max_rejection, coverage=coverage, risk=risk
    )
    return {name: float(v[0]) for name, v in values.items()}


def prediction_rejection_area(confidence: Any, quality: Any, *, max_rejection: float = 1.0) -> dict[str, float]:
    """Return the prediction rejection area and its oracle and random baselines (the random one in closed form).

    ``PRA = (1/r) sum_{k=n-r+1..n} A_k / k``, ``r = floor(max_rejection n)``, ``A_k`` the
    (tie-averaged) quality of the ``k`` most confident answers: LM-Polygraph's
    ``PredictionRejectionArea`` on the quality as given (it rescales the quality to [0, 1] by its
    minimum and maximum first, which PRR does not see). A random order keeps the mean quality in
    expectation at every ``k``, so the random area is the mean quality exactly.

    Parameters
    ----------
    confidence, quality : array-like of shape (n,)
        As :func:`rejection_metrics`.
    max_rejection : float, default 1.0
        In (0, 1], with ``max_rejection n >= 1``.

    Returns
    -------
    dict of str to float
        ``area``, ``oracle`` (ranked by the quality itself), ``random`` (the mean quality).

    Raises
    ------
    ValueError
        On bad input, or when ``max_rejection n < 1``.

    Examples
    --------
    >>> out = prediction_rejection_area([0.9, 0.8, 0.3, 0.2], [1, 1, 0, 1])
    >>> {k: round(v, 4) for k, v in out.items()}
    {'area': 0.8542, 'oracle': 0.9375, 'random': 0.75}
    """
    max_rejection = check_rejection_settings(max_rejection, 1.0, 0.0)[0]
    rows = rank_rows(confidence, quality)
    n = np.array([float(len(rows))])
    rejected = _exact_share(max_rejection, n, ceil=False)
    if rejected[0] < 1:
        raise ValueError(f"`max_rejection`: {max_rejection} of {len(rows)} answers rejects none")
    ones = np.ones((1, len(rows)))
    c = _tables(rows, ones, rows.by_confidence, rows.confidence_starts)
    o = _tables(rows, ones, rows.by_quality, rows.quality_starts)
    first = n - rejected + 1.0
    return {
        "area": float(_area(c["m"], c["good"], first)[0] / rejected[0]),
        "oracle": float(_area(o["m"], o["good"], first)[0] / rejected[0]),
        "random": float(rows.quality.mean()),
    }
