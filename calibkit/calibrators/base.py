"""What every calibrator shares: input checks, the scikit-learn-style interface, application.

A calibrator is fitted on validation logits and labels and then maps logits to calibrated
logits (or probabilities). Fitting lives in each subclass; *applying* a fitted calibrator is
done by :class:`~calibkit.calibrators.modeling_calibkit.CalibrationHead`, the same torch module
a calibrated ``transformers`` model runs, so the numpy path and the model can never disagree.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np

from calibkit.metrics.settings import DEFAULTS
from calibkit.metrics.validation import check_ignore_index, prepare_labels, to_numpy


def check_num_classes(value: Any, name: str = "num_classes") -> int:
    """Check a class count: an integer >= 2 (every calibrator maps rows of at least two logits).

    Parameters
    ----------
    value : object
        The user's value; bools are refused.
    name : str, default "num_classes"
        The argument's name, for the error message.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        Naming the argument.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 2:
        raise ValueError(f"`{name}` must be an integer >= 2, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class FitInput:
    """Logits as rows ``(R, K)`` (a view: never copied) and labels ``(R,)``; ``ignore_index`` rows stay in.

    Parameters
    ----------
    logits : ndarray of shape (R, K)
        The fitting logits, float32 or float64.
    labels : ndarray of int, shape (R,)
        Their labels, ``ignore_index`` included.
    ignore_index : int
        Label of the rows a fit skips.
    num_classes : int
        ``K``.
    n_kept : int
        Rows whose label is not ``ignore_index``.
    """

    logits: np.ndarray
    labels: np.ndarray
    ignore_index: int
    num_classes: int
    n_kept: int

    def kept(self) -> tuple[np.ndarray, np.ndarray]:
        """Copy the rows whose label is not ``ignore_index`` (for the baselines' fits).

        Returns
        -------
        logits : ndarray of shape (n_kept, K)
        labels : ndarray of shape (n_kept,)
        """
        keep = self.labels != self.ignore_index
        return self.logits[keep], self.labels[keep]


def logits_rows(logits: Any, name: str = "logits") -> tuple[np.ndarray, tuple[int, ...]]:
    """Return ``(N, K)`` or ``(N, L, K)`` logits as a float ``(rows, K)`` view, and the original shape.

    Parameters
    ----------
    logits : array-like or torch.Tensor of shape (N, K) or (N, L, K)
        Logits of at least two classes; integers are converted to float64.
    name : str, default "logits"
        The argument's name, for the error message.

    Returns
    -------
    rows : ndarray of shape (rows, K)
        C-contiguous, float32 or float64 (a view when the input already is).
    shape : tuple of int
        The original shape.

    Raises
    ------
    ValueError
        Naming the argument, on a wrong dtype or shape.
    """
    z = to_numpy(logits, name)
    if z.dtype.kind not in "fiu":
        raise ValueError(f"`{name}` must be a float array, got dtype {z.dtype}")
    if z.dtype not in (np.float32, np.float64):
        z = z.astype(np.float64)
    if z.ndim == 1:  # the metrics take 1-D binary input; a calibrator fits the model's class logits
        raise ValueError(
            f"`{name}` must have shape (N, K) or (N, L, K), got {tuple(z.shape)}: for a binary model with one logit "
            "z, pass np.stack([np.zeros_like(z), z], axis=-1) (its softmax is [1 - sigmoid(z), sigmoid(z)])"
        )
    if z.ndim not in (2, 3):
        raise ValueError(f"`{name}` must have shape (N, K) or (N, L, K), got {tuple(z.shape)}")
    if z.shape[-1] < 2:
        raise ValueError(f"`{name}` has shape {tuple(z.shape)}: the last axis must hold >= 2 classes")
    return np.ascontiguousarray(z.reshape(-1, z.shape[-1])), tuple(z.shape)


def prepare_fit(logits: Any, labels: Any, ignore_index: int) -> FitInput:
    """Check logits and labels for fitting; value checks that need a pass are left to the fit.

    Parameters
    ----------
    logits : array-like or torch.Tensor of shape (N, K) or (N, L, K)
        Validation logits.
    labels : array-like of int, shape (N,) or (N, L)
        Their labels.
    ignore_index : int
        Label of the rows to skip.

    Returns
    -------
    FitInput

    Raises
    ------
    ValueError
        On mismatched shapes, a label outside ``[0, K)`` other than ``ignore_index``, or no row
        left to fit on.
    """
    ignore_index = check_ignore_index(ignore_index)
    z, shape = logits_rows(logits)
    y_raw = to_numpy(labels, "labels")
    if tuple(y_raw.shape) != shape[:-1]:
        raise ValueError(f"`labels` has shape {tuple(y_raw.shape)} but `logits` of shape {shape} needs {shape[:-1]}")
    y = prepare_labels(y_raw)
    k = shape[-1]
    keep = y != ignore_index
    bad = keep & ((y < 0) | (y >= k))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        where = tuple(int(w) for w in np.unravel_index(i, shape[:-1]))
        raise ValueError(
            f"`labels` must lie in [0, {k}) or equal ignore_index={ignore_index}; got {int(y[i])} at position "
            f"{where[0] if len(where) == 1 else where}"
        )
    n_kept = int(keep.sum())
    if n_kept == 0:
        raise ValueError("`labels` holds no sample to fit on (empty, or every label is ignore_index)")
    return FitInput(z, y, int(ignore_index), int(k), n_kept)


def softmax_rows(z: np.ndarray) -> np.ndarray:
    """Compute the row-wise softmax of ``(N, K)`` logits (shifted by the row maximum).

    Parameters
    ----------
    z : ndarray of shape (N, K)
        Logits.

    Returns
    -------
    ndarray of shape (N, K)
        Probabilities; each row sums to 1.
    """
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def check_finite(z: np.ndarray, name: str = "logits") -> None:
    """Refuse logits holding NaN or inf, naming the first such row.

    Parameters
    ----------
    z : ndarray of shape (N, K)
        The kept rows of a fit.
    name : str, default "logits"
        The argument's name, for the error message.

    Raises
    ------
    ValueError
        When a value is NaN or inf.
    """
    if not np.isfinite(z).all():
        row = int(np.flatnonzero(~np.isfinite(z).all(axis=1))[0])
        raise ValueError(f"`{name}` contains NaN or inf (row {row} of the kept rows): cannot fit a calibrator")


class Calibrator:
    """Base class: ``fit(logits, labels)``, ``predict_proba(logits)``, ``transform(logits)``.

    Subclasses set ``method`` (the name used in a model's ``calibration`` block) and implement
    ``_fit(FitInput)`` and ``calibration_block()``. Learned attributes end with ``_``.

    Parameters
    ----------
    ignore_index : int, default -100
        Label of the rows to skip when fitting (padding of token classification).
    """

    method: str = ""
    #: True when the map is affine in the logits (foldable into the last linear layer).
    affine: bool = False
    #: True when the calibrator outputs logits (TS, WTS, RD-TS, VS, MS); IR and HB output probabilities.
    logit_based: bool = True

    def __init__(self, *, ignore_index: int = DEFAULTS.ignore_index) -> None:
        # Settings are checked here and by set_params, not at first use (and again at fit, in case
        # an attribute was assigned directly).
        self.ignore_index = check_ignore_index(ignore_index)

    # -- scikit-learn conventions ------------------------------------------------------------
    @classmethod
    def param_names(cls) -> list[str]:
        """List the constructor's argument names.

        Returns
        -------
        list of str
        """
        return [
            p.name
            for p in inspect.signature(cls.__init__).parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        ]

    @classmethod
    def check_param_names(cls, params: dict[str, Any]) -> None:
        """Refuse, with a ``ValueError`` naming it, the first argument that the constructor does not take.

        Parameters
        ----------
        params : dict of str to object
            Arguments by name.

        Raises
        ------
        ValueError
            Naming the argument and the valid ones.
        """
        valid = cls.param_names()
        for name in params:
            if name not in valid:
                raise ValueError(f"`{name}` is not a parameter of {cls.__name__}; valid: {sorted(valid)}")

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Return the constructor's arguments and their current values (scikit-learn convention).

        Parameters
        ----------
        deep : bool, default True
            Accepted for scikit-learn compatibility; calibrators hold no sub-estimators.

        Returns
        -------
        dict of str to object
        """
        return {name: getattr(self, name) for name in self.param_names()}

    def set_params(self, **params: Any) -> Calibrator:
        """Change settings; each is checked as the constructor checks it, before any is set.

        Parameters
        ----------
        **params
            Constructor arguments by name.

        Returns
        -------
        Calibrator
            ``self``.

        Raises
        ------
        ValueError
            When a name is not a constructor argument or a value is out of range.
        """
        self.check_param_names(params)
        checked = type(self)(**{**self.get_params(), **params})
        for name in params:
            setattr(self, name, getattr(checked, name))
        return self

    def __repr__(self) -> str:
        """Return ``ClassName(arg=value, ...)`` with the constructor's arguments."""
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # -- fitting -----------------------------------------------------------------------------
    def fit(self, logits: Any, labels: Any) -> Calibrator:
        """Fit on validation logits and labels (``ignore_index`` rows skipped).

        Parameters
        ----------
        logits : array-like or torch.Tensor of shape (N, K) or (N, L, K)
            Validation logits.
        labels : array-like of int, shape (N,) or (N, L)
            Their labels.

        Returns
        -------
        Calibrator
            ``self``, fitted.

        Raises
        ------
        ValueError
            On bad input (shapes, labels, NaN or inf), or when the fit cannot succeed.
        """
        data = prepare_fit(logits, labels, self.ignore_index)
        self.num_classes_ = data.num_classes
        self._fit(data)
        return self

    def _fit(self, data: FitInput) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def calibration_block(self) -> dict[str, Any]:
        """Return the fitted parameters as the JSON-able ``calibration`` block of a model's config.

        Returns
        -------
        dict
            ``{"method": ..., <parameters>}``: what :class:`CalibrationHead` is built from.
        """
        raise NotImplementedError  # pragma: no cover - abstract

    def _check_fitted(self) -> None:
        if not hasattr(self, "num_classes_"):
            raise ValueError(f"this {type(self).__name__} is not fitted yet: call fit(logits, labels) first")

    # -- applying ----------------------------------------------------------------------------
    def head(self):
        """Build the torch module that applies this calibrator (what a calibrated model runs).

        Returns
        -------
        CalibrationHead

        Raises
        ------
        ValueError
            When the calibrator is not fitted yet.
        """
        from calibkit.calibrators.modeling_calibkit import CalibrationHead

        self._check_fitted()
        return CalibrationHead(self.calibration_block(), self.num_classes_)

    def _apply(self, logits: Any, probabilities: bool) -> np.ndarray:
        import torch

        self._check_fitted()
        z, shape = logits_rows(logits)
        if shape[-1] != self.num_classes_:
            raise ValueError(f"`logits` has {shape[-1]} classes, the calibrator was fitted on {self.num_classes_}")
        with torch.no_grad():
            out = self.head()(torch.from_numpy(z))
            if probabilities:
                out = torch.softmax(out, dim=-1)
        return out.numpy().reshape(shape)

    def transform(self, logits: Any) -> np.ndarray:
        """Return calibrated logits (IR and HB: the log of the calibrated probabilities).

        Parameters
        ----------
        logits : array-like or torch.Tensor of shape (N, K) or (N, L, K)
            Uncalibrated logits, with the class count the calibrator was fitted on.

        Returns
        -------
        ndarray
            Same shape as ``logits``.
        """
        return self._apply(logits, probabilities=False)

    def predict_proba(self, logits: Any) -> np.ndarray:
        """Return calibrated probabilities.

        Parameters
        ----------
        logits : array-like or torch.Tensor of shape (N, K) or (N, L, K)
            Uncalibrated logits, with the class count the calibrator was fitted on.

        Returns
        -------
        ndarray
            Same shape as ``logits``; each row sums to 1.
        """
        return self._apply(logits, probabilities=True)
