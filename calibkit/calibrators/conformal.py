"""Split-conformal prediction sets: LAC, APS and RAPS, marginal or class-conditional (Mondrian).

A :class:`SplitConformal` predictor is fitted on held-out calibration logits (or probabilities)
and labels; it then turns each row of new predictions into a *set* of classes that holds the true
label with probability at least ``confidence_level`` when the calibration rows and the new row are
exchangeable. It is not a probability calibrator: it outputs sets, not probabilities, so it has no
``calibration`` block, no entry in ``calibkit.calibrators.registry`` and no place in the
comparison table of calibrators. A calibrator (temperature scaling, say) may run before it: the
sets keep their coverage, and their size says whether the probabilities rank classes better.

The conventions (score, quantile, ties, the label that crosses the threshold) are those of MAPIE
1.6's ``SplitConformalClassifier(prefit=True)``, non-randomised; SPEC.md ("Conformal prediction
sets") writes them down, and the tests compare the sets with MAPIE's, set by set.
"""

from __future__ import annotations

import inspect
from decimal import Decimal
from typing import Any

import numpy as np

from calibkit.calibrators.base import check_finite, logits_rows, softmax_rows
from calibkit.metrics.settings import DEFAULTS
from calibkit.metrics.validation import (
    check_bool,
    check_choice,
    check_ignore_index,
    check_non_negative,
    prepare_labels,
    to_numpy,
)

#: Conformity scores: least ambiguous sets, adaptive prediction sets, regularised APS.
SCORES = ("lac", "aps", "raps")
#: What ``predictions`` hold.
INPUTS = ("logits", "probs")
#: MAPIE's tolerance in every comparison of a score with the quantile (``mapie._machine_precision``).
EPSILON = 1e-8
#: Largest ``|sum - 1|`` of a row of probabilities (MAPIE's ``check_proba_normalized``: rtol 1e-5).
SUM_TOLERANCE = 1e-5


def alpha_of(confidence_level: Any) -> float:
    """Check a confidence level in (0, 1) and return ``alpha = 1 - confidence_level``.

    The difference is taken in decimal, as MAPIE does, so that 0.9 gives exactly the float 0.1
    (``1 - 0.9`` in binary floating point is 0.09999999999999998).

    Parameters
    ----------
    confidence_level : float
        The target coverage, strictly between 0 and 1.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Naming ``confidence_level``.
    """
    if isinstance(confidence_level, (bool, np.bool_)) or not isinstance(
        confidence_level, (int, float, np.integer, np.floating)
    ):
        raise ValueError(f"`confidence_level` must be a number in (0, 1), got {confidence_level!r}")
    if not 0 < confidence_level < 1:
        raise ValueError(f"`confidence_level` must lie strictly between 0 and 1, got {confidence_level!r}")
    return float(Decimal("1") - Decimal(repr(float(confidence_level))))


def fewest_rows(alpha: float) -> int:
    """Return the fewest calibration rows a level allows: ``n >= max(1/alpha, 1/(1 - alpha))`` (MAPIE's rule).

    With fewer, the order statistic ``ceil((n + 1)(1 - alpha))`` may exceed ``n`` (the quantile
    would be infinite and every set the full label set).

    Parameters
    ----------
    alpha : float
        ``1 - confidence_level``.

    Returns
    -------
    int
    """
    return int(np.ceil(max(1 / alpha, 1 / (1 - alpha))))


def conformal_quantile(scores: np.ndarray, alpha: float) -> float:
    """Return the split-conformal quantile: the ``ceil((n + 1)(1 - alpha))``-th smallest of ``n`` scores.

    Computed as MAPIE computes it, ``np.quantile(scores, ceil((n + 1)(1 - alpha)) / n,
    method="lower")``, so that the floating-point rounding of the level is the same.

    Parameters
    ----------
    scores : ndarray of shape (n,)
        Conformity scores of the calibration rows.
    alpha : float
        ``1 - confidence_level``; ``n >= max(1/alpha, 1/(1 - alpha))`` (see :func:`fewest_rows`).

    Returns
    -------
    float
    """
    n = len(scores)
    return float(np.quantile(scores, np.ceil((n + 1) * (1 - alpha)) / n, method="lower"))


