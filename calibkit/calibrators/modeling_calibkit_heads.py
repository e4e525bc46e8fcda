"""The calibration heads of a calibrated model: one small class per method, in one table, :data:`HEADS`.

Self-contained as :mod:`calibkit.calibrators.modeling_calibkit` is (torch and the standard library
only): ``save_pretrained`` copies this file next to the weights with ``modeling_calibkit.py``,
which imports it by a relative import, so a calibrated model loads with ``trust_remote_code=True``
on a machine without calibkit. ``modeling_calibkit`` re-exports every name below.

A head class states its method's facts once: how it reads its parameters from the
``calibration`` block of ``config.json`` (checked), its forward, whether it is affine (what
``fold_into_classifier`` folds), and its title, paper and formula (the model card; the registry
reads the paper). :class:`CalibrationHead` picks one by the block's ``method``. Maps of
probabilities (IR, HB, Dirichlet, beta, Venn-Abers) return the log of the calibrated
probabilities, so ``softmax`` of the head's output is the calibrated distribution; the
multi-label heads (``multilabel``, ``multilabel-ir``) return per-label logits, before each
label's sigmoid. The reward head (``reward-ts``) takes a reward model's one output (``num_labels``
1) and divides it by the pairwise temperature: rankings unchanged, preference probabilities
``sigmoid((r_a - r_b) / T)`` calibrated.
"""

from __future__ import annotations

import math

import torch
from torch import nn

# Logits of probability 0 after IR/HB: finite, so losses stay finite, and exp() underflows to 0.
_LOG_FLOOR = math.log(1e-30)
_LOG_TINY, _EPS = math.log(2.0**-1022), 2.0**-52  # Dirichlet's floor of p; beta's clip of p to [eps, 1 - eps]


def _number(block: dict, key: str) -> float:
    value = block.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"calibration block: `{key}` must be a finite number, got {value!r}")
    return float(value)


def _cpu(value: float) -> torch.Tensor:
    # An explicit device: from_pretrained builds the model under a meta-device context.
    return torch.tensor(value, dtype=torch.float64, device="cpu")


def _as_tensor(value, key: str) -> torch.Tensor:
    try:
        return torch.tensor(value, dtype=torch.float64, device="cpu")
    except (TypeError, ValueError, RuntimeError, OverflowError) as exc:  # strings, None, ragged, 2**1100
        raise ValueError(f"calibration block: `{key}` is not a numeric array ({exc})") from exc


def _tensor(block: dict, key: str, shape: tuple[int, ...]) -> torch.Tensor:
    if key not in block:
        raise ValueError(f"calibration block for method {block.get('method')!r} needs `{key}`")
    value = _as_tensor(block[key], key)
    if tuple(value.shape) != shape:
        raise ValueError(f"calibration block: `{key}` must have shape {shape}, got {tuple(value.shape)}")
    if not torch.isfinite(value).all():
        raise ValueError(f"calibration block: `{key}` contains NaN or inf")
    return value


def _ragged(block: dict, key: str, num_labels: int) -> list[torch.Tensor]:
    rows = block.get(key)
    if not isinstance(rows, (list, tuple)) or len(rows) != num_labels:
        raise ValueError(f"calibration block: `{key}` must be a list of {num_labels} per-class lists")
    out = []
    for row in rows:
        t = _as_tensor(row, key)
        if t.ndim != 1 or t.numel() == 0 or not torch.isfinite(t).all():
            raise ValueError(f"calibration block: every row of `{key}` must be a non-empty finite list")
        out.append(t)
    return out


def _temperature(block: dict) -> dict[str, torch.Tensor]:
    temperature = _number(block, "temperature")
    if temperature <= 0:
        raise ValueError(f"calibration block: `temperature` must be > 0, got {temperature}")
    return {"temperature": _cpu(temperature)}


def _check_probabilities(values: torch.Tensor, key: str) -> None:
    # IR and HB map to frequencies: a value outside [0, 1] would give negative "probabilities"
    # (NaN after the log) or a row renormalised into something meaningless.
    if ((values < 0) | (values > 1)).any():
        raise ValueError(f"calibration block: every value of `{key}` must lie in [0, 1]")


def _check_num_labels(value, head: type[_Head]) -> int:
    if head.outputs is not None:  # a reward head: the model's one output
        if isinstance(value, bool) or value != head.outputs:
            raise ValueError(
                f"`num_labels` must be {head.outputs} for method {head.method!r} (a reward model's one output), "
                f"got {value!r}"
            )
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        hint = "; a reward model (one output) takes method 'reward-ts'" if value == 1 else ""
        raise ValueError(f"`num_labels` must be an integer >= 2, got {value!r}{hint}")
    return value


