"""Preference calibration of reward models: the probability of each pair and the numbers of a set of pairs.

A reward model trained with the Bradley-Terry loss ``-log sigmoid(r_chosen - r_rejected)`` (TRL's
``RewardTrainer``; DPO's implicit reward ``beta * log(pi / pi_ref)`` likewise) gives the probability
``sigmoid((r_a - r_b) / T)`` that ``a`` is preferred to ``b``. Paper: Bradley and Terry 1952.

Every label is "chosen wins", so the pairs are read in the orientation of the model's preference
(the top-label reading, SPEC.md "Preference calibration"): a pair of margin
``m = r_chosen - r_rejected`` has confidence ``sigmoid(|m| / T)`` in the answer the model prefers,
right when that is the chosen one (``m > 0``). A tie (``m = 0``) prefers neither: confidence 0.5,
counted wrong (RewardBench's and TRL's accuracy, strict ``>``) and counted in ``ties``. Which
answer of a pair is listed first never changes a number.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibkit.metrics._kernels.constants import EDGE_SHRINK
from calibkit.metrics.formulas import binned_gaps
from calibkit.metrics.ranking import selective_bucket, selective_from_buckets
from calibkit.metrics.registry import PREFERENCE_METRICS
from calibkit.metrics.report import exact_report
from calibkit.metrics.sampling import OFF, SAMPLING_UNSET, SamplingSettings, resolve_sampling
from calibkit.metrics.settings import UNSET, resolve_settings
from calibkit.metrics.validation import check_positive_int, prepare_for

__all__ = [
    "PREFERENCE_HEADLINE",
    "PREFERENCE_METRICS",
    "check_margins",
    "length_bias",
    "preference_metrics",
    "preference_probability",
    "top_label_reading",
]


PREFERENCE_HEADLINE = (*PREFERENCE_METRICS[1:4], PREFERENCE_METRICS[0])
"""ECE, Brier, NLL, then accuracy: the headline numbers of a page about preferences."""

_BLOCK_ENTRIES = 1 << 23  # per-block sums held at once by the bootstrap (float64 entries of one table)
_REPLICATE_CHUNK = 64


def check_margins(margins: object, name: str = "margins") -> np.ndarray:
    """Return reward margins as a 1-D float64 array, refusing an empty one, NaN and infinity.

    Parameters
    ----------
    margins : array-like of shape (N,)
        ``reward_chosen - reward_rejected`` per pair.
    name : str, default "margins"
        The argument's name in error messages.

    Returns
    -------
    ndarray of float64, shape (N,)

    Raises
    ------
    ValueError
        Naming ``name``: not 1-D, empty, or holding NaN or infinity (the first such pair given).
    """
    m = np.asarray(margins, dtype=np.float64)
    if m.ndim != 1 or m.size == 0:
        raise ValueError(f"`{name}` must be a non-empty 1-D array of reward margins, got shape {m.shape}")
    bad = np.flatnonzero(~np.isfinite(m))
    if bad.size:
        raise ValueError(f"`{name}`: {bad.size} margins are NaN or infinite (first at pair {bad[0]})")
    return m


def preference_probability(margins: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Return the probability that the chosen answer is preferred, ``sigmoid(margin / T)``.

    Parameters
    ----------
    margins : array-like of shape (N,)
        ``reward_chosen - reward_rejected`` per pair.
    temperature : float, default 1.0
        ``T > 0``.

    Returns
    -------
    ndarray of shape (N,)

    Examples
    --------
    >>> preference_probability([0.0, 2.0], temperature=2.0).round(4)
    array([0.5   , 0.7311])
    """
    m = check_margins(margins)
    z = m / _check_temperature(temperature)
    e = np.exp(-np.abs(z))  # one exponential of a value <= 0: sigmoid(z) without overflow for any |z|
    return np.where(z >= 0, 1.0, e) / (1.0 + e)


def _check_temperature(temperature: Any) -> float:
    t = float(temperature) if isinstance(temperature, (int, float, np.integer, np.floating)) else float("nan")
    if isinstance(temperature, bool) or not (np.isfinite(t) and t > 0):
        raise ValueError(f"`temperature` must be a finite number > 0, got {temperature!r}")
    return t


