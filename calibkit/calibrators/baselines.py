"""Baseline calibrators the papers compare against: vector/matrix scaling, isotonic regression, histogram binning.

Guo et al. 2017 (vector and matrix scaling); Zadrozny & Elkan 2001, 2002 (histogram binning,
isotonic regression).

Vector/matrix scaling are affine maps of the logits fitted by NLL (full-batch L-BFGS with a
strong-Wolfe line search, in torch). Isotonic regression and histogram binning calibrate each
class's probability one-vs-rest and renormalise the rows; they may change the argmax.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calibkit.calibrators.base import Calibrator, FitInput, check_finite, softmax_rows
from calibkit.metrics.formulas import isotonic_points
from calibkit.metrics.settings import DEFAULTS
from calibkit.metrics.validation import check_bins, check_positive_int


def _unit_scale(z: np.ndarray) -> float:
    """Return a power of two ``s`` with ``max |z / s|`` in [4, 8), or 1 for logits of ordinary size.

    L-BFGS started at the identity stalls or overflows on logits far from unit scale (matrix
    scaling stopped at a uniform map at 1e8, vector scaling at NaN parameters at 1e100). VS and
    MS are equivariant to rescaling the logits, so they are fitted on ``z / s`` (exact: a power
    of two) and the scale or weight is divided by ``s`` afterwards.
    """
    top = float(np.max(np.abs(z))) if z.size else 0.0
    if top == 0.0 or 2.0**-6 <= top <= 2.0**8:
        return 1.0
    return math.ldexp(1.0, math.frexp(top)[1] - 3)


class _AffineScaling(Calibrator):
    affine = True

    def __init__(self, *, max_iter: int = 500, ignore_index: int = DEFAULTS.ignore_index) -> None:
        super().__init__(ignore_index=ignore_index)
        self.max_iter = check_positive_int(max_iter, "max_iter")

    def _initial(self, k: int):  # pragma: no cover - abstract
        raise NotImplementedError

    def _logits(self, params, z):  # pragma: no cover - abstract
        raise NotImplementedError

    def _fit(self, data: FitInput) -> None:
        import torch

        max_iter = check_positive_int(self.max_iter, "max_iter")
        z_np, y_np = data.kept()
        check_finite(z_np)
        unit = _unit_scale(z_np)
        z = torch.from_numpy(z_np.astype(np.float64, copy=False) / unit)
        y = torch.from_numpy(y_np.astype(np.int64, copy=False))
        params = [torch.tensor(p, dtype=torch.float64, requires_grad=True) for p in self._initial(data.num_classes)]
        optimiser = torch.optim.LBFGS(
            params,
            lr=1.0,
            max_iter=max_iter,
            tolerance_grad=1e-10,
            tolerance_change=1e-14,
            history_size=20,
            line_search_fn="strong_wolfe",
        )

        def closure():
            optimiser.zero_grad()
            loss = torch.nn.functional.cross_entropy(self._logits(params, z), y)
            loss.backward()
            return loss

        optimiser.step(closure)
        fitted = [p.detach().numpy().copy() for p in params]
        fitted[0] = fitted[0] / unit  # back to the user's logits: the scale or weight multiplies z
        if not all(np.isfinite(p).all() for p in fitted):
            raise ValueError(
                f"`logits`: the {type(self).__name__} fit diverged (non-finite parameters; largest |logit| "
                f"{float(np.max(np.abs(z_np))):.3g}); check the logits' scale"
            )
        self._store(fitted)
        self.n_iter_ = int(optimiser.state[optimiser._params[0]].get("n_iter", 0))


class VectorScaling(_AffineScaling):
    """Vector scaling (Guo et al. 2017): calibrated logits ``v * z + b`` (per-class scale and bias), NLL fit.

    Parameters
    ----------
    max_iter : int, default 500
        Iterations of L-BFGS.
    ignore_index : int, default -100
        Label of the rows to skip when fitting (padding of token classification).

    Attributes
    ----------
    scale_, bias_ : ndarray of shape (K,)
    n_iter_ : int
        L-BFGS iterations the fit took.
    """

    method = "vs"

    def _initial(self, k: int):
        return [np.ones(k), np.zeros(k)]

    def _logits(self, params, z):
        return z * params[0] + params[1]

    def _store(self, params) -> None:
        self.scale_, self.bias_ = params

    def calibration_block(self) -> dict[str, Any]:
        """Return the fitted parameters as the ``calibration`` block of a model's config.

        Returns
        -------
        dict
            ``{"method": ..., "scale": [...], "bias": [...]}``, JSON-able: what
            :class:`CalibrationHead` is built from.

        Raises
        ------
        ValueError
            When the calibrator is not fitted yet.
        """
        self._check_fitted()
        return {"method": self.method, "scale": self.scale_.tolist(), "bias": self.bias_.tolist()}


class MatrixScaling(_AffineScaling):
    """Matrix scaling (Guo et al. 2017): calibrated logits ``W z + b``, NLL fit (K^2 + K parameters).

    Parameters
    ----------
    max_iter : int, default 500
        Iterations of L-BFGS.
    ignore_index : int, default -100
        Label of the rows to skip when fitting (padding of token classification).

    Attributes
    ----------
    weight_ : ndarray of shape (K, K)
    bias_ : ndarray of shape (K,)
    n_iter_ : int
        L-BFGS iterations the fit took.
    """

    method = "ms"

    def _initial(self, k: int):
        return [np.eye(k), np.zeros(k)]

    def _logits(self, params, z):
        return z @ params[0].T + params[1]

    def _store(self, params) -> None:
        self.weight_, self.bias_ = params

    def calibration_block(self) -> dict[str, Any]:
        """Return the fitted parameters as the ``calibration`` block of a model's config.

        Returns
        -------
        dict
            ``{"method": ..., "weight": [[...]], "bias": [...]}``, JSON-able: what
            :class:`CalibrationHead` is built from.

        Raises
        ------
        ValueError
            When the calibrator is not fitted yet.
        """
        self._check_fitted()
        return {"method": self.method, "weight": self.weight_.tolist(), "bias": self.bias_.tolist()}


class IsotonicCalibration(Calibrator):
    """One-vs-rest isotonic regression on ``softmax(z)``, rows renormalised (Zadrozny & Elkan 2002).

    Per class k, a non-decreasing map of ``p_k`` onto the outcome ``1[y = k]`` (pool adjacent
    violators over the distinct values of ``p_k``; equal values share one fitted value), applied
    by linear interpolation between block ends and clipped outside the fitted range, as
    scikit-learn's ``IsotonicRegression(out_of_bounds="clip")``.

    Parameters
    ----------
    ignore_index : int, default -100
        Label of the rows to skip when fitting (padding of token classification).

    Attributes
    ----------
    thresholds_, values_ : list of K ndarrays
        The interpolation points of each class's map.
    """

    method = "ir"
    logit_based = False

    def _fit(self, data: FitInput) -> None:
        z, y = data.kept()
        check_finite(z)
        probs = softmax_rows(z.astype(np.float64))
        self.thresholds_, self.values_ = [], []
        for k in range(data.num_classes):  # a loop over classes; every step inside is vectorised
            xs, vs = isotonic_points(probs[:, k], (y == k).astype(np.float64))
            self.thresholds_.append(xs)
            self.values_.append(vs)

    def calibration_block(self) -> dict[str, Any]:
        """Return the fitted parameters as the ``calibration`` block of a model's config.

        Returns
        -------
        dict
            ``{"method": ..., "thresholds": [[...]], "values": [[...]]}``, JSON-able: what
            :class:`CalibrationHead` is built from.

        Raises
        ------
        ValueError
            When the calibrator is not fitted yet.
        """
        self._check_fitted()
        return {
            "method": self.method,
            "thresholds": [t.tolist() for t in self.thresholds_],
            "values": [v.tolist() for v in self.values_],
        }


class HistogramBinning(Calibrator):
    """One-vs-rest histogram binning on ``softmax(z)``, rows renormalised (Zadrozny & Elkan 2001).

    Per class k, ``n_bins`` equal-width bins of ``p_k`` (right-closed, as the metrics' bins);
    each bin maps to the fraction of its samples with ``y = k``; an empty bin maps to its centre.

    Parameters
    ----------
    n_bins : int, default 15
        Equal-width bins per class.
    ignore_index : int, default -100
        Label of the rows to skip when fitting (padding of token classification).

    Attributes
    ----------
    values_ : ndarray of shape (K, n_bins)
    """

    method = "hb"
    logit_based = False

    def __init__(self, *, n_bins: int = DEFAULTS.n_bins, ignore_index: int = DEFAULTS.ignore_index) -> None:
        super().__init__(ignore_index=ignore_index)
        self.n_bins = check_bins(n_bins, "n_bins")

    def _fit(self, data: FitInput) -> None:
        n_bins = check_bins(self.n_bins, "n_bins")
        z, y = data.kept()
        check_finite(z)
        probs = softmax_rows(z.astype(np.float64))
        k = data.num_classes
        index = np.clip(np.ceil(probs * n_bins).astype(np.int64) - 1, 0, n_bins - 1)
        flat = (np.arange(k) * n_bins + index).ravel()
        outcome = (y[:, None] == np.arange(k)).ravel().astype(np.float64)
        counts = np.bincount(flat, minlength=k * n_bins).reshape(k, n_bins)
        positives = np.bincount(flat, weights=outcome, minlength=k * n_bins).reshape(k, n_bins)
        centres = np.broadcast_to((np.arange(n_bins) + 0.5) / n_bins, (k, n_bins))
        self.values_ = np.where(counts > 0, positives / np.maximum(counts, 1), centres)

    def calibration_block(self) -> dict[str, Any]:
        """Return the fitted parameters as the ``calibration`` block of a model's config.

        Returns
        -------
        dict
            ``{"method": ..., "values": [[...]]}``, JSON-able: what
            :class:`CalibrationHead` is built from.

        Raises
        ------
        ValueError
            When the calibrator is not fitted yet.
        """
        self._check_fitted()
        return {"method": self.method, "values": self.values_.tolist()}