class _Head:
    """One calibration map: a method's parameters, their checks, its forward, and its facts for the model card.

    One subclass per method, listed in :data:`HEADS`. Its class attributes state the method's facts
    once: ``method`` (its name in the ``calibration`` block), ``title`` and ``paper`` (the model
    card's "calibrated by ..."; ``paper`` is also the registry's citation), ``formula`` (the card's
    map of the logits). ``read`` builds the parameters from the block (checked), ``apply`` maps
    logits already checked by :class:`CalibrationHead`, ``affine_map`` gives ``(A, c)`` of an
    affine map (what :func:`calibkit.calibrators.fold_into_classifier` folds).

    Parameters are kept in float64 and cast to the logits' dtype when used: float64 logits get
    the fitted values exactly, and a vector-scaling scale of 1e-100 (fitted on logits of 1e100)
    does not underflow to 0.
    """

    method = ""
    title = ""
    paper = ""
    formula = ""
    outputs: int | None = None  # the model's outputs the map takes when fixed (a reward model's 1); None: K >= 2

    def __init__(self, block: dict, num_labels: int) -> None:
        self.num_labels = num_labels
        self.params = self.read(block, num_labels)

    def read(self, block: dict, k: int) -> dict[str, torch.Tensor]:
        """Return the parameters of ``block`` as float64 CPU tensors, checked (ValueError naming the key)."""
        raise NotImplementedError

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """Map logits ``(..., K)``, floating-point and checked, to calibrated logits of the same shape and dtype."""
        raise NotImplementedError

    def affine_map(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Return ``(A, c)`` in float64 when the map is ``z -> A z + c``, else None."""
        return None

    def _get(self, name: str, like: torch.Tensor) -> torch.Tensor:
        return self.params[name].to(device=like.device, dtype=like.dtype)


class _TemperatureScaling(_Head):
    method, title, paper, formula = "ts", "temperature scaling", "Guo et al. 2017", "logits / T"

    def read(self, block, k):
        return _temperature(block)

    def apply(self, logits):
        return logits / self._get("temperature", logits)

    def affine_map(self):
        k = self.num_labels
        return torch.eye(k, dtype=torch.float64) / self.params["temperature"], torch.zeros(k, dtype=torch.float64)


class _WeightedTemperatureScaling(_TemperatureScaling):
    # Another fit of the same map: one temperature (a causal LM takes it too).
    method, title, paper = "wts", "weighted temperature scaling", "Obadinma et al. 2021"


class _RegionDependentTemperatureScaling(_Head):
    method, title, paper = "rd-ts", "region-dependent temperature scaling", "Dawkins et al. 2022"
    formula = "logits / (m * max(softmax(logits)) + 1)"

    def read(self, block, k):
        slope = _number(block, "slope")
        if slope <= -1:
            raise ValueError(f"calibration block: RD-TS `slope` must be > -1 so that T(h) > 0, got {slope}")
        return {"slope": _cpu(slope)}

    def apply(self, logits):
        h = torch.softmax(logits, dim=-1).amax(dim=-1, keepdim=True)
        return logits / (self._get("slope", logits) * h + 1)


class _VectorScaling(_Head):
    method, title, paper, formula = "vs", "vector scaling", "Guo et al. 2017", "scale * logits + bias"

    def read(self, block, k):
        return {"scale": _tensor(block, "scale", (k,)), "bias": _tensor(block, "bias", (k,))}

    def apply(self, logits):
        return logits * self._get("scale", logits) + self._get("bias", logits)

    def affine_map(self):
        return torch.diag(self.params["scale"]), self.params["bias"]


class _MatrixScaling(_Head):
    method, title, paper, formula = "ms", "matrix scaling", "Guo et al. 2017", "weight @ logits + bias"

    def read(self, block, k):
        return {"weight": _tensor(block, "weight", (k, k)), "bias": _tensor(block, "bias", (k,))}

    def apply(self, logits):
        return logits @ self._get("weight", logits).T + self._get("bias", logits)

    def affine_map(self):
        return self.params["weight"], self.params["bias"]


class _OneVsRest(_Head):
    """A map of each class's probability on its own, renormalised; the head returns the log of the result."""

    def map_columns(self, flat: torch.Tensor) -> torch.Tensor:
        """Map ``softmax(z)`` as ``(K, rows)`` float64 to the unnormalised calibrated probabilities, same shape."""
        raise NotImplementedError

    def apply(self, logits):
        # float64: a steep isotonic segment would amplify float32 rounding of p.
        probs = torch.softmax(logits.double(), dim=-1)
        flat = probs.reshape(-1, self.num_labels).T.contiguous()  # (K, rows)
        mapped = self.map_columns(flat).T.reshape(probs.shape)
        total = mapped.sum(dim=-1, keepdim=True)
        # A row that every one-vs-rest map sends to 0 carries no information: uniform.
        mapped = torch.where(total > 0, mapped / total.clamp_min(1e-300), torch.full_like(mapped, 1 / self.num_labels))
        out = torch.log(mapped).clamp_min(_LOG_FLOOR)
        # A row whose softmax is NaN (a NaN or +inf logit) stays NaN, as TS/VS/MS give it: the maps
        # and the clamps above would otherwise turn it into a valid-looking (uniform) row.
        return torch.where(torch.isnan(probs).any(dim=-1, keepdim=True), torch.nan, out).to(logits.dtype)


class _Isotonic(_OneVsRest):
    method, title, paper = "ir", "one-vs-rest isotonic regression", "Zadrozny & Elkan 2002"
    formula = "log(renormalised per-class isotonic map of softmax(logits))"

    def read(self, block, k):
        xs, ys = _ragged(block, "thresholds", k), _ragged(block, "values", k)
        if any(x.shape != y.shape for x, y in zip(xs, ys)):
            raise ValueError("calibration block: `thresholds` and `values` rows must have equal lengths")
        if any((x[1:] < x[:-1]).any() for x in xs):
            raise ValueError("calibration block: every row of `thresholds` must be sorted")
        for y in ys:
            _check_probabilities(y, "values")
        # Pad every class to one length by repeating its last point, so one batched
        # searchsorted serves all classes.
        width = max(x.numel() for x in xs)
        pad = [torch.cat([t, t[-1:].expand(width - t.numel())]) for t in xs]
        pad_y = [torch.cat([t, t[-1:].expand(width - t.numel())]) for t in ys]
        return {"thresholds": torch.stack(pad), "values": torch.stack(pad_y)}

    def map_columns(self, p):
        # Piecewise-linear through (thresholds, values), clipped to the end points (as
        # scikit-learn's IsotonicRegression with out_of_bounds="clip").
        x, y = self._get("thresholds", p), self._get("values", p)
        p = torch.minimum(torch.maximum(p, x[:, :1]), x[:, -1:])
        right = torch.searchsorted(x, p).clamp(1, max(x.shape[1] - 1, 1))
        if x.shape[1] == 1:
            return y.expand_as(p).clone()
        left = right - 1
        x0, x1 = torch.gather(x, 1, left), torch.gather(x, 1, right)
        y0, y1 = torch.gather(y, 1, left), torch.gather(y, 1, right)
        width = x1 - x0
        t = torch.where(width > 0, (p - x0) / torch.where(width > 0, width, 1), torch.zeros_like(p))
        return y0 + t * (y1 - y0)


class _HistogramBinning(_OneVsRest):
    method, title, paper = "hb", "one-vs-rest histogram binning", "Zadrozny & Elkan 2001"
    formula = "log(renormalised per-class histogram-binning map of softmax(logits))"

    def read(self, block, k):
        rows = block.get("values")
        n_bins = len(rows[0]) if isinstance(rows, list) and rows and isinstance(rows[0], list) else 0
        if n_bins < 1:
            raise ValueError("calibration block: histogram binning `values` must be K lists of >= 1 bin value")
        values = _tensor(block, "values", (k, n_bins))
        _check_probabilities(values, "values")
        return {"values": values}

    def map_columns(self, flat):
        values = self._get("values", flat)
        n_bins = values.shape[1]
        # Right-closed equal-width bins, 0 in the first (SPEC.md, "Binning").
        index = (torch.ceil(flat * n_bins).long() - 1).clamp(0, n_bins - 1)
        return torch.gather(values, 1, index)


class _Dirichlet(_Head):
    method, title, paper = "dirichlet", "Dirichlet calibration", "Kull et al. 2019"
    formula = "weight @ log(softmax(logits)) + bias"

    def read(self, block, k):
        return {"weight": _tensor(block, "weight", (k, k)), "bias": _tensor(block, "bias", (k,))}

    def apply(self, logits):  # in float64, p floored at the smallest float64
        logp = torch.log_softmax(logits.double(), dim=-1).clamp_min(_LOG_TINY)
        return (logp @ self._get("weight", logp).T + self._get("bias", logp)).to(logits.dtype)


class _Beta(_Head):
    method, title, paper = "beta", "beta calibration", "Kull et al. 2017"
    formula = "a * log(p) - b * log(1 - p) + c of p = softmax(logits) (class 1, or each class then renormalised)"

    def read(self, block, k):  # one map (class 1's) for two classes, else one per class
        params = {key: _tensor(block, key, (1 if k == 2 else k,)) for key in "abc"}
        if not bool((params["a"] >= 0).all() and (params["b"] >= 0).all()):
            raise ValueError("calibration block: beta `a` and `b` must be >= 0")
        return params

    def apply(self, logits):  # in float64, p clipped to [eps, 1 - eps]
        p = torch.log_softmax(logits.double(), dim=-1).exp().clamp(_EPS, 1 - _EPS)
        p = p[..., 1:] if self.num_labels == 2 else p
        t = self._get("a", p) * torch.log(p) - self._get("b", p) * torch.log1p(-p) + self._get("c", p)
        if self.num_labels == 2:
            return torch.cat([torch.zeros_like(t), t], dim=-1).to(logits.dtype)
        return torch.log_softmax(nn.functional.logsigmoid(t), dim=-1).to(logits.dtype)


class _VennAbers(_OneVsRest):
    method, title, paper = "venn-abers", "inductive Venn-Abers prediction", "Vovk & Petej 2014"
    formula = "log(p1 / (1 - p0 + p1)) of the Venn-Abers tables at softmax(logits)"

    def read(self, block, k):
        n = 1 if k == 2 else k  # class 1's table for two classes, else one per class
        xs, tables = _ragged(block, "scores", n), [_ragged(block, key, n) for key in ("p0", "p1")]
        if any(t.numel() != x.numel() + 1 for x, t in zip(xs * 2, tables[0] + tables[1])):
            raise ValueError("calibration block: every row of `p0` and `p1` must be one longer than `scores`")
        if any((x[1:] <= x[:-1]).any() for x in xs):
            raise ValueError("calibration block: every row of `scores` must be strictly increasing")
        width = max(x.numel() for x in xs)  # padded with +inf, never passed by a probability
        params = {"scores": torch.stack([nn.functional.pad(x, (0, width - x.numel()), value=math.inf) for x in xs])}
        for key, rows in zip(("p0", "p1"), tables):
            params[key] = torch.stack([nn.functional.pad(t, (0, width + 1 - t.numel())) for t in rows])
            _check_probabilities(params[key], key)
        return params

    def map_columns(self, flat):
        scores = self._get("scores", flat)
        rows = flat[1:] if self.num_labels == 2 else flat
        p0 = torch.gather(self._get("p0", flat), 1, torch.searchsorted(scores, rows.contiguous(), right=True))
        p1 = torch.gather(self._get("p1", flat), 1, torch.searchsorted(scores, rows.contiguous()))
        merged = p1 / (1 - p0 + p1)
        return torch.cat([1 - merged, merged]) if self.num_labels == 2 else merged


class _RewardTemperature(_Head):
    """A reward model's pairwise temperature: its one output, the reward, divided by ``T``.

    Every ranking is unchanged; the preference probability ``sigmoid((r_a - r_b) / T)`` is the
    calibrated one. Not a subclass of :class:`_TemperatureScaling`: a causal LM does not take it.
    """

    method, title, paper = "reward-ts", "pairwise temperature scaling of a reward model", "Bradley & Terry 1952"
    formula = "reward / T"
    outputs = 1

    def read(self, block, k):
        return _temperature(block)

    def apply(self, logits):
        return logits / self._get("temperature", logits)

    def affine_map(self):
        return torch.ones(1, 1, dtype=torch.float64) / self.params["temperature"], torch.zeros(1, dtype=torch.float64)


class _MultiLabelScaling(_VectorScaling):
    # Per label, before its sigmoid; the block's `mode` says how it was fitted.
    method, paper = "multilabel", ""
    title = "per-label sigmoid scaling of a multi-label head (temperature or Platt scaling)"
    formula = "scale * logits + bias, per label, before each label's sigmoid"

    def read(self, block, k):
        params = super().read(block, k)
        if not bool((params["scale"] > 0).all()):
            raise ValueError("calibration block: multi-label `scale` values must be > 0 (1 / temperature)")
        return params


class _MultiLabelIsotonic(_Isotonic):
    method, title = "multilabel-ir", "per-label isotonic regression of a multi-label head"
    formula = "logit(isotonic map of sigmoid(logits)), per label"

    def apply(self, logits):  # each label on its own: its sigmoid, its map, back to a logit
        p = torch.sigmoid(logits.double())
        mapped = self.map_columns(p.reshape(-1, self.num_labels).T.contiguous()).T.reshape(p.shape)
        mapped = mapped.clamp(1e-30, 1 - 1e-16)  # finite logits for a map that reaches 0 or 1
        out = torch.log(mapped) - torch.log1p(-mapped)
        return torch.where(torch.isnan(p), torch.nan, out).to(logits.dtype)


HEADS: dict[str, type[_Head]] = {
    head.method: head
    for head in (
        _TemperatureScaling,
        _WeightedTemperatureScaling,
        _RegionDependentTemperatureScaling,
        _VectorScaling,
        _MatrixScaling,
        _Isotonic,
        _HistogramBinning,
        _Dirichlet,
        _Beta,
        _VennAbers,
        _MultiLabelScaling,
        _MultiLabelIsotonic,
        _RewardTemperature,
    )
}
"""Method name (as in the ``calibration`` block) -> its head class: the one table of saved maps."""

METHODS = tuple(HEADS)
CAUSAL_LM_METHODS = tuple(name for name, head in HEADS.items() if issubclass(head, _TemperatureScaling))
"""What calibrates a causal LM's next-token distribution: one temperature (fitted by TS or WTS)."""
AFFINE_METHODS = tuple(name for name, head in HEADS.items() if head.affine_map is not _Head.affine_map)
"""The methods whose map is affine in the logits (``fold_into_classifier`` folds them)."""


class CalibrationHead(nn.Module):
    """Map logits ``(..., K)`` to calibrated logits ``(..., K)``; the parameters come from a dict.

    ``config.json``'s ``calibration`` block is the parameters' one home: they are neither weights
    nor buffers (``from_pretrained`` builds models on the meta device and would leave buffers
    that are not in the checkpoint uninitialised), but CPU tensors built here from the block
    and moved to the logits' device and dtype when used. The block's ``method`` picks the map in
    ``HEADS`` (one small class per method).

    Parameters
    ----------
    calibration : dict
        The calibration block: ``{"method": ..., <parameters>}`` (module docstring).
    num_labels : int
        ``K`` (a reward head: 1, the model's one output).

    Raises
    ------
    ValueError
        When the block is missing, names an unknown method, or holds invalid parameters.
    """

    def __init__(self, calibration: dict | None, num_labels: int) -> None:
        super().__init__()
        if not isinstance(calibration, dict) or "method" not in calibration:
            raise ValueError(
                "this checkpoint has no valid `calibration` block in its config (expected a dict with a `method`); "
                "refusing to load an uncalibrated model as a calibrated one"
            )
        method = calibration["method"]
        if not isinstance(method, str) or method not in HEADS:
            raise ValueError(f"calibration block: unknown method {method!r}; expected one of {METHODS}")
        self.method = method
        self.num_labels = _check_num_labels(num_labels, HEADS[method])
        self.map = HEADS[method](calibration, self.num_labels)
        self.params = self.map.params

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        """Apply the calibration map.

        Parameters
        ----------
        logits : torch.Tensor of shape (..., K)
            Floating-point logits of the base model.

        Returns
        -------
        torch.Tensor
            Calibrated logits, same shape and dtype (IR and HB: the log of the calibrated
            probabilities); a row whose softmax is NaN stays NaN.

        Raises
        ------
        ValueError
            On a tensor that is not floating-point or whose last axis is not ``K``.
        """
        # Checked, not broadcast: 4-class logits through a 3-class VS head would raise a torch
        # error, through a TS head give a silently meaningless answer; integer logits would cast
        # the parameters to integers.
        if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
            raise ValueError(f"`logits` must be a floating-point tensor, got {getattr(logits, 'dtype', type(logits))}")
        if logits.ndim == 0 or logits.shape[-1] != self.num_labels:
            raise ValueError(
                f"`logits` must have shape (..., {self.num_labels}) for this {self.num_labels}-label head, "
                f"got {tuple(logits.shape)}"
            )
        return self.map.apply(logits)

    def affine_map(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Return ``(A, c)`` (float64) when the calibration is ``z -> A z + c``, else None.

        Returns
        -------
        tuple of torch.Tensor, or None
            ``A`` of shape ``(K, K)``, ``c`` of shape ``(K,)``.
        """
        return self.map.affine_map()
