"""Calibrated ``transformers`` models: a fine-tuned classifier followed by a calibration head.

This file is self-contained on purpose: it imports only ``torch`` and ``transformers``, because
``save_pretrained`` copies it next to the weights (``register_for_auto_class``), so that
``AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True)`` loads a
calibrated model on a machine without calibkit.

The calibration parameters live in ``config.json`` under ``calibration`` (never ``temperature``,
which generation code reads), e.g. ``{"method": "ts", "temperature": 1.7}``. The head is built
from that block and checked when the model is built, so a checkpoint with a missing or invalid
block fails at load time instead of silently giving uncalibrated scores.

Each method's map (SPEC.md, "Calibrators") is a small class in :data:`HEADS`: its parameters and
their checks, its forward, its name, paper and formula for the model card; :class:`CalibrationHead`
picks one by the block's ``method``. Maps of probabilities (IR, HB, Dirichlet, beta, Venn-Abers)
return the log of the calibrated probabilities, so ``softmax`` of the head's output is the
calibrated distribution. A multi-label head (a sigmoid per label: ``multilabel``,
``multilabel-ir``) keeps the base model's ``problem_type``, so the loss with labels is the binary
cross-entropy and pipelines apply the sigmoid.
"""

from __future__ import annotations

import functools
import inspect
import math
import os

import torch
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    PretrainedConfig,
    PreTrainedModel,
)

MULTI_LABEL = "multi_label_classification"  # transformers' problem_type of a sigmoid-per-label head
TASKS = ("sequence-classification", "token-classification", "causal-lm")
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


def _check_probabilities(values: torch.Tensor, key: str) -> None:
    # IR and HB map to frequencies: a value outside [0, 1] would give negative "probabilities"
    # (NaN after the log) or a row renormalised into something meaningless.
    if ((values < 0) | (values > 1)).any():
        raise ValueError(f"calibration block: every value of `{key}` must lie in [0, 1]")


