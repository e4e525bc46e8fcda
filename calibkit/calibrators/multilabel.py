"""Calibrators for multi-label heads (a sigmoid per label): temperature and Platt scaling, isotonic regression.

Each label's probability is ``sigmoid(a_k z_ik + b_k)`` of its logit ``z_ik``:

- ``method="temperature"``: one temperature for every label, ``a_k = 1/T``, ``b_k = 0``;
- ``method="label_temperature"``: a temperature per label, ``a_k = 1/T_k``, ``b_k = 0``;
- ``method="platt"``: Platt scaling per label, ``a_k`` and ``b_k`` free (Platt 1999);
- ``method="weighted_temperature"``: one temperature, each label's decisions weighted as WTS
  weights a binary problem (SPEC.md): a decision of class ``c`` (present or absent) of label ``k``
  by ``1 - n_kc / N_k``, so that a rare label's positives count as much as its many negatives.

The parameters minimise the binary cross-entropy of the multi-hot labels (``ignore_index``
entries skipped), which is convex in ``(a, b)``: Newton's method, all labels at once (a 2 x 2
system per label), with step halving, to a gradient below 1e-10, so the optimum is exact to
far below 1e-6. A scale ``a <= 0`` (a temperature that would reverse the ranking) is refused.

:class:`MultiLabelIsotonic` is the baseline: isotonic regression of each label's
``sigmoid(z_ik)`` onto its 0/1 labels (Zadrozny & Elkan 2002), not affine in the logits.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from calibkit.metrics.settings import DEFAULTS
from calibkit.metrics.validation import check_choice, check_ignore_index, to_numpy

MULTILABEL_METHODS = ("temperature", "label_temperature", "platt", "weighted_temperature")
"""The multi-label calibrators (see the module docstring)."""


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def _loss(a: np.ndarray, b: np.ndarray, z: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Per-label summed BCE of ``sigmoid(a z + b)`` (w: 1 for a counted entry, 0 for ignored)."""
    s = a * z + b
    return -(w * (y * _log_sigmoid(s) + (1 - y) * _log_sigmoid(-s))).sum(axis=0)