def _sorted_cumulative(p: np.ndarray, k_reg: int | None, lambda_reg: float) -> tuple[np.ndarray, np.ndarray]:
    """(order, cumulative): classes by decreasing probability and the running sum along that order.

    The order is numpy's ``argsort`` reversed, as MAPIE sorts (equal probabilities fall in
    numpy's order). RAPS adds ``lambda_reg * max(0, rank - k_reg)`` (rank from 1) to the sum.
    """
    order = np.flip(np.argsort(p, axis=1), axis=1)
    cumulative = np.cumsum(np.take_along_axis(p, order, axis=1), axis=1)
    if k_reg is not None:
        cumulative += lambda_reg * np.maximum(0, np.arange(1, p.shape[1] + 1) - k_reg)
    return order, cumulative


def _last_included_probability(p: np.ndarray, cumulative: np.ndarray, threshold: float) -> np.ndarray:
    """Return the probability of the label that first reaches ``threshold``, per row (MAPIE's include_last_label=True).

    ``cumulative`` is in the original class order. Among the labels whose cumulative score is at
    least ``threshold - EPSILON``, the one with the smallest (the first such class index on a
    tie; class 0 when none is) is the last label in the set. A last probability of at most
    ``EPSILON`` is replaced by the row's smallest probability of at least ``EPSILON``, so that
    labels of probability 0 stay out.
    """
    over = cumulative - threshold
    last = np.argmin(np.where(over >= -EPSILON, over, np.inf), axis=1)
    p_last = p[np.arange(len(p)), last]
    tiny = p_last <= EPSILON
    if tiny.any():
        p_last[tiny] = np.where(p[tiny] < EPSILON, np.inf, p[tiny]).min(axis=1)
    return p_last