def _check_num_labels(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise ValueError(f"`num_labels` must be an integer >= 2, got {value!r}")
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
        temperature = _number(block, "temperature")
        if temperature <= 0:
            raise ValueError(f"calibration block: `temperature` must be > 0, got {temperature}")
        return {"temperature": _cpu(temperature)}

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
    ``HEADS`` (one small class per method, in this file).

    Parameters
    ----------
    calibration : dict
        The calibration block: ``{"method": ..., <parameters>}`` (module docstring).
    num_labels : int
        ``K``.

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
        self.num_labels = _check_num_labels(num_labels)
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


class CalibratedConfig(PretrainedConfig):
    """Config of a calibrated model: the base model's config (as a dict) and the calibration block.

    Parameters
    ----------
    base_config : dict, optional
        The base model's ``config.to_dict()``.
    calibration : dict, optional
        The calibration block (:class:`CalibrationHead`).
    task : {"sequence-classification", "token-classification", "causal-lm"}, default "sequence-classification"
        Which head the base model has.
    """

    model_type = "calibkit-calibrated"

    base_config: dict | None = None
    calibration: dict | None = None
    task: str = "sequence-classification"


_AUTO_CLASSES = {
    "sequence-classification": AutoModelForSequenceClassification,
    "token-classification": AutoModelForTokenClassification,
    "causal-lm": AutoModelForCausalLM,
}


def output_classes(model: PreTrainedModel) -> int:
    """Return the classes of a model's logits: ``num_labels``, or a causal LM's vocabulary (its head's outputs).

    Parameters
    ----------
    model : transformers.PreTrainedModel

    Returns
    -------
    int
    """
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is not None and getattr(head, "out_features", None):
        return int(head.out_features)
    vocabulary = getattr(model.config, "vocab_size", None)
    return int(vocabulary) if vocabulary else int(model.config.num_labels)


def _card_name(method) -> str:
    head = HEADS.get(method) if isinstance(method, str) else None
    if head is None:
        return str(method)
    return f"{head.title} ({head.paper})" if head.paper else head.title


def model_card(config: CalibratedConfig) -> str:
    """Write the README.md of a calibrated model: method, parameters, before/after metrics on the calibration set.

    Parameters
    ----------
    config : CalibratedConfig
        The calibrated model's config.

    Returns
    -------
    str
        The Markdown card, with its YAML header.
    """
    block = config.calibration or {}
    method = block.get("method", "?")
    base_type = (config.base_config or {}).get("model_type", "?")
    task = config.task
    auto = {"token-classification": "AutoModelForTokenClassification", "causal-lm": "AutoModelForCausalLM"}.get(
        task, "AutoModelForSequenceClassification"
    )
    tag = {"token-classification": "token-classification", "causal-lm": "text-generation"}.get(
        task, "text-classification"
    )
    lines = [
        "---",
        "library_name: transformers",
        "tags:",
        "- calibkit",
        "- calibration",
        f"- {method}",
        f"pipeline_tag: {tag}",
        "---",
        "",
        f"# Calibrated {base_type} model ({method})",
        "",
        f"A fine-tuned `{base_type}` {task.replace('-', ' ')} model whose logits pass through "
        f"{_card_name(method)}: calibrated logits = `{HEADS[method].formula if method in HEADS else '?'}`.",
        "Made with [calibkit](https://github.com/calibkit/calibkit).",
        "",
        "## Calibration parameters",
        "",
    ]
    for key, value in block.items():
        if key in ("method", "metrics"):
            continue
        if isinstance(value, (int, float)):
            lines.append(f"- `{key}` = {value:.6g}")
        elif isinstance(value, str):
            lines.append(f"- `{key}` = {value}")
        else:
            lines.append(f"- `{key}`: see `calibration.{key}` in config.json")
    metrics = block.get("metrics") or {}
    before, after = metrics.get("before") or {}, metrics.get("after") or {}
    if before and after:
        n = metrics.get("n")
        lines += [
            "",
            "## Calibration metrics on the calibration set" + (f" ({n} predictions)" if n else ""),
            "",
            "Accuracy: higher is better. ECD and ESCE are signed, 0 is calibrated:",
            "ECD > 0 and ESCE < 0 mean over-confident. The rest: lower is better.",
            "",
            "| metric | uncalibrated | calibrated |",
            "|---|---|---|",
        ]
        for name in before:
            if name in after:
                lines.append(f"| {name} | {before[name]:.4f} | {after[name]:.4f} |")
        lines += [
            "",
            "These figures are measured on the data the calibrator was fitted on; check them on held-out data.",
        ]
    lines += [
        "",
        "## Usage",
        "",
        "```python",
        f"from transformers import {auto}",
        "",
        f'model = {auto}.from_pretrained("path/or/hub-id", trust_remote_code=True)',
        "```",
        "",
        "`trust_remote_code=True` loads `modeling_calibkit.py` (torch and transformers only) shipped with the",
        "weights; with calibkit installed, `calibkit.CalibratedModelForSequenceClassification.from_pretrained`",
        "(or the token-classification or causal-LM class) loads it without remote code.",
        "",
    ]
    return "\n".join(lines)


class _ForwardWithTheBaseInputs:
    """``forward``, bound with the base model's signature (and ``labels``).

    The calibrated forward takes the base model's inputs as ``*args, **kwargs``; tools that read a
    model's inputs from its forward's signature saw none: ``Trainer`` (``remove_unused_columns``,
    its default) dropped ``input_ids`` and ``attention_mask``, and ``trainer.predict`` on a
    calibrated model failed.
    """

    def __get__(self, obj, objtype=None):
        if obj is None:
            return objtype._calibrated_forward
        bound = functools.partial(objtype._calibrated_forward, obj)
        bound.__doc__ = objtype._calibrated_forward.__doc__
        signature = obj.__dict__.get("_forward_signature")  # read once a model: a lookup per forward call
        if signature is None:
            try:
                base = inspect.signature(obj.model.forward)
            except (AttributeError, TypeError, ValueError):  # no base model yet, or no signature to read
                return bound
            parameters = list(base.parameters.values())
            if "labels" not in base.parameters:
                parameters.append(inspect.Parameter("labels", inspect.Parameter.KEYWORD_ONLY, default=None))
            signature = base.replace(parameters=sorted(parameters, key=lambda p: p.kind))
            obj.__dict__["_forward_signature"] = signature
        bound.__signature__ = signature
        return bound


class _CalibratedModel(PreTrainedModel):
    config_class = CalibratedConfig
    base_model_prefix = "calibrated"
    _task = ""

    def __init__(self, config: CalibratedConfig, base_model: PreTrainedModel | None = None) -> None:
        super().__init__(config)
        if config.task != self._task:
            raise ValueError(f"{type(self).__name__} needs task={self._task!r}, the config says {config.task!r}")
        if base_model is None:
            if not isinstance(config.base_config, dict) or "model_type" not in config.base_config:
                raise ValueError("the calibrated model's config has no valid `base_config` (a dict with `model_type`)")
            base = dict(config.base_config)
            base_config = AutoConfig.for_model(base.pop("model_type"), **base)
            base_model = _AUTO_CLASSES[self._task].from_config(base_config)
        self.model = base_model
        classes = output_classes(base_model) if self._task == "causal-lm" else base_model.config.num_labels
        self.calibration_head = CalibrationHead(config.calibration, classes)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        # The wrapper owns no weights: the base model's are trained, the head's come from config.
        return

    def save_pretrained(self, save_directory, *args, **kwargs):
        """Save as ``PreTrainedModel.save_pretrained`` does, plus a model card (README.md) stating the calibration.

        Parameters
        ----------
        save_directory : str or os.PathLike
            The folder.
        *args, **kwargs
            As ``PreTrainedModel.save_pretrained``.

        Returns
        -------
        object
            What ``PreTrainedModel.save_pretrained`` returns.
        """
        result = super().save_pretrained(save_directory, *args, **kwargs)
        if kwargs.get("is_main_process", True):
            with open(os.path.join(save_directory, "README.md"), "w", encoding="utf-8") as f:
                f.write(model_card(self.config))
        return result

    def _upload_modified_files(self, working_dir, *args, **kwargs):
        # push_to_hub writes a generic card over ours just before uploading: put ours back.
        with open(os.path.join(working_dir, "README.md"), "w", encoding="utf-8") as f:
            f.write(model_card(self.config))
        return super()._upload_modified_files(working_dir, *args, **kwargs)

    def get_input_embeddings(self) -> nn.Module:
        """Return the base model's input embeddings.

        Returns
        -------
        torch.nn.Module
        """
        return self.model.get_input_embeddings()

    def _calibrated_forward(self, *args, labels: torch.Tensor | None = None, **kwargs):
        """Run the base model and replace its ``logits`` by calibrated ones (and the loss, if labels).

        Parameters
        ----------
        *args, **kwargs
            The base model's inputs (``input_ids``, ``attention_mask``, ...).
        labels : torch.Tensor, optional
            Labels (-100 ignored): the loss is then the cross-entropy of the calibrated logits;
            for a multi-label head (``problem_type="multi_label_classification"``), multi-hot
            labels of the logits' shape and the binary cross-entropy.

        Returns
        -------
        transformers.utils.ModelOutput or tuple
            The base model's output type, with calibrated ``logits`` (and ``loss``, first); with
            ``return_dict=False`` (or a config that says so) its tuple, as the base model gives.
        """
        return_dict = kwargs.pop("return_dict", None)
        return_dict = getattr(self.config, "return_dict", True) if return_dict is None else return_dict
        kwargs["return_dict"] = True
        output = self.model(*args, **kwargs)
        logits = self.calibration_head(output.logits)
        output["logits"] = logits  # item assignment: transformers 4.x set only the attribute for a new key
        if labels is not None and self.config.problem_type == MULTI_LABEL:  # a sigmoid per label
            if not isinstance(labels, torch.Tensor) or tuple(labels.shape) != tuple(logits.shape):
                raise ValueError(f"`labels` must be multi-hot of the logits' shape {tuple(logits.shape)}")
            target = labels.to(logits.device).float()
            counted = (target != -100).float()  # -100 entries are skipped, as everywhere in calibkit
            loss = nn.functional.binary_cross_entropy_with_logits(
                logits.float(), target.clamp(0, 1), weight=counted, reduction="sum"
            )
            output["loss"] = loss / counted.sum().clamp_min(1.0)
        elif labels is not None:  # the loss of the calibrated scores, not the base model's
            output["loss"] = nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]).float(), _loss_labels(labels, logits), ignore_index=-100
            )
        # rebuilt in the output type's field order: a loss set afterwards came after the logits in
        # to_tuple() and output[0], where every transformers head puts it first
        output = type(output)(**{name: output[name] for name in ("loss", *output.keys()) if name in output})
        return output if return_dict else output.to_tuple()

    forward = _ForwardWithTheBaseInputs()


