"""Calibrators beyond scaling: Dirichlet calibration (ODIR), beta calibration, Venn-Abers predictors.

Each is fitted on ``p = softmax(z)`` of the validation logits with no Python loop over samples:

- :class:`DirichletCalibration` (Kull et al. 2019): calibrated logits ``W log p + b``; the model,
  its parametrisation and its regularisation are those of ``dirichletcal``'s
  ``FullDirichletCalibrator`` (what ``probmetrics.calibrators.DirichletCalibrator`` runs).
- :class:`BetaCalibration` (Kull et al. 2017): ``sigmoid(a ln p - b ln(1 - p) + c)`` with
  ``a, b >= 0``, the constrained maximum-likelihood fit of ``netcal.scaling.BetaCalibration``.
- :class:`VennAbersCalibration` (Vovk & Petej 2014): the inductive Venn-Abers predictor, its two
  isotonic fits ``p0(s)``, ``p1(s)`` tabulated once at the calibration scores (``venn_abers``'
  ``VennAbers``; one-vs-rest and renormalised for more than two classes).

All three map probabilities, so none is affine in the logits: none folds into a classifier layer.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calibkit.calibrators._kernels import venn_abers_tables
from calibkit.calibrators.base import Calibrator, FitInput, check_finite, logits_rows
from calibkit.metrics.settings import DEFAULTS
from calibkit.metrics.validation import check_positive_int

_TINY = np.finfo(np.float64).tiny  # dirichletcal's floor of a probability before its log
_EPS = np.finfo(np.float64).eps  # betacal's and netcal's clip of p to [eps, 1 - eps]


def _log_softmax(z: np.ndarray) -> np.ndarray:
    shifted = z - z.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def _check_penalty(value: Any, name: str, optional: bool = False) -> float | None:
    if optional and value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"`{name}` must be a finite number >= 0{' or None' if optional else ''}, got {value!r}")
    if not math.isfinite(float(value)) or value < 0:
        raise ValueError(f"`{name}` must be a finite number >= 0{' or None' if optional else ''}, got {value!r}")
    return float(value)


def _newton(objective, theta: np.ndarray, max_iter: int) -> tuple[np.ndarray, int]:
    """Minimise a smooth convex function by Newton's method with a backtracking line search.

    ``objective(theta, derivatives)`` returns ``(value, gradient, hessian)``, the last two None
    when ``derivatives`` is False: the line search's trial points need the value only (forming
    the Hessian is what costs). A singular Hessian (an absent class, a feature that is constant)
    is solved in the least-squares sense.
    """
    value, grad, hess = objective(theta, True)
    for it in range(1, max_iter + 1):
        step = np.linalg.lstsq(hess, grad, rcond=None)[0]
        if not np.all(np.isfinite(step)):
            break
        decrement = float(grad @ step)
        t = 1.0
        while t > 1e-12:
            candidate = theta - t * step
            trial = objective(candidate, False)[0]
            if trial <= value - 1e-4 * t * decrement or (trial <= value and decrement < 1e-24):
                break
            t *= 0.5
        else:
            return theta, it  # no decrease left: at the optimum to rounding
        theta, (value, grad, hess) = candidate, objective(candidate, True)
        if decrement < 1e-26 or np.max(np.abs(t * step)) <= 1e-15 * max(1.0, float(np.max(np.abs(theta)))):
            return theta, it
    return theta, max_iter


class DirichletCalibration(Calibrator):
    """Dirichlet calibration (Kull et al. 2019): calibrated logits ``W log(softmax(z)) + b``.

    As ``dirichletcal``'s ``FullDirichletCalibrator`` (the code of the paper, wrapped by
    ``probmetrics.calibrators.DirichletCalibrator``): probabilities floored at the smallest
    positive float64 before the log; the last class is the reference (``W``'s last row and
    ``b``'s last entry are 0, which leaves the softmax unchanged); the fit minimises the mean
    negative log-likelihood plus, with ``reg_mu`` given (ODIR),
    ``reg_lambda * sum_{i != j} W_ij^2 + reg_mu * sum_i b_i^2``, and without it
    ``reg_lambda * (sum W_ij^2 + sum b_i^2)``. The default is ODIR at 1e-3 on both: unpenalised
    (``reg_lambda=0, reg_mu=None``, the reference's default) the fit diverges where a class is
    separable, as rare token classes are, and Newton runs to ``max_iter``.
    Newton's method from the identity map, to the optimum (up to ``K = 36``, as the reference;
    L-BFGS above). The map is affine in ``log softmax(z)``, not in ``z``: a head, not foldable.

    Parameters
    ----------
    reg_lambda : float, default 1e-3
        Weight of the L2 penalty on the off-diagonal weights (ODIR), or on all parameters.
    reg_mu : float or None, default 1e-3
        Weight of the L2 penalty on the intercepts (ODIR); None: ``reg_lambda`` on everything.
    max_iter : int, default 200
        Newton (or L-BFGS) iterations.
    ignore_index : int, default -100
        Label of the rows to skip when fitting (padding of token classification).

    Attributes
    ----------
    weight_ : ndarray of shape (K, K)
    bias_ : ndarray of shape (K,)
    n_iter_ : int

    References
    ----------
    Kull, M., Perello-Nieto, M., Kängsepp, M., Silva Filho, T., Song, H., Flach, P. Beyond
    temperature scaling: obtaining well-calibrated multi-class probabilities with Dirichlet
    calibration. NeurIPS 2019.
    """

    method = "dirichlet"

    def __init__(
        self,
        *,
        reg_lambda: float = 1e-3,
        reg_mu: float | None = 1e-3,
        max_iter: int = 200,
        ignore_index: int = DEFAULTS.ignore_index,
    ) -> None:
        super().__init__(ignore_index=ignore_index)
        self.reg_lambda = _check_penalty(reg_lambda, "reg_lambda")
        self.reg_mu = _check_penalty(reg_mu, "reg_mu", optional=True)
        self.max_iter = check_positive_int(max_iter, "max_iter")

    def _penalty(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Per-parameter penalty weights of the ``(K - 1, K + 1)`` free block ``[W | b]``."""
        lam, mu = _check_penalty(self.reg_lambda, "reg_lambda"), _check_penalty(self.reg_mu, "reg_mu", True)
        pen = np.full((k - 1, k + 1), lam)
        if mu is not None:
            pen[np.arange(k - 1), np.arange(k - 1)] = 0.0
            pen[:, -1] = mu
        return pen

    def _fit(self, data: FitInput) -> None:
        max_iter = check_positive_int(self.max_iter, "max_iter")
        z, y = data.kept()
        check_finite(z)
        k = data.num_classes
        x = np.hstack([np.maximum(_log_softmax(z.astype(np.float64)), math.log(_TINY)), np.ones((len(y), 1))])
        onehot = np.zeros((len(y), k))
        onehot[np.arange(len(y)), y] = 1.0
        pen = self._penalty(k)
        start = np.hstack([np.eye(k), np.zeros((k, 1))])
        start = (start - start[-1])[:-1].ravel()  # the identity map, in the reference row's gauge
        if k <= 36:
            theta, self.n_iter_ = _newton(lambda t, d: _dirichlet_objective(t, x, onehot, pen, d), start, max_iter)
        else:
            theta, self.n_iter_ = _lbfgs(x, y, pen, start, max_iter)
        full = np.vstack([theta.reshape(k - 1, k + 1), np.zeros((1, k + 1))])
        if not np.all(np.isfinite(full)):
            raise ValueError("`logits`: the Dirichlet calibration fit diverged (non-finite parameters)")
        self.weight_, self.bias_ = full[:, :-1].copy(), full[:, -1].copy()

    def calibration_block(self) -> dict[str, Any]:
        """Return the fitted parameters as the ``calibration`` block of a model's config.

        Returns
        -------
        dict
            ``{"method": "dirichlet", "weight": [[...]], "bias": [...]}``, JSON-able.

        Raises
        ------
        ValueError
            When the calibrator is not fitted yet.
        """
        self._check_fitted()
        return {"method": self.method, "weight": self.weight_.tolist(), "bias": self.bias_.tolist()}


def _dirichlet_objective(
    theta: np.ndarray, x: np.ndarray, onehot: np.ndarray, pen: np.ndarray, derivatives: bool = True
):
    """Mean NLL of ``softmax(x [W | b]^T)`` plus the penalty, its gradient and Hessian (free rows only)."""
    n, m = x.shape
    k = onehot.shape[1]
    w = theta.reshape(k - 1, m)
    logits = np.hstack([x @ w.T, np.zeros((n, 1))])
    logp = _log_softmax(logits)
    value = -float(np.sum(logp * onehot)) / n + float(np.sum(pen * w * w))
    if not derivatives:
        return value, None, None
    p = np.exp(logp[:, :-1])
    grad = ((p - onehot[:, :-1]).T @ x) / n + 2 * pen * w
    # Hessian of the multinomial NLL: E[(diag(p) - p p^T) kron x x^T] over the K - 1 free rows.
    outer = (p[:, :, None] * x[:, None, :]).reshape(n, -1)
    hess = -(outer.T @ outer) / n
    diag = np.matmul(outer.reshape(n, k - 1, m).transpose(1, 2, 0), x) / n  # sum_n p_ni x_na x_nb, by BLAS
    size = m * (k - 1)
    blocks = hess.reshape(k - 1, m, k - 1, m)
    blocks[np.arange(k - 1), :, np.arange(k - 1), :] += diag
    hess = blocks.reshape(size, size) + np.diag(2 * pen.ravel())
    return value, grad.ravel(), hess


def _lbfgs(x: np.ndarray, y: np.ndarray, pen: np.ndarray, start: np.ndarray, max_iter: int) -> tuple[np.ndarray, int]:
    """Minimise the Dirichlet objective by torch's L-BFGS (many classes: a Hessian too large to form)."""
    import torch

    k = pen.shape[0] + 1
    xt, yt, pt = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64)), torch.from_numpy(pen)
    w = torch.tensor(start.reshape(k - 1, -1), dtype=torch.float64, requires_grad=True)
    optimiser = torch.optim.LBFGS(
        [w],
        max_iter=max_iter,
        tolerance_grad=1e-12,
        tolerance_change=1e-16,
        history_size=20,
        line_search_fn="strong_wolfe",
    )

    def closure():
        optimiser.zero_grad()
        logits = torch.cat([xt @ w.T, torch.zeros(len(yt), 1, dtype=torch.float64)], dim=1)
        loss = torch.nn.functional.cross_entropy(logits, yt) + (pt * w * w).sum()
        loss.backward()
        return loss

    optimiser.step(closure)
    return w.detach().numpy().ravel(), int(optimiser.state[w].get("n_iter", 0))


