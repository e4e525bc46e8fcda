"""Temperature scaling (TS), weighted TS (WTS) and region-dependent TS (RD-TS).

All three divide the logits by a temperature, so none of them changes any argmax. TS and WTS
minimise a convex function of ``beta = 1/T``; it is minimised exactly (to ~1e-12 relative) by a
safeguarded Newton method whose derivatives come in closed form from one compiled pass over
the logits (gradient ``E_p[z] - z_y``, Hessian ``Var_p[z]``), a bracket being kept and bisected
whenever a Newton step leaves it. A fit takes a handful of passes and no copy of the logits.

Papers: Guo et al. 2017 (TS); Obadinma et al. 2021, eq 3.8 (WTS, class-wise paper);
Dawkins et al. 2022 (RD-TS, region-balanced paper).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from calibkit.calibrators import _kernels as kernels
from calibkit.calibrators.base import Calibrator, FitInput, check_finite, check_num_classes
from calibkit.calibrators.streamed import nll_sums, streamed_derivatives
from calibkit.metrics.engines.threads import parallel_map, row_ranges
from calibkit.metrics.settings import DEFAULTS
from calibkit.metrics.validation import check_num_threads

# Inverse temperatures beyond this mean T < 1e-6: the data is separable and the NLL keeps
# falling as T -> 0; we stop there and warn rather than loop forever.
_BETA_MAX = 1e6
# Rows of the subsample a large fit warms up on (a few percent of a pass).
_WARM_ROWS = 65_536
_RTOL = 1e-6  # on the last Newton step; quadratic convergence leaves ~1e-12 after it


def nll_pass(
    data: FitInput,
    class_weight: np.ndarray,
    *,
    beta: float = 1.0,
    slope: float = 0.0,
    h: np.ndarray | None = None,
    num_threads: int | None = None,
) -> tuple[float, float, float, float]:
    """Compute the weighted mean NLL, its first two derivatives and its slope at ``beta = 0``, in one threaded pass.

    Parameters
    ----------
    data, class_weight, beta, slope, h, num_threads
        As :func:`calibkit.calibrators.streamed.nll_sums`.

    Returns
    -------
    tuple of float
        ``(f, f', f'', f'(0))``: the weighted mean NLL, its first and second derivative in the
        parameter, and its slope at ``beta = 0``.

    Raises
    ------
    ValueError
        When a kept row holds NaN or inf.
    """
    total = nll_sums(data, class_weight, beta=beta, slope=slope, h=h, num_threads=num_threads)
    if total[kernels.O_NONFINITE] > 0:
        check_finite(data.kept()[0])
    weight = total[kernels.O_WEIGHT]
    return tuple(total[[kernels.O_LOSS, kernels.O_GRAD, kernels.O_HESS, kernels.O_SLOPE0]] / weight)


def minimise_1d(
    derivatives: Callable[[float], tuple[float, ...]],
    x0: float,
    lower: float,
    upper: float,
    *,
    rtol: float = _RTOL,
    max_iter: int = 200,
    log_scale: bool = False,
) -> tuple[float, int]:
    """Find the root of the derivative of a smooth 1-D function in ``(lower, upper)`` by safeguarded Newton.

    Each step is a Newton step if it stays inside the current bracket and the curvature is
    positive, else a bisection; the bracket shrinks with the sign of every derivative evaluated.

    Parameters
    ----------
    derivatives : callable
        ``derivatives(x) -> (f, f', f'', ...)``.
    x0 : float
        The starting point, inside the bracket.
    lower, upper : float
        The bracket; it must hold the minimiser (``f'(lower) < 0 < f'(upper)``, ends not
        evaluated).
    rtol : float, default 1e-6
        Relative tolerance on the last step (quadratic convergence leaves about 1e-12 after it).
    max_iter : int, default 200
        Evaluations at most.
    log_scale : bool, default False
        ``x > 0`` is a scale: Newton steps are taken on ``log x``, and steps are relative.

    Returns
    -------
    x : float
        The minimiser.
    evaluations : int
        Calls of ``derivatives``.
    """
    x = x0
    for it in range(1, max_iter + 1):
        _, g, hess, *_ = derivatives(x)
        if g > 0:
            upper = x
        elif g < 0:
            lower = x
        else:
            return x, it
        if log_scale and x > 0 and x * hess + g > 0:
            # Newton on u = log x (a scale parameter): f'(u) = x g, f''(u) = x^2 h + x g. From
            # far above the minimum it stays on scale where a plain step on x overshoots to ~0.
            candidate = x * math.exp(-g / (x * hess + g))
        else:
            candidate = x - g / hess if hess > 0 else math.nan
        if not (lower < candidate < upper):
            candidate = 0.5 * (lower + upper)
        # Relative steps on a scale parameter (x > 0): an absolute floor would stop a beta of 1e-20
        # (logits of 1e20) at its first step. A slope may be 0: keep the floor there.
        size = abs(x) if log_scale else max(abs(x), 1e-12)
        if abs(candidate - x) <= rtol * size or upper - lower <= rtol * size:
            return candidate, it
        x = candidate
    return x, max_iter  # pragma: no cover - Newton with bisection converges long before


def fit_inverse_temperature(derivatives: Callable[[float], tuple[float, ...]], start: float = 1.0) -> float:
    """Find ``beta = 1/T`` minimising a convex NLL, to about 1e-12 relative.

    The bracket starts at ``[0, inf)``; from ``start`` it grows (by log-scale Newton steps, at
    least 1.5x after the first) until the slope turns positive, then :func:`minimise_1d`
    finishes inside it.

    Parameters
    ----------
    derivatives : callable
        ``derivatives(beta) -> (f, f', f'', f'(0))``, as :func:`nll_pass`.
    start : float, default 1.0
        The first ``beta`` tried (a warm start).

    Returns
    -------
    float
        ``beta``; capped, with a RuntimeWarning, when the NLL keeps decreasing as ``T -> 0``
        (separable data).

    Raises
    ------
    ValueError
        When the logits do not favour the labels (no ``T > 0`` lowers the NLL).
    """
    lower, beta, growing = 0.0, start, None
    _, g, hess, g0 = derivatives(beta)
    # At beta = 0 the slope is mean_k(z) - z_y on average: if it is not negative the logits
    # point away from the labels and no positive temperature lowers the NLL.
    if not g0 < 0:
        raise ValueError(
            "cannot fit a temperature: the logits do not favour the labels (the NLL does not decrease "
            "for any T > 0); check that `labels` match `logits`"
        )
    # -g0 is the logits' mean margin over the class average: their scale. Far from 1/beta (logits
    # of 1e20 or 1e-12), the steps below would take hundreds of passes (a log-scale Newton step
    # shrinks beta by at most e): restart where the scaled margin is 1. The cap on beta scales with
    # tiny logits likewise (it stays 1e6 for margins >= 1).
    if not 1e-3 <= beta * -g0 <= 1e3:
        beta = 1.0 / -g0
        _, g, hess, g0 = derivatives(beta)
    beta_max = _BETA_MAX / min(1.0, -g0)
    while True:
        if g > 0:
            upper = beta
            break
        lower = beta
        if beta >= beta_max:
            warnings.warn(
                f"the NLL keeps decreasing as T -> 0 (separable data); stopping at T = {1 / beta_max:g}",
                RuntimeWarning,
                stacklevel=4,
            )
            return beta_max
        # A log-scale Newton step towards the minimum (from a warm start it lands next to it);
        # after the first, grow at least 1.5x so that a far-off start still brackets quickly.
        newton = beta * math.exp(min(-g / (beta * hess + g), math.log(64.0))) if beta * hess + g > 0 else 4.0 * beta
        beta = newton if growing is None else max(newton, 1.5 * beta)
        growing = True
        _, g, hess, g0 = derivatives(beta)
    # Start from the (log-scale) Newton step of the last evaluation when it lands inside the bracket.
    x0 = beta * math.exp(-g / (beta * hess + g)) if beta * hess + g > 0 else 0.5 * (lower + upper)
    if not lower < x0 < upper:
        x0 = 0.5 * (lower + upper)
    beta, _ = minimise_1d(derivatives, x0, lower, upper, log_scale=True)
    return beta


def _uniform_weights(data: FitInput) -> np.ndarray:
    return np.ones(data.num_classes)


def _check_temperature(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"`{name}` must be a number > 0, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"`{name}` must be a finite number > 0, got {value!r}")
    return float(value)


class TemperatureScaling(Calibrator):
    """Temperature scaling: calibrated logits ``z / T``, ``T`` minimising the mean NLL (Guo et al. 2017).

    Parameters
    ----------
    ignore_index : int, default -100
        Label of rows to skip (padding of token classification).
    num_threads : int, optional
        Threads for the fitting passes (default: all cores).

    Attributes
    ----------
    temperature_ : float
        The fitted temperature.
    n_iter_ : int
        Passes over the data the fit took (beyond 8 x 65,536 rows, after a warm start on an
        evenly strided subsample of 65,536 rows, which costs a few percent of a pass).

    Examples
    --------
    >>> import numpy as np
    >>> from calibkit.calibrators import TemperatureScaling
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(20_000, 3)) * 3
    >>> p = np.exp(z / 2) / np.exp(z / 2).sum(axis=1, keepdims=True)  # the truth: T = 2
    >>> y = (p.cumsum(axis=1) > rng.random((20_000, 1))).argmax(axis=1)
    >>> ts = TemperatureScaling().fit(z, y)
    >>> round(ts.temperature_, 1)
    2.0
    >>> ts.predict_proba(z).shape
    (20000, 3)
    """

    method = "ts"
    affine = True
    weighs_by_class = False  # WTS weighs a row by its label's count: a streamed fit counts them first

    def __init__(self, *, ignore_index: int = DEFAULTS.ignore_index, num_threads: int | None = None) -> None:
        super().__init__(ignore_index=ignore_index)
        self.num_threads = check_num_threads(num_threads)

    def _class_weight(self, data: FitInput) -> np.ndarray:
        return _uniform_weights(data)

    def _fit(self, data: FitInput) -> None:
        num_threads = check_num_threads(self.num_threads)
        weight = self._class_weight(data)
        calls = []

        def counted(beta: float):
            calls.append(beta)
            return nll_pass(data, weight, beta=beta, num_threads=num_threads)

        beta = fit_inverse_temperature(counted, start=self._warm_start(data, weight))
        self.temperature_ = float(1.0 / beta)
        self.n_iter_ = len(calls)

    def fit_batches(
        self,
        batches: Callable[[], Any],
        *,
        next_token: bool = DEFAULTS.next_token,
        class_counts: Any = None,
    ) -> TemperatureScaling:
        """Fit on data read batch by batch and never held: a fit on 10M tokens x 32,000 classes.

        Each Newton step reads every batch once (a handful of passes); the logits of a batch are
        read in place (CUDA tensors on their device, in float64 chunks), so memory stays that of
        one batch. The result equals ``fit`` on all the batches at once, up to the order of
        the float64 sums (about 1e-12 relative).

        Parameters
        ----------
        batches : callable
            ``batches()`` returns an iterable of ``(logits, labels)`` over the whole fitting
            set, the same on every call (a pass); e.g. ``lambda: iter(loader)``.
        next_token : bool, default False
            Causal-LM batches: logits ``(N, T, V)`` at position ``t`` are fitted against the
            label at ``t + 1`` (labels unshifted), as the model's own loss shifts them.
        class_counts : array-like of shape (K,), optional
            The labels' counts over the fitting set (WTS's weights), when already known (e.g.
            from a :class:`~calibkit.CalibrationAccumulator`); else WTS reads them in a first pass.

        Returns
        -------
        TemperatureScaling
            ``self``, fitted (``n_iter_``: the passes over the batches).

        Raises
        ------
        ValueError
            When ``batches`` is not callable; on bad input, naming the batch; when no batch holds
            a labelled row.
        """
        if not callable(batches):  # every pass calls it; a list would stop there, not naming the argument
            raise ValueError(
                "`batches` must be a callable that returns an iterable of (logits, labels) batches, "
                f"read anew on every call (e.g. `lambda: iter(loader)`), got {type(batches).__name__}"
            )
        derivatives, seen = streamed_derivatives(
            batches,
            self._weight_of_counts,
            ignore_index=self.ignore_index,
            next_token=next_token,
            class_counts=class_counts,
            read_counts=self.weighs_by_class and class_counts is None,
            num_threads=check_num_threads(self.num_threads),
        )
        beta = fit_inverse_temperature(derivatives, start=1.0)
        self.temperature_ = float(1.0 / beta)
        self.num_classes_ = int(seen["classes"])
        self.n_iter_ = int(seen["passes"])
        return self

    def _weight_of_counts(self, counts: Any, num_classes: int | None) -> np.ndarray | None:
        """Return the class weights of a streamed fit: ones for TS (``counts`` unused)."""
        return None if num_classes is None else np.ones(num_classes)

    def _warm_start(self, data: FitInput, weight: np.ndarray) -> float:
        """Fit beta on an evenly strided subsample: the full-data Newton then starts about 1e-2 away."""
        step = data.logits.shape[0] // _WARM_ROWS
        if step < 8:
            return 1.0
        sample = FitInput(
            np.ascontiguousarray(data.logits[::step]), data.labels[::step], data.ignore_index, data.num_classes, 0
        )
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                beta = fit_inverse_temperature(lambda b: nll_pass(sample, weight, beta=b, num_threads=self.num_threads))
        except ValueError:  # e.g. no kept row in the sample: start from T = 1
            return 1.0
        return min(max(beta, 1e-3), 1e3)

    def calibration_block(self) -> dict[str, Any]:
        """Return the fitted parameters as the ``calibration`` block of a model's config.

        Returns
        -------
        dict
            ``{"method": ..., "temperature": T}``, JSON-able: what
            :class:`CalibrationHead` is built from.

        Raises
        ------
        ValueError
            When the calibrator is not fitted yet.
        """
        self._check_fitted()
        return {"method": self.method, "temperature": float(self.temperature_)}

    @classmethod
    def from_temperature(cls, temperature: float, num_classes: int, **params: Any) -> TemperatureScaling:
        """Build a calibrator with a known temperature (e.g. a published one), without data.

        Parameters
        ----------
        temperature : float
            ``T > 0``.
        num_classes : int
            ``K``, the classes of the logits it will calibrate.
        **params
            Constructor arguments (``ignore_index``, ``num_threads``).

        Returns
        -------
        TemperatureScaling
            Fitted: ``temperature_`` is ``temperature``.

        Raises
        ------
        ValueError
            On a temperature that is not a finite number > 0, or a bad class count or argument.
        """
        temperature = _check_temperature(temperature, "temperature")
        num_classes = check_num_classes(num_classes)
        cls.check_param_names(params)
        model = cls(**params)
        model.temperature_ = temperature
        model.num_classes_ = num_classes
        model.n_iter_ = 0
        return model


class WeightedTemperatureScaling(TemperatureScaling):
    """Weighted temperature scaling (class-wise paper, eq 3.8): TS whose NLL weighs sample i by ``1 - n_{y_i}/N``.

    ``n_k`` counts class k in the fitting set (``ignore_index`` rows excluded), so rare classes
    weigh more. Needs at least two classes present (with one, every weight is 0).

    Parameters
    ----------
    ignore_index : int, default -100
        Label of the rows to skip when fitting (padding of token classification).
    num_threads : int, optional
        Threads for the fitting passes (default: all cores).

    Attributes
    ----------
    temperature_ : float
    class_weight_ : ndarray of shape (K,)
        ``1 - n_k/N`` per class.
    n_iter_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from calibkit.calibrators import WeightedTemperatureScaling
    >>> z = np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 0.0], [3.0, 0.0]])
    >>> wts = WeightedTemperatureScaling().fit(z, np.array([0, 1, 1, 0]))
    >>> wts.class_weight_.tolist()
    [0.5, 0.5]
    """

    method = "wts"
    weighs_by_class = True

    def _class_weight(self, data: FitInput) -> np.ndarray:
        kept = data.labels[data.labels != data.ignore_index]
        return self._weight_of_counts(np.bincount(kept, minlength=data.num_classes), data.num_classes)

    def _weight_of_counts(self, counts: Any, num_classes: int | None) -> np.ndarray | None:
        """``1 - n_k/N`` from the labels' counts (refused when fewer than two classes are present)."""
        if counts is None:
            return None
        counts = np.asarray(counts, dtype=np.float64).reshape(-1)
        if num_classes is not None and counts.shape[0] != num_classes:
            raise ValueError(f"`class_counts` has {counts.shape[0]} classes but the logits have {num_classes}")
        if counts.sum() <= 0:
            raise ValueError("`labels` holds no sample to fit on (empty, or every label is ignore_index)")
        if np.count_nonzero(counts) < 2:
            raise ValueError(
                f"weighted temperature scaling needs at least two classes in `labels`; only class "
                f"{int(np.flatnonzero(counts)[0])} is present, so every weight 1 - n_k/N is 0"
            )
        self.class_weight_ = 1.0 - counts / counts.sum()
        return self.class_weight_