def _loss_labels(labels, logits: torch.Tensor) -> torch.Tensor:
    """Return ``labels`` as a flat int64 tensor on the logits' device, checked first.

    cross_entropy raises an IndexError (CPU) or a device-side assert (CUDA) on a label out of
    range, a RuntimeError on float labels, and a cast would wrap a uint64 2**64 - 100 to -100
    (silently ignored).
    """
    if not isinstance(labels, torch.Tensor):
        try:
            labels = torch.as_tensor(labels)
        except (TypeError, ValueError, RuntimeError, OverflowError) as exc:
            raise ValueError(f"`labels` could not be read as a tensor ({exc})") from exc
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(f"`labels` must be an integer tensor, got {labels.dtype}")
    k = logits.shape[-1]
    rows = logits.numel() // k
    if labels.numel() != rows:  # same leniency as transformers' heads: any shape of that many labels
        raise ValueError(
            f"`labels` has shape {tuple(labels.shape)} but logits of shape {tuple(logits.shape)} need "
            f"{rows} labels, shape {tuple(logits.shape[:-1])}"
        )
    if labels.dtype == getattr(torch, "uint64", None) and labels.numel():
        top = int(labels.cpu().numpy().max())  # torch has no comparison for uint64
        if top > torch.iinfo(torch.int64).max:
            raise ValueError(f"`labels` has the value {top}, which does not fit in int64")
    flat = labels.reshape(-1).to(device=logits.device, dtype=torch.long)
    bad = (flat != -100) & ((flat < 0) | (flat >= k))
    if bad.any():
        i = rest = int(torch.nonzero(bad)[0, 0])
        where = []
        for size in reversed(tuple(labels.shape) or (1,)):  # the position in the labels' own shape
            rest, r = divmod(rest, size)
            where.insert(0, r)
        raise ValueError(
            f"`labels` must lie in [0, {k}) or equal -100; got {int(flat[i])} at position "
            f"{where[0] if len(where) == 1 else tuple(where)}"
        )
    return flat


