r"""Abstention with a guarantee: a confidence threshold chosen by Learn then Test (Angelopoulos et al. 2021).

A model answers when its confidence is at least ``t`` and abstains below; its *selective error* is
the error rate among the answered inputs (SPEC.md, "Abstention with a guarantee"):

.. math::

    R(t) = \frac{\#\{i : c_i \ge t,\ y_i \text{ wrong}\}}{\#\{i : c_i \ge t\}}.

Learn then Test turns "``R(t) <= alpha``" into a test of the null hypothesis
``H_t: R(t) > alpha`` at each threshold of a grid fixed in advance. With ``n(t)`` answered
calibration inputs of which ``k(t)`` are wrong, the p-value is the binomial tail
``P(Binomial(n(t), alpha) <= k(t))`` (valid because ``k(t)`` given ``n(t)`` is binomial with
parameter ``R(t)``, and the tail grows with it). Fixed-sequence testing walks the grid down from
the highest threshold that answers enough inputs to pass at all (``(1 - alpha)**n(t) <= delta``,
no error among them; above it every test fails whatever the answers, so testing there would only
end the walk), rejecting ``H_t`` while ``p(t) <= delta``, and
stops at the first failure: every threshold it rejected has ``R(t) <= alpha``, all at once, with
probability at least ``1 - delta`` over the calibration inputs. The lowest of them answers the
most; it is reported as the highest threshold that answers the same inputs. MAPIE's
``BinaryClassificationController`` (risk ``precision``, ``fwer_method="fixed_sequence"``) runs
the same procedure; its Hoeffding-Bentkus p-value for a binary loss is the minimum of this tail
and the Hoeffding bound ``exp(-n h(k/n, alpha))``, which is never below the tail (Chernoff), so
the two p-values are one.

The binomial tails are SciPy's (``scipy.stats.binom``: the regularized incomplete beta function,
exact to double precision and vectorised), imported inside the functions that use them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calibkit.metrics.settings import UNSET, renamed, resolve_settings
from calibkit.metrics.validation import check_open_unit, to_numpy

__all__ = [
    "GRID",
    "abstention_threshold",
    "binomial_pmf",
    "binomial_tail",
    "binomial_upper_tail",
    "chosen_threshold",
    "fixed_sequence",
    "selective_counts",
    "selective_error_at",
]

GRID = np.round(np.linspace(1.0, 0.0, 1001), 3)
"""The thresholds tested by default, from 1 down to 0 by 0.001 (fixed before any data is seen, as
Learn then Test requires)."""


def _counts(k: Any, n: Any, p: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Check a binomial's ``k``, ``n`` and ``p`` (integers >= 0, ``p`` in (0, 1)) and broadcast them."""
    p = check_open_unit(p, "p")
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    if (k < 0).any() or (k != np.floor(k)).any():
        raise ValueError("`k` must hold integers >= 0")
    if (n < 0).any() or (n != np.floor(n)).any():
        raise ValueError("`n` must hold integers >= 0")
    k, n = np.broadcast_arrays(k, n)
    return k, n, p


def binomial_pmf(k: Any, n: Any, p: float) -> np.ndarray:
    """Compute the binomial probability ``P(Binomial(n, p) = k)`` elementwise: ``scipy.stats.binom.pmf``.

    Parameters
    ----------
    k, n : array-like of int
        Successes and trials, ``0 <= k <= n`` (broadcast together).
    p : float
        The success probability, in (0, 1).

    Returns
    -------
    ndarray of float64

    Raises
    ------
    ValueError
        Naming ``p``, ``k`` or ``n``.
    """
    from scipy.stats import binom  # imported here: `import calibkit` does not load scipy.stats

    k, n, p = _counts(k, n, p)
    return np.asarray(binom.pmf(k, n, p), dtype=np.float64)


