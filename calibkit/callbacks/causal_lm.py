"""The callback's causal-LM evaluations: streamed to sums where the logits are, never concatenated.

:class:`~calibkit.callbacks.evaluation_logging.EvaluationLogger` inherits it (the temperatures
fitted through the model at the end are :class:`~calibkit.callbacks.end_fitting.EndFitter`'s); the module docstring of
:mod:`calibkit.callbacks.calibration` says why a causal LM's evaluation is streamed through
``preprocess_logits_for_metrics`` and never concatenated.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np

from calibkit.metrics.accumulator import CalibrationAccumulator

CAUSAL_LM_FITS = ("ts", "wts")
"""The default fits of a causal LM: a temperature, by TS and by WTS."""

TOP_TOKENS = 10
"""A causal LM logs the ECE of this many next tokens, the most frequent, as ``eval_ece_class_<token>``."""


def label_key(name: Any) -> str:
    """Return ``name`` as a log key: TensorBoard tags and CSV headers take no spaces or slashes."""
    return re.sub(r"[^\w.\-]+", "_", str(name)).strip("_") or "class"


class CausalLMStreaming:
    """The causal-LM methods of :class:`~calibkit.callbacks.evaluation_logging.EvaluationLogger` (a mixin)."""

    def _stream_lm_batch(self, logits, labels):
        """Add a causal LM's batch to the sums where its logits are; return an ``(N, 1)`` placeholder for them."""
        processed = self.user_preprocess(logits, labels) if self.user_preprocess is not None else None
        if self._evaluating and labels is not None:
            if self._lm_accumulator is None:
                self._lm_accumulator = CalibrationAccumulator(self._report_metrics(), settings=self.settings)
            if self._lm_error is None:
                try:
                    self._lm_accumulator.update(logits, labels)
                except ValueError as exc:  # NaN logits (fp16 overflow), ...: this evaluation's metrics are NaN
                    self._lm_error = str(exc)
        if processed is not None:
            return processed
        return logits.new_zeros((logits.shape[0], 1))

    def _lm_report(self) -> dict[str, float]:
        """Return the report of a causal LM's streamed evaluation (all processes' sums), flattened for the logs."""
        accumulator, error = self._lm_accumulator, self._lm_error
        self._lm_accumulator = None
        if error is None and accumulator is None:
            error = "the evaluation had no batch with labels"
        if error is None:
            try:
                import torch.distributed as dist

                if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
                    accumulator.all_reduce()
            except ValueError as exc:
                error = str(exc)
        if error is not None:
            warnings.warn(
                f"calibkit: calibration metrics set to NaN for this evaluation: {error}", RuntimeWarning, stacklevel=3
            )
            return self._nan_metrics()
        self.class_counts = accumulator.statistics.to_numpy().label_counts()  # labels per token: WTS's
        return self._safely(lambda: self._flatten_lm(accumulator.compute()), None)

    def _flatten_lm(self, report: dict[str, Any]) -> dict[str, float]:
        """Flatten a causal LM's report: the metrics and the ECE of the most frequent next tokens, not of each."""
        out = {name: float(report[name]) for name in self.metric_names if name != "subset_ece"}
        if "ace" in out and report.get("ace_error_bound") is not None:
            out["ace_error_bound"] = float(report["ace_error_bound"])
        counts = self.class_counts
        out["next_tokens_seen"] = float(np.count_nonzero(counts))
        if (self.per_class or "subset_ece" in self.metric_names) and "subset_ece" in report:
            top = [k for k in np.argsort(-counts, kind="stable")[:TOP_TOKENS] if counts[k] > 0]
            out.update(
                {f"ece_class_{name}": float(report["subset_ece"][k]) for name, k in zip(self._token_names(top), top)}
            )
        return out

    def _token_names(self, ids: list[int]) -> list[str]:
        """Keys for token ids: the tokenizer's text of each where there is one, else the id."""
        tokenizer = getattr(self.trainer, "processing_class", None)
        names = []
        for token in ids:
            text = None
            if tokenizer is not None and hasattr(tokenizer, "convert_ids_to_tokens"):
                try:
                    text = tokenizer.convert_ids_to_tokens(int(token))
                except (IndexError, KeyError, ValueError, TypeError):
                    text = None
            key = label_key(text) if text else ""
            names.append(f"{token}_{key}" if key else str(token))
        return names