class CalibratedModelForSequenceClassification(_CalibratedModel):
    """A sequence classifier whose logits are calibrated; ``forward`` returns the base output type.

    Parameters
    ----------
    config : CalibratedConfig
        With ``task="sequence-classification"``; the base model is built from its ``base_config``
        when ``base_model`` is not given (as ``from_pretrained`` does).
    base_model : transformers.PreTrainedModel, optional
        The fine-tuned model to wrap (not copied).

    Raises
    ------
    ValueError
        When the config's task, base config or calibration block is invalid.
    """

    _task = "sequence-classification"


class CalibratedModelForTokenClassification(_CalibratedModel):
    """A token classifier whose logits are calibrated; ``forward`` returns the base output type.

    Parameters
    ----------
    config : CalibratedConfig
        With ``task="token-classification"``; the base model is built from its ``base_config``
        when ``base_model`` is not given (as ``from_pretrained`` does).
    base_model : transformers.PreTrainedModel, optional
        The fine-tuned model to wrap (not copied).

    Raises
    ------
    ValueError
        When the config's task, base config or calibration block is invalid.
    """

    _task = "token-classification"


# save_pretrained copies this file next to the weights and writes `auto_map` into config.json,
# so the Auto classes can load a calibrated model with trust_remote_code=True.
CalibratedConfig.register_for_auto_class()
CalibratedModelForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")
CalibratedModelForTokenClassification.register_for_auto_class("AutoModelForTokenClassification")