def binomial_tail(k: Any, n: Any, p: float) -> np.ndarray:
    r"""Compute the lower binomial tail ``P(Binomial(n, p) <= k)`` elementwise: ``scipy.stats.binom.cdf``.

    .. math::

        P(X \le k) = I_{1-p}(n - k, k + 1),

    the regularized incomplete beta function, which SciPy evaluates to double precision (Boost's
    ``ibeta``), vectorised over ``k`` and ``n``.

    Parameters
    ----------
    k, n : array-like of int
        ``0 <= k`` and ``n >= 0`` (broadcast together); ``k >= n`` gives 1.
    p : float
        In (0, 1).

    Returns
    -------
    ndarray of float64

    Raises
    ------
    ValueError
        Naming ``p``, ``k`` or ``n``.

    Examples
    --------
    >>> float(binomial_tail(0, 10, 0.1).round(6))  # 0.9 ** 10
    0.348678
    """
    from scipy.stats import binom  # imported here: `import calibkit` does not load scipy.stats

    k, n, p = _counts(k, n, p)
    return np.asarray(binom.cdf(k, n, p), dtype=np.float64)


def binomial_upper_tail(k: Any, n: Any, p: float) -> np.ndarray:
    r"""Compute the upper binomial tail ``P(Binomial(n, p) >= k)`` elementwise: ``scipy.stats.binom.sf(k - 1)``.

    .. math::

        P(X \ge k) = I_p(k, n - k + 1),

    computed directly (not as ``1 - P(X <= k - 1)``, which loses every digit of a small tail).
    The p-value of "more than ``p`` of the ``n`` fail" when ``k`` did: 2 wrong of 10 answered at
    ``p = 0.1`` gives ``P(X >= 2) = 0.264``.

    Parameters
    ----------
    k, n : array-like of int
        ``0 <= k`` and ``n >= 0`` (broadcast together); ``k = 0`` gives 1, ``k > n`` gives 0.
    p : float
        In (0, 1).

    Returns
    -------
    ndarray of float64

    Raises
    ------
    ValueError
        Naming ``p``, ``k`` or ``n``.

    Examples
    --------
    >>> float(binomial_upper_tail(2, 10, 0.1).round(4))  # 1 - 0.9**10 - 10 * 0.1 * 0.9**9
    0.2639
    """
    from scipy.stats import binom  # imported here: `import calibkit` does not load scipy.stats

    k, n, p = _counts(k, n, p)
    return np.asarray(binom.sf(k - 1.0, n, p), dtype=np.float64)


def _check_grid(thresholds: Any) -> np.ndarray:
    """Return the grid as distinct finite values in [0, 1], highest first."""
    grid = GRID if thresholds is None else to_numpy(thresholds, "thresholds").astype(np.float64)
    if grid.ndim != 1 or grid.size == 0:
        raise ValueError(f"`thresholds` must be a non-empty 1-D array, got shape {tuple(grid.shape)}")
    if not np.isfinite(grid).all() or (grid < 0).any() or (grid > 1).any():
        raise ValueError("`thresholds` must lie in [0, 1]")
    return np.unique(grid)[::-1]