def _beta_features(logp: np.ndarray) -> np.ndarray:
    """``[ln p, -ln(1 - p)]`` with ``p`` clipped to ``[eps, 1 - eps]`` (betacal, netcal), from ``ln p``."""
    p = np.clip(np.exp(logp), _EPS, 1 - _EPS)
    return np.stack([np.log(p), -np.log1p(-p)], axis=-1)


def _logistic_objective(theta: np.ndarray, x: np.ndarray, y: np.ndarray, derivatives: bool = True):
    """Mean binary NLL of ``sigmoid(x theta[:-1] + theta[-1])``, its gradient and Hessian."""
    xs = np.hstack([x, np.ones((len(y), 1))])
    t = xs @ theta
    value = float(np.mean(np.logaddexp(0.0, t) - y * t))
    if not derivatives:
        return value, None, None
    q = 0.5 * (1 + np.tanh(0.5 * t))  # sigmoid, without overflow
    grad = xs.T @ (q - y) / len(y)
    hess = (xs * (q * (1 - q))[:, None]).T @ xs / len(y)
    return value, grad, hess


def fit_beta(x: np.ndarray, y: np.ndarray, max_iter: int = 100) -> tuple[float, float, float]:
    """Fit beta calibration's ``(a, b, c)`` by maximum likelihood under ``a, b >= 0``.

    The constrained optimum is the best feasible optimum of the four faces of the orthant
    (``a, b`` free; ``a = 0``; ``b = 0``; both 0): the problem is convex, so the optimum lies in
    the relative interior of one face, where it is that face's unconstrained optimum; the free
    face is fitted first, and when its optimum is feasible the others are not fitted.

    Parameters
    ----------
    x : ndarray of shape (n, 2)
        ``[ln p, -ln(1 - p)]``.
    y : ndarray of shape (n,)
        0/1 outcomes (float64).
    max_iter : int, default 100
        Newton iterations per face.

    Returns
    -------
    tuple of float
        ``(a, b, c)``.
    """
    best, best_value = (0.0, 0.0, 0.0), math.inf
    for free in ((0, 1), (0,), (1,), ()):
        theta, _ = _newton(lambda t, d, f=free: _logistic_objective(t, x[:, f], y, d), np.ones(len(free) + 1), max_iter)
        ab = np.zeros(2)
        ab[list(free)] = theta[:-1]
        value = _logistic_objective(theta, x[:, free], y)[0]
        if np.all(ab >= 0) and np.all(np.isfinite(theta)) and value < best_value - 1e-15:
            best, best_value = (float(ab[0]), float(ab[1]), float(theta[-1])), value
            if len(free) == 2:  # the unconstrained optimum is feasible: convex, so it is the optimum
                return best
    return best