class SplitConformal:
    """Split-conformal prediction sets (LAC, APS, RAPS), marginal or class-conditional, non-randomised.

    Fitted on calibration rows (held out from training), it returns for each new row the set of
    classes whose conformity score is within the calibration scores' quantile. With ``n``
    exchangeable calibration rows, ``P(y in set) >= 1 - alpha`` where
    ``alpha = 1 - confidence_level`` (over the class of each row too, for ``conditional=True``).

    Scores, for a row of probabilities ``p`` (softmax of the logits when ``inputs="logits"``),
    label ``y``, and ``o(y)`` the rank of ``y`` (from 1) by decreasing probability:

    - ``"lac"`` (Sadinle et al. 2019): ``s = 1 - p_y``; set ``{j : 1 - p_j <= q}``. Sets may be
      empty.
    - ``"aps"`` (Romano et al. 2020): ``s = sum of p over the o(y) most probable classes``
      (non-randomised: ``p_y`` is added whole); the set holds the classes in decreasing
      probability up to and including the first whose running sum reaches ``q``, and every class
      as probable as that one. Never empty.
    - ``"raps"`` (Angelopoulos et al. 2021): APS plus ``lambda_reg * max(0, o - k_reg)`` on the
      running sum (and on ``s``); needs ``k_reg`` and ``lambda_reg``.

    ``q`` is the ``ceil((n + 1)(1 - alpha))``-th smallest calibration score; every comparison
    allows MAPIE's tolerance of 1e-8. ``conditional=True`` (Mondrian, class-conditional) takes one
    quantile ``q_j`` per class from the calibration rows labelled ``j`` and puts ``j`` in a set
    when it is in the set that ``q_j`` would build. Sets equal MAPIE 1.6's
    ``SplitConformalClassifier(prefit=True)`` (``include_last_label=True``) on the same
    probabilities, whose APS and RAPS scores are randomised unless its uniform draws are 0; SPEC.md
    ("Conformal prediction sets") gives the conventions.

    This is not a probability calibrator (it outputs sets), so it is not among the calibrators of
    ``calibkit.calibrators.registry`` and their comparison table.

    Parameters
    ----------
    score : {"lac", "aps", "raps"}, default "lac"
        The conformity score.
    confidence_level : float, default 0.9
        Target coverage ``1 - alpha``, strictly between 0 and 1. The fit needs at least
        ``max(1/alpha, 1/(1 - alpha))`` calibration rows (per class when ``conditional``), as
        MAPIE does (alpha taken in decimal: 10 rows at 0.9, 20 at 0.95).
    conditional : bool, default False
        One quantile per class (class-conditional coverage) instead of one for all rows.
    inputs : {"logits", "probs"}, default "logits"
        Whether ``predictions`` are logits (softmax applied) or probabilities (each row must sum
        to 1 within 1e-5).
    k_reg : int, optional
        RAPS: the rank from which the penalty applies (``score="raps"`` only, then required).
    lambda_reg : float, optional
        RAPS: the penalty per rank beyond ``k_reg`` (``score="raps"`` only, then required).
    ignore_index : int, default -100
        Label of the rows the fit skips (padding of token classification).

    Attributes
    ----------
    alpha_ : float
        ``1 - confidence_level``.
    quantile_ : float or ndarray of shape (K,)
        ``q``, or ``q_j`` per class when ``conditional``.
    conformity_scores_ : ndarray of shape (n,)
        The calibration rows' scores.
    n_calibration_ : int
        Calibration rows used (``ignore_index`` rows left out).
    num_classes_ : int

    References
    ----------
    Sadinle, M., Lei, J. and Wasserman, L. (2019). Least Ambiguous Set-Valued Classifiers with
    Bounded Error Levels. Journal of the American Statistical Association 114(525).

    Romano, Y., Sesia, M. and Candès, E. (2020). Classification with Valid and Adaptive Coverage.
    NeurIPS 2020.

    Angelopoulos, A. N., Bates, S., Malik, J. and Jordan, M. I. (2021). Uncertainty Sets for Image
    Classifiers using Conformal Prediction. ICLR 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from calibkit.calibrators import SplitConformal
    >>> rng = np.random.default_rng(0)
    >>> logits = rng.normal(size=(500, 4)) * 3
    >>> labels = (logits + rng.gumbel(size=(500, 4))).argmax(axis=1)  # drawn from softmax(logits)
    >>> conformal = SplitConformal(score="aps", confidence_level=0.9).fit(logits[:400], labels[:400])
    >>> s = conformal.predict_sets(logits[400:])
    >>> s.shape, s.dtype
    ((100, 4), dtype('bool'))
    """

    def __init__(
        self,
        *,
        score: str = "lac",
        confidence_level: float = 0.9,
        conditional: bool = False,
        inputs: str = "logits",
        k_reg: int | None = None,
        lambda_reg: float | None = None,
        ignore_index: int = DEFAULTS.ignore_index,
    ) -> None:
        self.score = check_choice(score, "score", SCORES)
        alpha_of(confidence_level)
        self.confidence_level = confidence_level
        self.conditional = check_bool(conditional, "conditional")
        self.inputs = check_choice(inputs, "inputs", INPUTS)
        self.k_reg, self.lambda_reg = _check_raps(score, k_reg, lambda_reg)
        self.ignore_index = check_ignore_index(ignore_index)

    # -- scikit-learn conventions ------------------------------------------------------------
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Return the constructor's arguments and their current values (scikit-learn convention).

        Parameters
        ----------
        deep : bool, default True
            Accepted for scikit-learn compatibility; there are no sub-estimators.

        Returns
        -------
        dict of str to object
        """
        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {name: getattr(self, name) for name in names}

    def set_params(self, **params: Any) -> SplitConformal:
        """Change settings; each is checked as the constructor checks it, before any is set.

        Parameters
        ----------
        **params
            Constructor arguments by name.

        Returns
        -------
        SplitConformal
            ``self``.

        Raises
        ------
        ValueError
            When a name is not a constructor argument or a value is out of range.
        """
        current = self.get_params()
        for name in params:
            if name not in current:
                raise ValueError(f"`{name}` is not a parameter of SplitConformal; valid: {sorted(current)}")
        checked = type(self)(**{**current, **params})
        for name in params:
            setattr(self, name, getattr(checked, name))
        return self

    def __repr__(self) -> str:
        """Return ``SplitConformal(arg=value, ...)`` with the constructor's arguments."""
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_params().items())})"

    # -- fitting -----------------------------------------------------------------------------
    def fit(self, predictions: Any, labels: Any) -> SplitConformal:
        """Compute the calibration rows' conformity scores and their quantile (per class if ``conditional``).

        Parameters
        ----------
        predictions : array-like or torch.Tensor of shape (N, K) or (N, L, K)
            Logits or probabilities, as ``inputs`` says, of calibration rows the model was not
            trained on.
        labels : array-like of int, shape (N,) or (N, L)
            Their labels; ``ignore_index`` rows are skipped.

        Returns
        -------
        SplitConformal
            ``self``, fitted.

        Raises
        ------
        ValueError
            On bad input (shapes, labels, NaN, probabilities that do not sum to 1), or too few
            calibration rows for the confidence level (per class when ``conditional``).
        """
        self.set_params(**self.get_params())  # attributes assigned directly are checked too
        alpha = alpha_of(self.confidence_level)
        p, shape = self._probabilities(predictions)
        y_raw = to_numpy(labels, "labels")
        if tuple(y_raw.shape) != shape[:-1]:
            raise ValueError(
                f"`labels` has shape {tuple(y_raw.shape)} but `predictions` of shape {shape} needs {shape[:-1]}"
            )
        y = prepare_labels(y_raw)
        keep = y != self.ignore_index
        k = shape[-1]
        bad = keep & ((y < 0) | (y >= k))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"`labels` must lie in [0, {k}) or equal ignore_index={self.ignore_index}; got {int(y[i])} at flat "
                f"position {i}"
            )
        p, y = p[keep], y[keep].astype(np.int64)
        check_finite(p, "predictions")
        self._check_rows(len(y), alpha, "calibration rows (labels other than ignore_index)")
        scores = self._scores(p, y)
        if self.conditional:
            counts = np.bincount(y, minlength=k)
            for j in np.flatnonzero(counts < fewest_rows(alpha)):
                self._check_rows(int(counts[j]), alpha, f"calibration rows of class {j} (conditional=True)")
            self.quantile_ = np.array([conformal_quantile(scores[y == j], alpha) for j in range(k)])
        else:
            self.quantile_ = conformal_quantile(scores, alpha)
        self.alpha_, self.conformity_scores_ = alpha, scores
        self.n_calibration_, self.num_classes_ = len(y), k
        return self

    def _check_rows(self, n: int, alpha: float, what: str) -> None:
        if n < max(1 / alpha, 1 / (1 - alpha)):
            raise ValueError(
                f"`labels`: {n} {what}, and confidence_level={self.confidence_level} needs at least "
                f"{fewest_rows(alpha)} (n >= max(1/alpha, 1/(1 - alpha)), as MAPIE requires); lower the level or "
                "add calibration rows"
            )

    def _probabilities(self, predictions: Any) -> tuple[np.ndarray, tuple[int, ...]]:
        rows, shape = logits_rows(predictions, "predictions")
        rows = rows.astype(np.float64)
        if self.inputs == "logits":
            return softmax_rows(rows), shape
        finite = np.isfinite(rows).all(axis=1)
        off = ~finite | (rows < 0).any(axis=1) | (rows > 1).any(axis=1)
        off |= ~(np.abs(rows.sum(axis=1) - 1) <= SUM_TOLERANCE)
        if off.any():
            i = int(np.flatnonzero(off)[0])
            raise ValueError(
                f"`predictions` (inputs='probs') must be rows of probabilities in [0, 1] summing to 1 (within "
                f"{SUM_TOLERANCE:g}); row {i} sums to {rows[i].sum()!r} (min {rows[i].min()!r}); for logits pass "
                "inputs='logits'"
            )
        return rows, shape

    def _scores(self, p: np.ndarray, y: np.ndarray) -> np.ndarray:
        if self.score == "lac":
            return 1 - p[np.arange(len(y)), y]
        order, cumulative = _sorted_cumulative(p, None, 0.0)
        rank = np.argmax(order == y[:, None], axis=1)  # from 0
        scores = cumulative[np.arange(len(y)), rank]
        if self.score == "raps":
            scores = scores + np.maximum(self.lambda_reg * (rank + 1 - self.k_reg), 0)
        return scores

    # -- applying ----------------------------------------------------------------------------
    def predict_sets(self, predictions: Any) -> Any:
        """Return the prediction sets of new rows as a boolean mask over the classes.

        Parameters
        ----------
        predictions : array-like or torch.Tensor of shape (N, K) or (N, L, K)
            Logits or probabilities (as ``inputs`` says) with the fitted class count.

        Returns
        -------
        ndarray of bool, or torch.Tensor of bool, same shape as ``predictions``
            ``sets[..., j]`` is True when class ``j`` is in the row's set. A torch tensor in gives
            a torch tensor out, on the input's device (computed with numpy on the CPU).

        Raises
        ------
        ValueError
            When not fitted yet, on a class count other than the fitted one, or on bad input.
        """
        if not hasattr(self, "quantile_"):
            raise ValueError("this SplitConformal is not fitted yet: call fit(predictions, labels) first")
        p, shape = self._probabilities(predictions)
        if shape[-1] != self.num_classes_:
            raise ValueError(
                f"`predictions` has {shape[-1]} classes, the SplitConformal was fitted on {self.num_classes_}"
            )
        check_finite(p, "predictions")
        q = np.broadcast_to(self.quantile_, (self.num_classes_,))
        if self.score == "lac":
            sets = (1 - p) - q <= EPSILON
        else:
            k_reg = self.k_reg if self.score == "raps" else None
            order, sorted_cumulative = _sorted_cumulative(p, k_reg, self.lambda_reg or 0.0)
            cumulative = np.empty_like(sorted_cumulative)
            np.put_along_axis(cumulative, order, sorted_cumulative, axis=1)
            if self.conditional:  # one threshold per class: a pass per class, each over every row
                sets = np.empty(p.shape, dtype=bool)
                for j in range(self.num_classes_):
                    sets[:, j] = p[:, j] - _last_included_probability(p, cumulative, q[j]) >= -EPSILON
            else:
                sets = p - _last_included_probability(p, cumulative, float(q[0]))[:, None] >= -EPSILON
        sets = sets.reshape(shape)
        if hasattr(predictions, "detach") and hasattr(predictions, "device"):
            import torch

            return torch.from_numpy(sets).to(predictions.device)
        return sets


def _check_raps(score: str, k_reg: Any, lambda_reg: Any) -> tuple[int | None, float | None]:
    """Check RAPS's parameters: required (k_reg an integer >= 0, lambda_reg >= 0) with "raps", refused otherwise."""
    if score != "raps":
        for name, value in (("k_reg", k_reg), ("lambda_reg", lambda_reg)):
            if value is not None:
                raise ValueError(f"`{name}` applies to score='raps' only, got {name}={value!r} with score={score!r}")
        return None, None
    if k_reg is None or lambda_reg is None:
        missing = "k_reg" if k_reg is None else "lambda_reg"
        raise ValueError(
            f"`{missing}` is required with score='raps' (k_reg: the rank from which the penalty applies; lambda_reg: "
            "the penalty per rank). MAPIE 1.6 tunes them on a tenth of the calibration rows; here they are yours to "
            "choose, on rows other than the calibration rows"
        )
    if isinstance(k_reg, (bool, np.bool_)) or not isinstance(k_reg, (int, np.integer)) or k_reg < 0:
        raise ValueError(f"`k_reg` must be an integer >= 0, got {k_reg!r}")
    return int(k_reg), check_non_negative(lambda_reg, "lambda_reg")