RD_TS_RULES = ("paper", "mean", "nll")


def paper_slope(temperature: float) -> float:
    """Compute the RD-TS slope from a TS temperature by the region-balanced paper's rule ``m = (T - 0.9)/0.89``.

    Parameters
    ----------
    temperature : float
        A TS temperature ``T``.

    Returns
    -------
    float
        ``m``.
    """
    return (temperature - 0.9) / 0.89


def _check_slope(slope: Any, name: str | None = None) -> float:
    """Check a slope ``m > -1``; ``name`` is the user's argument when the slope was passed, not derived."""
    what = f"`{name}`" if name else "RD-TS slope m"
    if isinstance(slope, (bool, np.bool_)) or not isinstance(slope, (int, float, np.integer, np.floating)):
        raise ValueError(f"{what} must be a number > -1, got {slope!r}")
    if not math.isfinite(slope) or slope <= -1:
        raise ValueError(f"{what} must be a finite number > -1 so that T(h) = m h + 1 > 0, got {slope!r}")
    return float(slope)


class RegionDependentTemperatureScaling(Calibrator):
    """Region-dependent TS (Dawkins et al. 2022): logits ``z / T(h)``, ``T(h) = m h + 1``, ``h = max softmax(z)``.

    Confident predictions (``h`` near 1) are cooled by about ``m + 1``, uncertain ones barely
    touched. The slope ``m`` comes from a TS temperature ``T`` fitted on the same data, by

    - ``rule="paper"`` (default): ``m = (T - 0.9)/0.89``, the paper's rule;
    - ``rule="mean"``: ``m = (T - 1)/mean(h)``, so that the mean of ``T(h)`` over the data equals T
      (the paper's exact sum);
    - ``rule="nll"``: ``m`` minimising the NLL directly (safeguarded Newton on ``m > -1``).

    ``m > -1`` keeps every ``T(h)`` positive; the argmax never changes.
    :meth:`from_temperature` builds it from a published T without data, as the paper does.

    Parameters
    ----------
    rule : {"paper", "mean", "nll"}, default "paper"
        How the slope is derived (above).
    ignore_index : int, default -100
        Label of the rows to skip when fitting (padding of token classification).
    num_threads : int, optional
        Threads for the fitting passes (default: all cores).

    Attributes
    ----------
    slope_ : float
    temperature_ : float
        The TS temperature the slope was derived from (NaN when built from a slope).

    Examples
    --------
    >>> from calibkit.calibrators import RegionDependentTemperatureScaling
    >>> round(RegionDependentTemperatureScaling.from_temperature(1.39, num_classes=3).slope_, 3)
    0.551
    """

    method = "rd-ts"

    def __init__(
        self, *, rule: str = "paper", ignore_index: int = DEFAULTS.ignore_index, num_threads: int | None = None
    ) -> None:
        super().__init__(ignore_index=ignore_index)
        if rule not in RD_TS_RULES:
            raise ValueError(f"`rule` must be one of {RD_TS_RULES}, got {rule!r}")
        self.rule = rule
        self.num_threads = check_num_threads(num_threads)

    def _fit(self, data: FitInput) -> None:
        if self.rule not in RD_TS_RULES:
            raise ValueError(f"`rule` must be one of {RD_TS_RULES}, got {self.rule!r}")
        ts = TemperatureScaling(ignore_index=self.ignore_index, num_threads=self.num_threads)
        ts._fit(data)
        self.temperature_ = ts.temperature_
        self.n_iter_ = ts.n_iter_
        if self.rule == "paper":
            slope = paper_slope(self.temperature_)
            if slope <= -1:
                raise ValueError(
                    f"RD-TS paper rule m = (T - 0.9)/0.89 gives m = {slope:.4g} <= -1 for the fitted T = "
                    f"{self.temperature_:.4g} (T(h) would not stay positive); use rule='nll' or rule='mean'"
                )
            self.slope_ = slope
            return
        h = self._max_softmax(data)
        if self.rule == "mean":
            mean_h = float(h[data.labels != data.ignore_index].mean())
            self.slope_ = _check_slope((self.temperature_ - 1.0) / mean_h)
            return
        self.slope_, evaluations = self._fit_slope(data, h, start=paper_slope(self.temperature_))
        self.n_iter_ += evaluations

    def _max_softmax(self, data: FitInput) -> np.ndarray:
        h = np.zeros(data.logits.shape[0])

        def run(start: int, stop: int) -> None:
            kernels.max_softmax(data.logits, data.labels, start, stop, data.ignore_index, h)

        parallel_map(run, row_ranges(data.logits.shape[0], self.num_threads))
        return h

    def _fit_slope(self, data: FitInput, h: np.ndarray, start: float) -> tuple[float, int]:
        weight = np.ones(data.num_classes)
        calls = []

        def derivatives(m: float) -> tuple[float, ...]:
            calls.append(m)
            return nll_pass(data, weight, slope=m, h=h, num_threads=self.num_threads)

        lower, upper, m = -1.0, math.inf, max(start, 0.0)
        step = 1.0
        while True:  # grow the bracket to the right until the slope of the NLL is positive
            _, g, *_ = derivatives(m)
            if g >= 0:
                upper = m
                break
            lower = m
            if m > 1e6:
                raise ValueError("RD-TS: the NLL keeps decreasing as m grows (separable data); use rule='paper'")
            m += step
            step *= 2.0
        slope, _ = minimise_1d(derivatives, 0.5 * (lower + upper), lower, upper)
        return _check_slope(slope), len(calls)

    def calibration_block(self) -> dict[str, Any]:
        """Return the fitted parameters as the ``calibration`` block of a model's config.

        Returns
        -------
        dict
            ``{"method": ..., "slope": m}``, JSON-able: what
            :class:`CalibrationHead` is built from.

        Raises
        ------
        ValueError
            When the calibrator is not fitted yet.
        """
        self._check_fitted()
        return {"method": self.method, "slope": float(self.slope_)}

    @classmethod
    def from_temperature(cls, temperature: float, num_classes: int, **params: Any) -> RegionDependentTemperatureScaling:
        """Build RD-TS from a published TS temperature, with the paper's rule ``m = (T - 0.9)/0.89`` (no data).

        Parameters
        ----------
        temperature : float
            The TS temperature ``T > 0.01`` (below, ``m <= -1`` and ``T(h)`` would not stay positive).
        num_classes : int
            ``K``, the classes of the logits it will calibrate.
        **params
            Constructor arguments (``rule``, ``ignore_index``, ``num_threads``).

        Returns
        -------
        RegionDependentTemperatureScaling
            Fitted: ``slope_`` from the rule, ``temperature_`` is ``temperature``.

        Raises
        ------
        ValueError
            On a temperature of 0.01 or less, or a bad class count or argument.
        """
        temperature = _check_temperature(temperature, "temperature")
        slope = paper_slope(temperature)
        if not slope > -1:  # T <= 0.01
            raise ValueError(
                f"`temperature` must be > 0.01 for RD-TS: the paper's rule m = (T - 0.9)/0.89 gives the slope "
                f"m = {slope:.4g} <= -1 for T = {temperature!r}, and T(h) = m h + 1 would not stay positive"
            )
        num_classes = check_num_classes(num_classes)
        cls.check_param_names(params)
        model = cls(**params)
        model.temperature_ = temperature
        model.slope_ = slope
        model.num_classes_ = num_classes
        return model

    @classmethod
    def from_slope(cls, slope: float, num_classes: int, **params: Any) -> RegionDependentTemperatureScaling:
        """Build RD-TS with a given slope ``m > -1``.

        Parameters
        ----------
        slope : float
            ``m``, finite and > -1.
        num_classes : int
            ``K``, the classes of the logits it will calibrate.
        **params
            Constructor arguments (``rule``, ``ignore_index``, ``num_threads``).

        Returns
        -------
        RegionDependentTemperatureScaling
            Fitted: ``slope_`` is ``slope``, ``temperature_`` NaN.

        Raises
        ------
        ValueError
            On a slope of -1 or less, or a bad class count or argument.
        """
        slope = _check_slope(slope, "slope")
        num_classes = check_num_classes(num_classes)
        cls.check_param_names(params)
        model = cls(**params)
        model.slope_ = slope
        model.temperature_ = math.nan
        model.num_classes_ = num_classes
        return model