class BetaCalibration(Calibrator):
    """Beta calibration (Kull et al. 2017): ``sigmoid(a ln p - b ln(1 - p) + c)`` with ``a, b >= 0``.

    Two classes: ``p = softmax(z)_1``, the map gives the probability of class 1 (the model of
    ``netcal.scaling.BetaCalibration`` and of ``betacal``'s three-parameter fit); ``p`` is clipped
    to ``[eps, 1 - eps]`` as both do. The fit is the constrained maximum-likelihood optimum
    (Newton on each face of ``a, b >= 0``, exact to rounding), which ``netcal``'s bounded L-BFGS-B
    reaches and ``betacal``'s refit without a negative coefficient approximates.

    More than two classes: one-vs-rest, one beta map of each ``p_k`` onto ``1[y = k]``, the rows
    renormalised (as ``probmetrics``' ``MulticlassOneVsRestCalibrator`` of ``BetacalCalibrator``;
    ``netcal``'s multinomial variant is not this). It may change the argmax.

    Parameters
    ----------
    max_iter : int, default 100
        Newton iterations per face of the constraint.
    ignore_index : int, default -100
        Label of the rows to skip when fitting (padding of token classification).

    Attributes
    ----------
    a_, b_, c_ : ndarray of shape (1,) for two classes, (K,) otherwise
        The maps' parameters (class 1's map for two classes).

    References
    ----------
    Kull, M., Silva Filho, T., Flach, P. Beta calibration: a well-founded and easily implemented
    improvement on logistic calibration for binary classifiers. AISTATS 2017.
    """

    method = "beta"

    def __init__(self, *, max_iter: int = 100, ignore_index: int = DEFAULTS.ignore_index) -> None:
        super().__init__(ignore_index=ignore_index)
        self.max_iter = check_positive_int(max_iter, "max_iter")

    def _fit(self, data: FitInput) -> None:
        max_iter = check_positive_int(self.max_iter, "max_iter")
        z, y = data.kept()
        check_finite(z)
        features = _beta_features(_log_softmax(z.astype(np.float64)))
        classes = [1] if data.num_classes == 2 else range(data.num_classes)
        fits = [fit_beta(features[:, k], (y == k).astype(np.float64), max_iter) for k in classes]
        self.a_, self.b_, self.c_ = (np.array(v) for v in zip(*fits))

    def calibration_block(self) -> dict[str, Any]:
        """Return the fitted parameters as the ``calibration`` block of a model's config.

        Returns
        -------
        dict
            ``{"method": "beta", "a": [...], "b": [...], "c": [...]}``, JSON-able.

        Raises
        ------
        ValueError
            When the calibrator is not fitted yet.
        """
        self._check_fitted()
        return {"method": self.method, "a": self.a_.tolist(), "b": self.b_.tolist(), "c": self.c_.tolist()}