def fit_arrays(logits: Any, labels: Any, ignore_index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Check multi-label fitting data; return float64 logits, 0/1 labels (0 where ignored) and the counted mask.

    Parameters
    ----------
    logits : array-like of shape (N, K)
    labels : array-like of shape (N, K)
        1, 0 or ``ignore_index``.
    ignore_index : int

    Returns
    -------
    z, y, w : ndarray of float64, shape (N, K)

    Raises
    ------
    ValueError
        Naming the argument: not numbers, shapes that differ, NaN or inf, a label that is not 0,
        1 or ``ignore_index``, or nothing to fit on.
    """
    z, y = to_numpy(logits, "logits"), to_numpy(labels, "labels")
    for name, array in (("logits", z), ("labels", y)):
        if array.dtype.kind not in "biuf":  # strings, objects: named, not numpy's conversion error
            raise ValueError(f"`{name}` must hold numbers, got dtype {array.dtype}")
    z, y = z.astype(np.float64, copy=False), y.astype(np.float64, copy=False)
    if z.ndim != 2 or y.shape != z.shape:
        raise ValueError(
            f"`logits` (N, K) and multi-hot `labels` of the same shape are needed, got {z.shape}, {y.shape}"
        )
    if not np.isfinite(z).all():
        row, column = (int(v) for v in np.argwhere(~np.isfinite(z))[0])
        raise ValueError(f"`logits` contains NaN or inf at position ({row}, {column})")
    w = (y != ignore_index).astype(np.float64)
    if not np.isin(y[w > 0], (0.0, 1.0)).all():
        raise ValueError(f"`labels` must be multi-hot (0 or 1, or ignore_index={ignore_index})")
    if w.sum() == 0:
        raise ValueError("`labels` holds no entry to fit on (every entry is ignore_index)")
    return z, np.where(w > 0, y, 0.0), w


class MultiLabelScaling:
    """Fit temperature or Platt scaling to multi-label logits, exactly (Newton's method).

    Parameters
    ----------
    method : {"temperature", "label_temperature", "platt", "weighted_temperature"}, default "temperature"
        One temperature for all labels, one per label, Platt scaling per label, or one
        temperature fitted with WTS's class weights per label.
    ignore_index : int, default -100
        Label entries to skip.

    Attributes
    ----------
    scale_ : ndarray of shape (K,)
        ``a_k`` (``1 / T`` for the temperature methods).
    bias_ : ndarray of shape (K,)
        ``b_k`` (0 for the temperature methods).
    num_classes_ : int
        ``K``, the labels.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(4000, 3)) * 3
    >>> y = (rng.random((4000, 3)) < 1 / (1 + np.exp(-z / 3))).astype(float)  # calibrated at T = 3
    >>> round(float(1 / MultiLabelScaling().fit(z, y).scale_[0]), 2)
    2.94
    """

    def __init__(self, method: str = "temperature", *, ignore_index: int = DEFAULTS.ignore_index) -> None:
        self.method = check_choice(method, "method", MULTILABEL_METHODS)
        self.ignore_index = check_ignore_index(ignore_index)

    def fit(self, logits: Any, labels: Any) -> MultiLabelScaling:
        """Fit the parameters on multi-label logits and their multi-hot labels.

        Parameters
        ----------
        logits : array-like of shape (N, K)
        labels : array-like of shape (N, K)
            1, 0 or ``ignore_index``.

        Returns
        -------
        MultiLabelScaling
            ``self``, fitted.

        Raises
        ------
        ValueError
            On bad input, or when the fitted scale is not positive (the logits rank the labels
            backwards): naming the label.
        """
        z, y, w = fit_arrays(logits, labels, self.ignore_index)
        k = z.shape[1]
        if self.method in ("label_temperature", "platt"):  # a scale per label needs both outcomes of it
            positives, counted = (w * y).sum(axis=0), w.sum(axis=0)
            one_sided = (positives == 0) | (positives == counted)
            if one_sided.all():
                raise ValueError(
                    "`labels`: every label has one outcome only (always present or always absent) among its entries; "
                    f"method={self.method!r} cannot fit a scale per label (method='temperature' can)"
                )
            if one_sided.any():
                warnings.warn(
                    f"labels {np.flatnonzero(one_sided).tolist()} have one outcome only among their entries: their "
                    "scale is left at 1 and their bias at 0 (no change)",
                    RuntimeWarning,
                    stacklevel=2,
                )
                w = w * ~one_sided  # left out of the fit: Newton's step is 0 there
        if self.method == "weighted_temperature":  # WTS per label: 1 - n_kc / N_k for a decision of class c
            counted = w.sum(axis=0)
            share = (w * y).sum(axis=0) / np.maximum(counted, 1.0)  # the positives' share of each label
            w = w * np.where(y == 1, 1.0 - share, share)
            if w.sum() == 0:
                raise ValueError("`labels`: no label has both present and absent entries, so WTS weighs nothing")
        a, b = np.ones(k), np.zeros(k)
        shared, free_bias = self.method in ("temperature", "weighted_temperature"), self.method == "platt"
        for _ in range(200):
            s = a * z + b
            p = np.exp(_log_sigmoid(s))
            r = w * (p - y)  # d loss / d s
            h = w * p * (1 - p)  # d2 loss / d s2
            ga, gb = (r * z).sum(0), r.sum(0)
            haa, hab, hbb = (h * z * z).sum(0), (h * z).sum(0), h.sum(0)
            if shared:
                step_a = np.full(k, ga.sum() / max(haa.sum(), 1e-300))
                step_b = np.zeros(k)
                gradient = abs(ga.sum())
            elif free_bias:
                det = haa * hbb - hab * hab
                ok = det > 1e-300
                step_a = np.where(ok, (hbb * ga - hab * gb) / np.where(ok, det, 1.0), ga / np.maximum(haa, 1e-300))
                step_b = np.where(ok, (haa * gb - hab * ga) / np.where(ok, det, 1.0), 0.0)
                gradient = float(np.max(np.abs(ga) + np.abs(gb)))
            else:
                step_a, step_b = ga / np.maximum(haa, 1e-300), np.zeros(k)
                gradient = float(np.max(np.abs(ga)))
            if gradient < 1e-10 * max(1.0, w.sum()):
                break
            before = _loss(a, b, z, y, w)
            slack = 1e-12 * (np.abs(before) + 1.0)  # summation noise: a loss equal to rounding is no rise
            t = np.ones(k)
            for _ in range(60):  # halve each label's step until its loss does not rise
                trial_a, trial_b = a - t * step_a, b - t * step_b
                after = _loss(trial_a, trial_b, z, y, w)
                worse = (after.sum() > (before + slack).sum()) if shared else (after > before + slack)
                if not np.any(worse):
                    break
                t = np.where(worse, t / 2, t)
            moved = float(np.max(np.abs(trial_a - a) + np.abs(trial_b - b)))
            a, b = trial_a, trial_b
            if moved < 1e-14 * (1.0 + float(np.max(np.abs(a) + np.abs(b)))):
                break  # at the optimum to rounding: Newton's steps no longer move it
        if np.any(a <= 0):
            label = int(np.flatnonzero(a <= 0)[0])
            raise ValueError(
                f"cannot fit a positive scale for label {label}: its logits rank the labels backwards "
                f"(fitted a = {a[label]:.4g})"
            )
        self.scale_, self.bias_, self.num_classes_ = a, b, k
        return self

    def calibration_block(self) -> dict[str, Any]:
        """Return the parameters as a calibrated model's ``calibration`` block (JSON-ready).

        Returns
        -------
        dict
            ``{"method": "multilabel", "mode": method, "scale": [...], "bias": [...]}``.
        """
        if not hasattr(self, "scale_"):
            raise ValueError("call fit() before calibration_block()")
        return {"method": "multilabel", "mode": self.method, "scale": self.scale_.tolist(), "bias": self.bias_.tolist()}

    def predict_proba(self, logits: Any) -> np.ndarray:
        """Return the calibrated probability of each label, ``sigmoid(a_k z_ik + b_k)``.

        Parameters
        ----------
        logits : array-like of shape (N, K)

        Returns
        -------
        ndarray of shape (N, K)
        """
        z = np.asarray(to_numpy(logits, "logits"), dtype=np.float64)
        if not hasattr(self, "scale_"):
            raise ValueError("call fit() before predict_proba()")
        if z.ndim != 2 or z.shape[1] != self.scale_.size:
            raise ValueError(f"`logits` must have shape (N, {self.scale_.size}), got {z.shape}")
        return np.exp(_log_sigmoid(self.scale_ * z + self.bias_))


class MultiLabelIsotonic:
    """Isotonic regression per label of ``sigmoid(z_ik)`` onto its 0/1 labels (the baseline; Zadrozny & Elkan 2002).

    Pool adjacent violators over each label's distinct probabilities; applied by linear
    interpolation between the block ends, clipped outside the fitted range, as scikit-learn's
    ``IsotonicRegression(out_of_bounds="clip")``. Not affine: a calibrated model keeps it in its
    head (it cannot be folded into the classifier).

    Parameters
    ----------
    ignore_index : int, default -100
        Label entries to skip.

    Attributes
    ----------
    thresholds_, values_ : list of K ndarrays
        Each label's interpolation points.
    num_classes_ : int
        ``K``, the labels.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(2000, 2)) * 3
    >>> y = (rng.random((2000, 2)) < 1 / (1 + np.exp(-z / 3))).astype(float)
    >>> p = MultiLabelIsotonic().fit(z, y).predict_proba(z)
    >>> bool(np.all(np.diff(p[np.argsort(z[:, 0]), 0]) >= 0))
    True
    """

    method = "isotonic"

    def __init__(self, *, ignore_index: int = DEFAULTS.ignore_index) -> None:
        self.ignore_index = check_ignore_index(ignore_index)

    def fit(self, logits: Any, labels: Any) -> MultiLabelIsotonic:
        """Fit each label's isotonic map.

        Parameters
        ----------
        logits : array-like of shape (N, K)
        labels : array-like of shape (N, K)
            1, 0 or ``ignore_index``.

        Returns
        -------
        MultiLabelIsotonic
            ``self``, fitted.

        Raises
        ------
        ValueError
            On bad input, or a label with no entry to fit on (named).
        """
        from calibkit.metrics.formulas import isotonic_points

        z, y, w = fit_arrays(logits, labels, self.ignore_index)
        p = np.exp(_log_sigmoid(z))
        self.thresholds_, self.values_ = [], []
        for k in range(z.shape[1]):  # a loop over labels; each fit is vectorised
            kept = w[:, k] > 0
            if not kept.any():
                raise ValueError(f"`labels`: label {k} has no entry to fit on (every entry is ignore_index)")
            xs, vs = isotonic_points(p[kept, k], y[kept, k])
            self.thresholds_.append(xs)
            self.values_.append(vs)
        self.num_classes_ = z.shape[1]
        return self

    def predict_proba(self, logits: Any) -> np.ndarray:
        """Return each label's calibrated probability.

        Parameters
        ----------
        logits : array-like of shape (N, K)

        Returns
        -------
        ndarray of shape (N, K)
        """
        if not hasattr(self, "thresholds_"):
            raise ValueError("call fit() before predict_proba()")
        z = np.asarray(to_numpy(logits, "logits"), dtype=np.float64)
        if z.ndim != 2 or z.shape[1] != self.num_classes_:
            raise ValueError(f"`logits` must have shape (N, {self.num_classes_}), got {z.shape}")
        p = np.exp(_log_sigmoid(z))
        return np.stack([np.interp(p[:, k], x, v) for k, (x, v) in enumerate(zip(self.thresholds_, self.values_))], 1)

    def calibration_block(self) -> dict[str, Any]:
        """Return the parameters as a calibrated model's ``calibration`` block (JSON-ready).

        Returns
        -------
        dict
            ``{"method": "multilabel-ir", "thresholds": [[...]], "values": [[...]]}``.
        """
        if not hasattr(self, "thresholds_"):
            raise ValueError("call fit() before calibration_block()")
        return {
            "method": "multilabel-ir",
            "thresholds": [t.tolist() for t in self.thresholds_],
            "values": [v.tolist() for v in self.values_],
        }