def top_label_reading(margins: np.ndarray, temperature: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Read each pair in the orientation of the model's preference: its confidence and whether it is right.

    Parameters
    ----------
    margins : array-like of shape (N,)
        ``reward_chosen - reward_rejected`` per pair.
    temperature : float, default 1.0
        ``T > 0``.

    Returns
    -------
    confidence : ndarray of float64, shape (N,)
        ``sigmoid(|m| / T)``, in [0.5, 1]: the probability of the answer the model prefers (0.5 for a tie).
    right : ndarray of float64, shape (N,)
        1 where the preferred answer is the chosen one (``m > 0``); 0 where it is the rejected one
        and for a tie (``m = 0``, strict ``>`` as RewardBench's and TRL's accuracy).

    Examples
    --------
    >>> c, r = top_label_reading([2.0, -2.0, 0.0])
    >>> c.round(4).tolist(), r.tolist()
    ([0.8808, 0.8808, 0.5], [1.0, 0.0, 0.0])
    """
    m = check_margins(margins)
    t = _check_temperature(temperature)
    confidence = 1.0 / (1.0 + np.exp(-np.abs(m) / t))  # exp of a value <= 0: never overflows
    return confidence, (m > 0).astype(np.float64)


def _reading_and_loss(m: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the confidence, rightness and NLL term of each pair from one ``exp``.

    ``softplus(-m / T) = log1p(exp(-|m| / T)) + |m| / T`` where ``m < 0``: the same exponential as
    the confidence ``1 / (1 + exp(-|m| / T))``, never overflowing.
    """
    a = np.abs(m) / t
    e = np.exp(-a)
    loss = np.log1p(e)
    loss += np.where(m < 0, a, 0.0)
    e += 1.0
    return np.reciprocal(e, out=e), (m > 0).astype(np.float64), loss


def _exact_aurc(confidence: np.ndarray, wrong: np.ndarray) -> float:
    """Return SPEC.md's AURC exactly: pairs ranked by confidence, a group of equal ones spreading its errors evenly.

    Sorting the values (no permutation to carry) and counting each distinct confidence's pairs and
    errors gives the groups; the rank ``s + j`` of a group of ``m`` pairs and ``e`` errors, after
    ``s`` pairs and ``B`` errors, has the expected risk ``(B + j e / m) / (s + j)``
    (:func:`calibkit.metrics.ranking.risk_curve`'s rule), summed here over the ranks of each group.
    """
    values, counts = np.unique(confidence, return_counts=True)  # ascending
    missed, misses = np.unique(confidence[wrong > 0], return_counts=True)
    errors = np.zeros(values.size)
    errors[np.searchsorted(values, missed)] = misses
    size, errors = counts[::-1].astype(np.float64), errors[::-1]  # most confident first
    start, before = np.cumsum(size) - size, np.cumsum(errors) - errors
    one = size == 1
    total = float(np.sum((before[one] + errors[one]) / (start[one] + 1.0)))
    if not one.all():  # groups of ties: each of their ranks, the errors spread
        m, e, s, b = size[~one], errors[~one], start[~one], before[~one]
        g = np.repeat(np.arange(m.size), m.astype(np.int64))
        j = np.arange(g.size) - np.repeat(np.cumsum(m) - m, m.astype(np.int64)) + 1.0
        total += float(np.sum((b[g] + j * e[g] / m[g]) / (s[g] + j)))
    return total / confidence.size


def _check_lengths(length_chosen: Any, length_rejected: Any, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    if length_chosen is None and length_rejected is None:
        return None
    if length_chosen is None or length_rejected is None:
        given, missing = ("length_chosen", "length_rejected")[:: 1 if length_rejected is None else -1]
        raise ValueError(f"`{missing}` must be given with `{given}` (the length bias needs both answers' lengths)")
    out = []
    for name, value in (("length_chosen", length_chosen), ("length_rejected", length_rejected)):
        a = np.asarray(value, dtype=np.float64)
        if a.shape != (n,):
            raise ValueError(f"`{name}` must have one length per pair, shape ({n},), got {a.shape}")
        bad = np.flatnonzero(~np.isfinite(a) | (a < 0))
        if bad.size:
            raise ValueError(f"`{name}`: {bad.size} lengths are NaN, infinite or negative (first at pair {bad[0]})")
        out.append(a)
    return out[0], out[1]


def length_bias(margins: np.ndarray, length_chosen: np.ndarray, length_rejected: np.ndarray) -> dict[str, Any]:
    """Measure how the reward model's preferences follow the answers' lengths.

    Parameters
    ----------
    margins : array-like of shape (N,)
        ``reward_chosen - reward_rejected`` per pair.
    length_chosen, length_rejected : array-like of shape (N,)
        The lengths of the chosen and of the rejected answer (characters, tokens: any unit, >= 0).

    Returns
    -------
    dict
        ``chosen_longer``, ``chosen_shorter``, ``equal_length`` (pairs of each kind);
        ``accuracy_chosen_longer`` and ``accuracy_chosen_shorter`` (the accuracy, strict ``>``, on
        the pairs whose chosen answer is the longer, the shorter; None without such pairs); and
        ``correlation``, Pearson's of the margin and the length difference
        ``length_chosen - length_rejected`` (None when either is constant). A model that prefers
        the longer answer is right more often where the chosen answer is the longer, and its
        margins correlate positively with the length difference.

    Examples
    --------
    >>> b = length_bias([1.0, 2.0, -1.0, 0.5], [10, 30, 5, 20], [20, 10, 9, 10])
    >>> b["accuracy_chosen_longer"], b["accuracy_chosen_shorter"], round(b["correlation"], 4)
    (1.0, 0.5, 0.5701)
    """
    m = check_margins(margins)
    lc, lr = _check_lengths(length_chosen, length_rejected, m.size)
    d = lc - lr
    right = m > 0
    longer, shorter = d > 0, d < 0

    def accuracy(mask: np.ndarray) -> float | None:
        return float(right[mask].mean()) if mask.any() else None

    dm, dd = m - m.mean(), d - d.mean()
    norm = float(np.sqrt((dm * dm).sum() * (dd * dd).sum()))
    return {
        "chosen_longer": int(longer.sum()),
        "chosen_shorter": int(shorter.sum()),
        "equal_length": int((d == 0).sum()),
        "accuracy_chosen_longer": accuracy(longer),
        "accuracy_chosen_shorter": accuracy(shorter),
        "correlation": float((dm * dd).sum() / norm) if norm > 0 else None,
    }


def preference_metrics(
    margins: np.ndarray,
    *,
    temperature: float = 1.0,
    n_bins: int = UNSET.n_bins,
    length_chosen: np.ndarray | None = None,
    length_rejected: np.ndarray | None = None,
    bootstrap: int = OFF,
    level: float = SAMPLING_UNSET.level,
    seed: int = SAMPLING_UNSET.seed,
    max_blocks: int = 4000,
    sampling: SamplingSettings | None = None,
) -> dict[str, Any]:
    """Judge a reward model's preference probabilities on pairs people labelled (every label "chosen wins").

    Each pair of margin ``m = r_chosen - r_rejected`` is read in the orientation of the model's
    preference (SPEC.md, "Preference calibration"): confidence ``c = sigmoid(|m| / T)`` in the
    answer it prefers, right (``a = 1``) when that is the chosen one, ``m > 0``. A tie (``m = 0``)
    has confidence 0.5 and counts as wrong, as RewardBench's and TRL's accuracy count it (strict
    ``>``); ``ties`` says how many there are. The numbers are calibkit's 1-D binary ones of ``c``
    against ``a``, from the one-pass core (``calibkit.metrics.report.exact_report``), so no
    number depends on which answer of a pair is listed first:

    - ``accuracy = mean a`` (RewardBench's accuracy on the same scores);
    - ``ece = sum_b n_b/N |mean_b a - mean_b c|`` over ``n_bins`` equal-width right-closed bins of ``c``;
    - ``brier = mean (c - a)^2 = mean sigmoid(-m / T)^2`` (also for a tie: 0.25);
    - ``nll = mean softplus(-m / T) = mean -log sigmoid(m / T)``, the Bradley-Terry loss, exact
      (no clip: the binary report's NLL of ``c`` against ``a`` equals it wherever
      ``|m| / T < -log(eps)``, about 27.6);
    - ``aurc``: pairs ranked by ``c`` (SPEC.md's AURC, exact, tied confidences spread evenly);
    - ``mean_confidence = mean c`` (above ``accuracy``: over-confident).

    Parameters
    ----------
    margins : array-like of shape (N,)
        ``reward_chosen - reward_rejected`` per pair (for DPO, ``beta`` times the difference of
        the log-ratios). Finite.
    temperature : float, default 1.0
        ``T > 0``: the margins are divided by it (1: the model as trained).
    n_bins : int, default 15
        Bins of ECE and of the reliability diagram (the settings' ``n_bins``).
    length_chosen, length_rejected : array-like of shape (N,), optional
        The answers' lengths: with them, ``length_bias`` (``calibkit.metrics.preferences.length_bias``).
    bootstrap : int, default 0
        Replicates of percentile intervals of every number, resampling pairs (Poisson weights on
        random blocks of pairs, as :func:`calibkit.metrics.bootstrap.bootstrap_intervals`: a block
        is one pair up to ``max_blocks`` pairs). 0: none.
    level : float, default 0.95
        Two-sided level of the intervals.
    seed : int, default 0
        Seed of the replicates.
    max_blocks : int, default 4000
        Most blocks of pairs the bootstrap resamples (fewer when the AURC's buckets are many).
    sampling : SamplingSettings, optional
        ``bootstrap``, ``level`` and ``seed`` as one object, instead of the keywords.

    Returns
    -------
    dict
        ``pairs``, ``ties``, ``temperature``, ``n_bins``, then ``PREFERENCE_METRICS``
        (``accuracy``, ``ece``, ``brier``, ``nll``, ``aurc``, ``mean_confidence``: floats),
        ``confidence_gap = accuracy - mean_confidence`` (below 0: over-confident);
        ``reliability`` (``edges`` and per bin ``count``, ``confidence``, ``accuracy``, ``gap``:
        arrays, NaN means in empty bins); ``length_bias`` (``calibkit.metrics.preferences.length_bias``, or None without
        lengths); with ``bootstrap``, ``intervals``: metric (and ``confidence_gap``) -> ``(low, high)``.

    Raises
    ------
    ValueError
        Naming the argument: margins not 1-D, empty, NaN or infinite (the first such pair given);
        a temperature not finite and > 0; lengths of another shape, NaN, infinite or negative,
        or only one of them; a bad setting.

    References
    ----------
    Bradley and Terry 1952, "Rank analysis of incomplete block designs"; Guo et al. 2017 (ECE);
    Lambert et al. 2024, "RewardBench" (accuracy, strict ``>``).

    Examples
    --------
    >>> r = preference_metrics([2.0, 1.0, -0.5, 3.0, 0.0], n_bins=5)
    >>> r["pairs"], r["ties"], r["accuracy"], round(r["nll"], 4), round(r["ece"], 4)
    (5, 1, 0.6, 0.4312, 0.204)
    """
    settings = resolve_settings(n_bins=n_bins)
    sampling = resolve_sampling(sampling, bootstrap=bootstrap, level=level, seed=seed)
    max_blocks = check_positive_int(max_blocks, "max_blocks")
    m = check_margins(margins)
    t = _check_temperature(temperature)
    lengths = _check_lengths(length_chosen, length_rejected, m.size)
    conf, right, nll_terms = _reading_and_loss(m, t)
    report, stats = exact_report(prepare_for(conf, right.astype(np.int64), settings), settings, ("ece", "brier"))
    out: dict[str, Any] = {"pairs": int(m.size), "ties": int((m == 0).sum()), "temperature": t}
    out["n_bins"] = settings.n_bins
    out.update(
        accuracy=float(right.mean()),
        ece=float(report["ece"]),
        brier=float(report["brier"]),
        nll=float(nll_terms.mean()),
        aurc=_exact_aurc(conf, 1.0 - right),
        mean_confidence=float(conf.mean()),
    )
    out["confidence_gap"] = out["accuracy"] - out["mean_confidence"]  # ESCE's sign: < 0 over-confident
    table = stats.top_table(settings.n_bins).sum(axis=0)
    out["reliability"] = {"edges": np.linspace(0.0, 1.0, settings.n_bins + 1), **binned_gaps(table)}
    out["length_bias"] = length_bias(m, *lengths) if lengths is not None else None
    if sampling.bootstrap:
        out["intervals"] = _intervals(conf, right, nll_terms, settings.n_bins, sampling, max_blocks)
    return out


def _block_sums(
    conf: np.ndarray, right: np.ndarray, nll_terms: np.ndarray, n_bins: int, max_blocks: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sum each random block of pairs: scalars (G, 5), the reliability table (G, 2M), the AURC's buckets (G, 2U)."""
    n = conf.size
    bucket = selective_bucket(conf)
    occupied, slot = np.unique(bucket, return_inverse=True)  # in bucket order: most confident first
    width = 2 * occupied.size + 2 * n_bins + 5
    g = max(1, min(n, max_blocks, _BLOCK_ENTRIES // width))
    block = rng.permutation(n) % g
    wrong = 1.0 - right
    columns = (np.ones(n), right, conf, (conf - right) ** 2, nll_terms)
    scalars = np.stack([np.bincount(block, weights=w, minlength=g) for w in columns], axis=1)
    bins = np.clip(np.ceil((conf * n_bins) * EDGE_SHRINK).astype(np.int64) - 1, 0, n_bins - 1)  # SPEC.md's bins
    key, size = block * n_bins + bins, g * n_bins
    table = np.concatenate([np.bincount(key, weights=w, minlength=size).reshape(g, n_bins) for w in (right, conf)], 1)
    key, size = block * occupied.size + slot.ravel(), g * occupied.size
    buckets = [np.bincount(key, weights=w, minlength=size).reshape(g, occupied.size) for w in (np.ones(n), wrong)]
    return scalars, table, np.stack(buckets, axis=2).reshape(g, -1)


def _intervals(
    conf: np.ndarray,
    right: np.ndarray,
    nll_terms: np.ndarray,
    n_bins: int,
    sampling: SamplingSettings,
    max_blocks: int,
) -> dict[str, tuple[float, float]]:
    """Percentile intervals of ``PREFERENCE_METRICS``, Poisson weights on blocks of pairs (one set for all)."""
    rng = np.random.default_rng(sampling.seed)
    scalars, table, buckets = _block_sums(conf, right, nll_terms, n_bins, max_blocks, rng)
    coverage = resolve_settings().coverage
    values = {name: [] for name in (*PREFERENCE_METRICS, "confidence_gap")}
    for start in range(0, sampling.bootstrap, _REPLICATE_CHUNK):  # a loop over chunks of replicates
        weights = rng.poisson(1.0, size=(min(_REPLICATE_CHUNK, sampling.bootstrap - start), scalars.shape[0]))
        s, t, b = weights @ scalars, weights @ table, (weights @ buckets).reshape(len(weights), -1, 2)
        with np.errstate(invalid="ignore", divide="ignore"):
            n = s[:, 0]
            values["accuracy"].append(s[:, 1] / n)
            values["ece"].append(np.abs(t[:, :n_bins] - t[:, n_bins:]).sum(axis=1) / n)
            values["brier"].append(s[:, 3] / n)
            values["nll"].append(s[:, 4] / n)
            values["mean_confidence"].append(s[:, 2] / n)
            values["confidence_gap"].append((s[:, 1] - s[:, 2]) / n)
        aurc = [selective_from_buckets(r, coverage)["aurc"][0] if r[:, 0].sum() else np.nan for r in b]
        values["aurc"].append(np.asarray(aurc))
    tail = 100 * (1 - sampling.level) / 2
    out = {}
    for name, v in values.items():
        v = np.concatenate(v)
        low, high = np.nanpercentile(v, [tail, 100 - tail]) if (~np.isnan(v)).any() else (np.nan, np.nan)
        out[name] = (float(low), float(high))
    return out