def head_probabilities(z: np.ndarray) -> np.ndarray:
    """Return ``softmax(z)`` in float64 as the head computes it (torch), to the last bit.

    A test score equal to a calibration score must be found equal: numpy's and torch's softmax
    may differ in the last bit, which would move a score to the next slot of the tables.

    Parameters
    ----------
    z : ndarray of shape (N, K)
        Logits.

    Returns
    -------
    ndarray of shape (N, K)
        float64 probabilities.
    """
    import torch

    return torch.softmax(torch.from_numpy(z).double(), dim=-1).numpy()


class VennAbersCalibration(Calibrator):
    """Inductive Venn-Abers predictor (Vovk & Petej 2014) on ``softmax(z)``; one-vs-rest beyond two classes.

    Two classes: the score is ``s = softmax(z)_1``. For a test score ``s``, ``p0(s)`` (``p1(s)``)
    is the isotonic fit at ``s`` of the calibration scores and labels with ``(s, 0)`` (``(s, 1)``)
    added; the calibrated probability of class 1 is ``p1 / (1 - p0 + p1)`` and ``[p0, p1]`` is
    the multiprobability interval (:meth:`predict_interval`). Both are step functions of ``s``,
    tabulated once at the ``m`` distinct calibration scores (``venn_abers_tables``: two pool
    adjacent violators passes, then each slot pools the test point with the blocks around it;
    O(n log n) for the sort, then O(m + merges)), and looked up with a binary search: ``p0`` at
    the number of calibration scores ``<= s``, ``p1`` at the number ``< s`` (a test score equal
    to a calibration score joins its tie), as ``venn_abers``' ``VennAbers``.

    More than two classes: one map per class ``k`` of ``s = softmax(z)_k`` onto ``1[y = k]``,
    the merged probabilities renormalised (``venn_abers``' ``one_vs_rest``). It may change the
    argmax. The head stores every distinct calibration score of every class map.

    Parameters
    ----------
    ignore_index : int, default -100
        Label of the rows to skip when fitting (padding of token classification).

    Attributes
    ----------
    scores_ : list of ndarray
        The sorted distinct calibration scores of each map (one map for two classes, else K).
    p0_, p1_ : list of ndarray
        Each map's tables, one entry more than its scores.

    References
    ----------
    Vovk, V., Petej, I. Venn-Abers predictors. UAI 2014. Vovk, V., Petej, I., Fedorova, V.
    Large-scale probabilistic predictors with and without guarantees of validity. NeurIPS 2015.
    """

    method = "venn-abers"
    logit_based = False

    def _fit(self, data: FitInput) -> None:
        z, y = data.kept()
        check_finite(z)
        probs = head_probabilities(z)
        self.scores_, self.p0_, self.p1_ = [], [], []
        for k in [1] if data.num_classes == 2 else range(data.num_classes):  # classes; no loop over samples
            scores, inverse = np.unique(probs[:, k], return_inverse=True)
            weight = np.bincount(inverse, minlength=scores.size).astype(np.float64)
            positives = np.bincount(inverse, weights=(y == k).astype(np.float64), minlength=scores.size)
            p0, p1 = venn_abers_tables(weight, positives)
            self.scores_.append(scores)
            self.p0_.append(p0)
            self.p1_.append(p1)

    def predict_interval(self, logits: Any) -> tuple[np.ndarray, np.ndarray]:
        """Return the Venn-Abers interval ``(p0, p1)`` of every class, before merging.

        Parameters
        ----------
        logits : array-like or torch.Tensor of shape (N, K) or (N, L, K)
            Uncalibrated logits, with the class count the calibrator was fitted on.

        Returns
        -------
        p0, p1 : ndarray
            Same shape as ``logits``: the lower and upper probability of each class (two classes:
            class 1's interval and class 0's ``(1 - p1, 1 - p0)``; more: each one-vs-rest map's).

        Raises
        ------
        ValueError
            When the calibrator is not fitted yet, or on logits of another class count.
        """
        self._check_fitted()
        z, shape = logits_rows(logits)
        if shape[-1] != self.num_classes_:
            raise ValueError(f"`logits` has {shape[-1]} classes, the calibrator was fitted on {self.num_classes_}")
        probs = head_probabilities(z)
        cols = [1] if self.num_classes_ == 2 else range(self.num_classes_)
        low, high = np.empty_like(probs), np.empty_like(probs)
        for i, k in enumerate(cols):
            s = probs[:, k]
            low[:, k] = self.p0_[i][np.searchsorted(self.scores_[i], s, side="right")]
            high[:, k] = self.p1_[i][np.searchsorted(self.scores_[i], s, side="left")]
        if self.num_classes_ == 2:
            low[:, 0], high[:, 0] = 1 - high[:, 1], 1 - low[:, 1]
        return low.reshape(shape), high.reshape(shape)

    def calibration_block(self) -> dict[str, Any]:
        """Return the fitted tables as the ``calibration`` block of a model's config.

        Returns
        -------
        dict
            ``{"method": "venn-abers", "scores": [[...]], "p0": [[...]], "p1": [[...]]}``,
            JSON-able (one list per map).

        Raises
        ------
        ValueError
            When the calibrator is not fitted yet.
        """
        self._check_fitted()
        return {
            "method": self.method,
            "scores": [s.tolist() for s in self.scores_],
            "p0": [t.tolist() for t in self.p0_],
            "p1": [t.tolist() for t in self.p1_],
        }