def selective_counts(
    confidence: np.ndarray, right: np.ndarray, thresholds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Count, at each threshold ``t``, the inputs answered (``confidence >= t``) and the wrong ones among them.

    Ties in confidence are answered together: the counts depend on the values only, not on any order.

    Parameters
    ----------
    confidence : ndarray of float64, shape (n,)
    right : ndarray, shape (n,)
        1 (or True) for a right answer, 0 for a wrong one.
    thresholds : ndarray of float64, shape (m,)

    Returns
    -------
    answered, wrong : ndarray of int64, shape (m,)
    """
    order = np.argsort(-confidence, kind="stable")
    wrong_so_far = np.concatenate([[0], np.cumsum(1 - np.asarray(right, dtype=np.int64)[order])])
    answered = confidence.size - np.searchsorted(np.sort(confidence), thresholds, side="left")
    return answered.astype(np.int64), wrong_so_far[answered].astype(np.int64)


def fixed_sequence(p_values: np.ndarray, delta: float) -> int:
    """Run fixed-sequence testing: how many leading hypotheses are rejected at level ``delta``.

    Parameters
    ----------
    p_values : ndarray, shape (m,)
        In the fixed order of testing.
    delta : float

    Returns
    -------
    int
        The number of leading p-values at most ``delta`` (the walk stops at the first above).
    """
    return int(np.logical_and.accumulate(np.asarray(p_values) <= delta).sum())


def chosen_threshold(answered: np.ndarray, p_values: np.ndarray, alpha: float, delta: float) -> int | None:
    """Pick the threshold of Learn then Test on a descending grid, from its counts and p-values.

    Parameters
    ----------
    answered : ndarray of int, shape (m,)
        The inputs each threshold answers, highest threshold first (so non-decreasing).
    p_values : ndarray, shape (m,)
    alpha, delta : float

    Returns
    -------
    int or None
        The index of the threshold: fixed-sequence testing from the first threshold that answers
        enough inputs to pass at all (``(1 - alpha)**n <= delta``: no error among ``n``), then, of
        the thresholds answering the same inputs as the lowest one rejected, the highest. None
        when the first test fails (or no threshold answers enough).
    """
    # a threshold answering n < log(delta) / log(1 - alpha) inputs fails whatever their correctness: testing
    # it would only end the walk, so the walk starts below (the start reads the confidences, never the labels)
    start = int(np.count_nonzero(answered * math.log1p(-alpha) > math.log(delta)))
    passed = fixed_sequence(p_values[start:], delta)
    if passed == 0:
        return None
    # the thresholds answering the same inputs as the lowest one rejected pass too; the highest of them
    # vouches for no confidence the calibration never saw (and is MAPIE's choice)
    return int(np.searchsorted(answered, answered[start + passed - 1], side="left"))


def abstention_threshold(
    confidence: Any,
    right: Any,
    *,
    abstention_alpha: float = UNSET.abstention_alpha,
    abstention_delta: float = UNSET.abstention_delta,
    thresholds: Any = None,
    alpha: float | None = None,
    delta: float | None = None,
) -> dict[str, Any]:
    r"""Find the lowest confidence threshold whose selective error is at most ``alpha`` with probability ``1 - delta``.

    ``alpha`` and ``delta`` below are ``abstention_alpha`` and ``abstention_delta``, the names of
    :class:`calibkit.CalibrationSettings` (and every other door).

    Learn then Test (Angelopoulos, Bates, Candès, Jordan, Lei 2021) with binomial-tail p-values
    and fixed-sequence testing over a grid fixed in advance, walked from the highest threshold
    down. An input is answered when ``confidence >= t``; the selective error is the share of
    wrong answers among the answered:

    .. math::

        p(t) = P\big(\mathrm{Binomial}(n(t), \alpha) \le k(t)\big), \qquad
        \hat t = \min\{t_j : p(t_s), \dots, p(t_j) \le \delta\},

    with ``t_1 > t_2 > ...`` the grid, ``n(t)`` the answered inputs, ``k(t)`` the wrong ones
    among them, and ``t_s`` the highest threshold that answers enough inputs to pass at all,
    ``(1 - alpha)**n(t) <= delta`` (above it a test fails whatever the answers: the walk starts
    below; the start reads the confidences only, never the correctness). Then the
    selective error at :math:`\hat t` is at most ``alpha`` with probability at least
    ``1 - delta`` over the draw of the calibration inputs (exchangeable with the new ones). Every
    threshold between :math:`\hat t` and the next lower confidence answers the same calibration
    inputs; the one returned is the highest of them, the highest grid value at most the lowest
    confidence answered (the data vouch for no confidence below it). It is the threshold of
    MAPIE's ``BinaryClassificationController(risk="precision", target_level=1 - alpha,
    confidence_level=1 - delta, fwer_method="fixed_sequence")`` where MAPIE walks the grid
    downward (SPEC.md says when it does not, and where its float error count differs).

    Parameters
    ----------
    confidence : array-like of float, shape (n,)
        The confidence that each answer is right, finite (no NaN: leave out answers without one).
    right : array-like, shape (n,)
        1 (or True) for a right answer, 0 for a wrong one.
    abstention_alpha : float, default 0.1
        The selective error allowed, in (0, 1).
    abstention_delta : float, default 0.1
        The probability allowed that the guarantee fails, in (0, 1).
    thresholds : array-like of float, optional
        The grid, in [0, 1] (any order; tested from the highest down). Default ``GRID``:
        1 to 0 by 0.001.
    alpha, delta : float, optional
        Deprecated names of ``abstention_alpha`` and ``abstention_delta`` (a ``FutureWarning``).

    Returns
    -------
    dict
        ``threshold`` (None when no threshold passes: the first one tested already fails),
        ``answered`` (the share of inputs answered at it, 0.0 when None), ``n_answered``,
        ``selective_error`` (on these inputs, None when none answered), ``p_value`` (at the
        threshold), ``alpha``, ``delta``, ``n`` (inputs), and ``thresholds`` and ``p_values``
        (the grid tested, highest first, and each p-value).

    Raises
    ------
    ValueError
        Naming the argument: ``confidence`` not finite or outside [0, 1], ``right`` not 0/1,
        different lengths, no input, ``abstention_alpha`` or ``abstention_delta`` outside (0, 1), a bad grid.

    Examples
    --------
    >>> c = [0.95, 0.9, 0.9, 0.85, 0.8, 0.7, 0.6, 0.5]
    >>> r = [1, 1, 1, 1, 1, 1, 0, 0]
    >>> out = abstention_threshold(c * 20, r * 20, abstention_alpha=0.2, abstention_delta=0.1)
    >>> out["threshold"], out["answered"]
    (0.6, 0.875)
    """
    abstention_alpha = renamed("alpha", alpha, "abstention_alpha", abstention_alpha, "abstention_threshold()")
    abstention_delta = renamed("delta", delta, "abstention_delta", abstention_delta, "abstention_threshold()")
    levels = resolve_settings(abstention_alpha=abstention_alpha, abstention_delta=abstention_delta)
    alpha, delta = levels.abstention_alpha, levels.abstention_delta
    c = to_numpy(confidence, "confidence").astype(np.float64).ravel()
    y = to_numpy(right, "right").ravel()
    if c.size == 0:
        raise ValueError("`confidence` holds no input")
    if y.shape != c.shape:
        raise ValueError(f"`right` has {y.size} values for {c.size} confidences")
    if not np.isfinite(c).all() or (c < 0).any() or (c > 1).any():
        raise ValueError("`confidence` must be finite and lie in [0, 1] (leave out answers without one)")
    if not np.isin(y, (0, 1)).all():
        raise ValueError("`right` must be 0/1 (or booleans)")
    grid = _check_grid(thresholds)
    answered, wrong = selective_counts(c, y.astype(np.int64), grid)
    p_values = np.where(answered > 0, binomial_tail(wrong, answered, alpha), 1.0)
    j = chosen_threshold(answered, p_values, alpha, delta)
    out: dict[str, Any] = {"alpha": alpha, "delta": delta, "n": int(c.size), "thresholds": grid, "p_values": p_values}
    if j is None:
        return {**out, "threshold": None, "answered": 0.0, "n_answered": 0, "selective_error": None, "p_value": None}
    return {
        **out,
        "threshold": float(grid[j]),
        "answered": float(answered[j] / c.size),
        "n_answered": int(answered[j]),
        "selective_error": float(wrong[j] / answered[j]),
        "p_value": float(p_values[j]),
    }


def selective_error_at(confidence: Any, right: Any, threshold: float) -> tuple[float | None, int]:
    """Return the selective error of answering at ``confidence >= threshold``, and the number answered.

    Parameters
    ----------
    confidence : array-like of float, shape (n,)
    right : array-like, shape (n,)
        1 for a right answer, 0 for a wrong one.
    threshold : float

    Returns
    -------
    tuple
        The error rate among the answered (None when none is), and how many are answered.
    """
    c = np.asarray(confidence, dtype=np.float64)
    answered = c >= threshold
    count = int(answered.sum())
    if count == 0:
        return None, 0
    return float(1.0 - np.asarray(right, dtype=np.float64)[answered].mean()), count
