"""What the callback does at each evaluation: calibration metrics computed, streamed and logged.

:class:`EvaluationLogger` is the half of :class:`~calibkit.callbacks.CalibrationCallback` that
sees the predictions: it composes the Trainer's ``compute_metrics`` and
``preprocess_logits_for_metrics`` with calibkit's, patches the evaluation loop so that the keys
appear (as NaN) when no prediction came, streams a ``batch_eval_metrics`` evaluation into a
:class:`~calibkit.CalibrationAccumulator` (a causal LM's through
:class:`~calibkit.callbacks.causal_lm.CausalLMStreaming`), and keeps the last evaluation's
logits, bounded, for the fits at the end (:mod:`calibkit.callbacks.end_fitting`). The module
docstring of :mod:`calibkit.callbacks.calibration` says why the metrics go through
``compute_metrics``. It needs no Trainer to be tested: a fake ``EvalPrediction`` will do.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from calibkit.callbacks.causal_lm import CausalLMStreaming, label_key
from calibkit.metrics.accumulator import CalibrationAccumulator
from calibkit.metrics.registry import HELD, METRICS, metric_names
from calibkit.metrics.settings import DEFAULTS, CalibrationSettings
from calibkit.metrics.validation import check_bool

__all__ = ["MAX_FIT_ROWS", "EvaluationLogger", "check_max_fit_rows", "concat_batches", "logged_metric_names"]

MAX_FIT_ROWS = 2_000_000
"""The default bound on the predictions kept for the fits at the end of training."""


def logged_metric_names(metrics: Iterable[str] | str) -> tuple[str, ...]:
    """Return the metrics a callback logs: checked names from :data:`calibkit.METRICS`, or all for ``"all"``.

    Parameters
    ----------
    metrics : iterable of str or "all"

    Returns
    -------
    tuple of str

    Raises
    ------
    ValueError
        On an unknown name, ``"accuracy"`` (always logged), or a metric that needs the whole set
        held (the callback streams).
    """
    if isinstance(metrics, str) and metrics == "all":
        return METRICS
    try:
        names = metric_names(metrics)
    except ValueError:
        names = ("accuracy",)  # refused just below, with the message of this door
    if "accuracy" in names:  # eval_accuracy is always logged; naming it is a mistake
        raise ValueError(f"`metrics` must be names from {list(METRICS)} or 'all', got {metrics!r}")
    if any(m in HELD for m in names):
        metric_names(names, streaming=True)  # refused (the callback streams), saying where it is given
    return names


def check_max_fit_rows(max_fit_rows: Any) -> int:
    """Return ``max_fit_rows``, checked: an integer >= 1 (a ValueError naming it otherwise)."""
    if isinstance(max_fit_rows, bool) or not isinstance(max_fit_rows, int) or max_fit_rows < 1:
        raise ValueError(f"`max_fit_rows` must be an integer >= 1, got {max_fit_rows!r}")
    return max_fit_rows


def concat_batches(batches: Any, pad: float) -> np.ndarray:
    """Concatenate per-batch arrays (``eval_do_concat_batches=False``).

    Token batches of different lengths are padded with ``pad`` (labels: -100, so the padding is
    never read).

    Parameters
    ----------
    batches : list of array-like, or an array
        An array is returned as it is.
    pad : float
        The value of the padding.

    Returns
    -------
    ndarray
    """
    if not isinstance(batches, (list, tuple)):
        return batches
    arrays = [np.asarray(b) for b in batches]
    if not arrays:
        return np.zeros((0,))
    if arrays[0].ndim >= 2 and len({a.shape[1] for a in arrays}) > 1:  # tokens: pad to the longest
        width = max(a.shape[1] for a in arrays)
        arrays = [
            np.pad(a, [(0, 0), (0, width - a.shape[1])] + [(0, 0)] * (a.ndim - 2), constant_values=pad) for a in arrays
        ]
    return np.concatenate(arrays)


class EvaluationLogger(CausalLMStreaming):
    """Calibration metrics of every evaluation, returned through ``compute_metrics``; the last logits kept.

    Parameters
    ----------
    metrics : iterable of str or "all"
        As :func:`logged_metric_names` takes them.
    per_class : bool, default True
        Also log each class's subset ECE as ``<prefix>_ece_class_<label name>``.
    max_fit_rows : int, default :data:`MAX_FIT_ROWS`
        Bound on the predictions kept in :attr:`last_predictions`.
    keep_fit_rows : bool, default True
        Keep the last evaluation's predictions for the fits at the end (False: nothing to fit).
    settings : CalibrationSettings, optional
        The metrics' settings (``from_logits`` is always True: the Trainer hands over logits).

    Attributes
    ----------
    last_predictions : tuple of ndarray or None
        The last evaluation's ``(logits, labels)``, bounded by ``max_fit_rows``.
    no_fit_reason : str
        Why :attr:`last_predictions` is None, for the warning of the fits.
    class_counts : ndarray or None
        A causal LM's label counts per token, from the last streamed evaluation (WTS's weights).
    """

    def __init__(
        self,
        metrics: Iterable[str] | str,
        *,
        per_class: bool = True,
        max_fit_rows: int = MAX_FIT_ROWS,
        keep_fit_rows: bool = True,
        settings: CalibrationSettings | None = None,
    ) -> None:
        names = logged_metric_names(metrics)
        self.metric_names = names
        self.per_class = check_bool(per_class, "per_class")
        self.max_fit_rows = check_max_fit_rows(max_fit_rows)
        self.keep_fit_rows = check_bool(keep_fit_rows, "keep_fit_rows")
        self.settings = (DEFAULTS if settings is None else settings).replace(from_logits=True)
        self.ignore_index = self.settings.ignore_index
        # Computed metrics: the requested ones, plus subset_ece for the per-class keys.
        self._computed = names + (("subset_ece",) if self.per_class and "subset_ece" not in names else ())
        self.trainer = None
        self.user_compute_metrics: Callable | None = None
        self.user_preprocess: Callable | None = None
        self.last_predictions: tuple[np.ndarray, np.ndarray] | None = None
        self.no_fit_reason = "no evaluation with labels ran during training"
        self.class_counts: np.ndarray | None = None
        self._accumulator: CalibrationAccumulator | None = None
        self._lm_accumulator: CalibrationAccumulator | None = None
        self._lm_error: str | None = None
        self._evaluating = True

    def attach(self, trainer) -> None:
        """Compose the trainer's ``compute_metrics`` (and ``preprocess_logits_for_metrics``) with calibkit's.

        Parameters
        ----------
        trainer : transformers.Trainer
            Its own ``compute_metrics`` and ``preprocess_logits_for_metrics`` keep running.
        """
        self.trainer = trainer
        self.user_compute_metrics = trainer.compute_metrics
        self.user_preprocess = trainer.preprocess_logits_for_metrics
        trainer.compute_metrics = self.compute_metrics
        if self.user_preprocess is not None or self.settings.next_token:
            trainer.preprocess_logits_for_metrics = self.preprocess_logits_for_metrics
        self.wrap_evaluation_loop(trainer)

    def wrap_evaluation_loop(self, trainer) -> None:
        """Make ``trainer.evaluation_loop`` log calibkit's keys (as NaN) when ``compute_metrics`` is not called.

        Parameters
        ----------
        trainer : transformers.Trainer
        """
        # compute_metrics is not called at all when the evaluation set is empty or has no
        # labels; the keys must still appear (as NaN) so that logs and metric_for_best_model agree.
        original = trainer.evaluation_loop

        def evaluation_loop(*args, **kwargs):
            # trainer.predict() runs this loop too: there, a user's preprocess_logits_for_metrics
            # output is returned untouched (no raw logits beside it) and nothing is filled in.
            description = kwargs.get("description", args[1] if len(args) > 1 else "Evaluation")
            self._evaluating = description != "Prediction"
            self._lm_accumulator, self._lm_error = None, None  # a causal LM's sums: this evaluation's only
            try:
                output = original(*args, **kwargs)
            finally:
                evaluating, self._evaluating = self._evaluating, True
            if not evaluating:
                return output
            prefix = kwargs.get("metric_key_prefix", args[4] if len(args) > 4 else "eval")
            ours = [f"{prefix}_{name}" for name in self.metric_names if name != "subset_ece"]
            if output.metrics is not None and ours and not any(key in output.metrics for key in ours):
                warnings.warn(
                    "calibkit: this evaluation produced no predictions with labels (empty evaluation set?); "
                    "calibration metrics are logged as NaN",
                    RuntimeWarning,
                    stacklevel=2,
                )
                for name, value in self._nan_metrics().items():
                    output.metrics.setdefault(f"{prefix}_{name}", value)
            return output

        trainer.evaluation_loop = evaluation_loop

    def preprocess_logits_for_metrics(self, logits, labels):
        """Run the user's preprocessing and, in evaluation, keep the raw logits for calibkit beside its output.

        Parameters
        ----------
        logits : torch.Tensor
            The model's logits for a batch.
        labels : torch.Tensor
            The batch's labels.

        Returns
        -------
        object
            ``(user_output, logits)`` in evaluation; the user's output alone in ``predict()``.
        """
        if self.settings.next_token:
            return self._stream_lm_batch(logits, labels)
        processed = self.user_preprocess(logits, labels)
        return (processed, logits) if self._evaluating else processed

    def _class_names(self, num_classes: int) -> list[str]:
        id2label = getattr(getattr(getattr(self.trainer, "model", None), "config", None), "id2label", None) or {}
        return [label_key(id2label.get(k, k)) for k in range(num_classes)]

    def _nan_metrics(self, num_classes: int | None = None) -> dict[str, float]:
        if self.settings.multilabel:
            keys = [k for name in self.metric_names for k in self._multilabel_keys(name)]
            out = dict.fromkeys(keys, math.nan)
            if self.per_class and num_classes:
                out.update({f"ece_label_{c}": math.nan for c in self._class_names(num_classes)})
            return out
        out = {name: math.nan for name in self.metric_names if name != "subset_ece"}
        if self.per_class and num_classes:
            out.update({f"ece_class_{c}": math.nan for c in self._class_names(num_classes)})
        return out

    @staticmethod
    def _multilabel_keys(name: str) -> tuple[str, ...]:
        """Return the logged keys of metric ``name`` for a multi-label model (macro, micro; a summary as itself)."""
        from calibkit.metrics.multilabel import LABEL_METRICS, LABEL_SUMMARIES

        if name in LABEL_METRICS:
            return (name, f"{name}_micro")
        return (name,) if name in LABEL_SUMMARIES else ()  # SCE, per-class ECE, ...: not defined per label

    def _flatten_multilabel(self, report: dict[str, Any]) -> dict[str, float]:
        out: dict[str, float] = {}
        for name in self.metric_names:
            keys = self._multilabel_keys(name)
            if len(keys) == 2:
                out[keys[0]], out[keys[1]] = float(report["macro"][name]), float(report["micro"][name])
            elif keys and name in report:
                out[name] = float(report[name])
        if self.per_class or "subset_ece" in self.metric_names:
            per_label = np.asarray(report["per_label"]["ece"], dtype=np.float64)
            out.update({f"ece_label_{c}": float(v) for c, v in zip(self._class_names(len(per_label)), per_label)})
        return out

    def _flatten(self, report: dict[str, Any]) -> dict[str, float]:
        if self.settings.multilabel:
            return self._flatten_multilabel(report)
        out = {name: float(report[name]) for name in self.metric_names if name != "subset_ece"}
        if self.per_class or "subset_ece" in self.metric_names:
            per_class = np.asarray(report["subset_ece"], dtype=np.float64)
            out.update({f"ece_class_{c}": float(v) for c, v in zip(self._class_names(len(per_class)), per_class)})
        return out

    def _split(self, eval_pred, compute_result: bool | None = None):
        """Return what the user's compute_metrics should see, the raw logits and the labels."""
        batches = compute_result is None and self._batch_lists()
        logits, labels, user = self._split_batches(eval_pred, batches)
        if batches:
            # lists of per-batch arrays: the whole set is their concatenation (tokens padded)
            logits, labels = concat_batches(logits, 0.0), concat_batches(labels, self.ignore_index)
        return user, logits, labels

    def _batch_lists(self) -> bool:
        """Tell whether the Trainer hands a whole set over as lists of per-batch arrays.

        So it does with ``eval_do_concat_batches=False``; with ``batch_eval_metrics`` each call
        is one batch anyway.
        """
        return getattr(getattr(self.trainer, "args", None), "eval_do_concat_batches", True) is False

    def _split_batches(self, eval_pred, batches: bool):
        """:meth:`_split`, batches as the Trainer hands them over: the logits, the labels, the user's view."""
        predictions = eval_pred.predictions
        if self.user_preprocess is not None:
            if batches:  # per batch, the (user's output, logits) pair of our preprocess wrapper
                user_predictions, logits = [b[0] for b in predictions], [b[1] for b in predictions]
            else:
                user_predictions, logits = predictions
            from transformers import EvalPrediction

            fields = {"predictions": user_predictions, "label_ids": eval_pred.label_ids}
            for extra in ("inputs", "losses"):
                if getattr(eval_pred, extra, None) is not None:
                    fields[extra] = getattr(eval_pred, extra)
            return logits, eval_pred.label_ids, EvalPrediction(**fields)
        if batches:  # a list of batches, each the model's output: its logits, or a tuple led by them
            logits = [batch[0] if isinstance(batch, (tuple, list)) else batch for batch in predictions]
        else:
            logits = predictions[0] if isinstance(predictions, (tuple, list)) else predictions
        return logits, eval_pred.label_ids, eval_pred

    def _safely(self, fn: Callable[[], dict[str, float]], num_classes: int | None) -> dict[str, float]:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # absent classes / empty regions: expected mid-training
                return fn()
        except ValueError as exc:  # NaN/inf logits (fp16 overflow), no labelled sample, ...
            warnings.warn(
                f"calibkit: calibration metrics set to NaN for this evaluation: {exc}", RuntimeWarning, stacklevel=2
            )
            return self._nan_metrics(num_classes)

    def compute_metrics(self, eval_pred, compute_result: bool | None = None) -> dict[str, float]:
        """Return the user's metrics (keys unchanged) plus calibkit's.

        Parameters
        ----------
        eval_pred : transformers.EvalPrediction
            The (gathered) predictions and label ids of the evaluation, or of one batch with
            ``batch_eval_metrics``.
        compute_result : bool, optional
            As in ``batch_eval_metrics``: None for the whole set at once; False for a batch to
            accumulate; True for the last batch, which reports.

        Returns
        -------
        dict of str to float
            The calibration metrics by name (per-class ECEs as ``ece_class_<label>``) and the
            user's; a user key wins a clash, with a warning. Only the user's metrics for a batch
            that does not report.
        """
        if self.user_preprocess is not None and not self._evaluating:  # predict(): no raw logits here
            return self._user_metrics(eval_pred, compute_result)
        if self.settings.next_token:  # streamed by preprocess_logits_for_metrics: the sums are here already
            user = self._user_metrics(eval_pred, compute_result)
            if compute_result is False:
                return user
            return self._with_user(self._lm_report(), user)
        user_pred, logits, labels = self._split(eval_pred, compute_result)
        user = self._user_metrics(user_pred, compute_result)
        num_classes = int(logits.shape[-1]) if getattr(logits, "ndim", 0) >= 2 else None
        if compute_result is None:  # the whole (gathered) evaluation set at once
            self._keep_for_fit(logits, labels)
            ours = self._safely(lambda: self._flatten(self._report(logits, labels)), num_classes)
        else:  # batch_eval_metrics: stream, then report on the last batch
            ours = self._stream(logits, labels, compute_result, num_classes)
            if not compute_result:
                return user
        return self._with_user(ours, user)

    @staticmethod
    def _with_user(ours: dict[str, float], user: dict[str, Any]) -> dict[str, Any]:
        clashes = sorted(set(user) & set(ours))
        if clashes:
            warnings.warn(
                f"calibkit: your compute_metrics already returns {clashes}; keeping your values", stacklevel=3
            )
        return {**ours, **user}

    def _user_metrics(self, eval_pred, compute_result: bool | None) -> dict[str, Any]:
        if self.user_compute_metrics is None:
            return {}
        if compute_result is None:
            return dict(self.user_compute_metrics(eval_pred) or {})
        return dict(self.user_compute_metrics(eval_pred, compute_result=compute_result) or {})

    def _report(self, logits, labels) -> dict[str, Any]:
        from calibkit.metrics import calibration_report

        return calibration_report(logits, labels, metrics=self._report_metrics(), settings=self.settings)

    def _report_metrics(self) -> tuple[str, ...]:
        """Return what the report computes: multi-label reports take the label metrics (ECE at least, for CECE)."""
        if not self.settings.multilabel:
            return self._computed
        from calibkit.metrics.multilabel import LABEL_METRICS

        # ECE always: the per-label ECEs feed the logged eval_ece_label_* and the summaries over labels
        return tuple(dict.fromkeys(m for m in (*self._computed, "ece") if m in LABEL_METRICS))

    def _stream(self, logits, labels, compute_result: bool, num_classes: int | None) -> dict[str, float]:
        if self._accumulator is None:
            self._accumulator = CalibrationAccumulator(self._report_metrics(), settings=self.settings)
            self._stream_error: str | None = None
            self._fit_rows: list[tuple[np.ndarray, np.ndarray]] = []
            self._fit_budget = self.max_fit_rows if self.keep_fit_rows else 0
        if self._stream_error is None:
            try:
                self._accumulator.update(logits, labels)
            except ValueError as exc:
                self._stream_error = str(exc)
            else:
                self._keep_batch_for_fit(logits, labels)
        if not compute_result:
            return {}
        accumulator, error = self._accumulator, self._stream_error
        self._accumulator = None
        if error is not None:
            # Neither part of this evaluation nor an earlier epoch's logits: no fit at all, and say why.
            self.last_predictions = None
            self.no_fit_reason = f"the last evaluation's logits could not be used ({error})"
        elif self._fit_rows:
            self.last_predictions = tuple(np.concatenate(part) for part in zip(*self._fit_rows))
        elif self.keep_fit_rows:
            self.last_predictions = None
            self.no_fit_reason = "the last evaluation had no labelled prediction"
        if error is not None:
            warnings.warn(
                f"calibkit: calibration metrics set to NaN for this evaluation: {error}", RuntimeWarning, stacklevel=2
            )
            return self._nan_metrics(num_classes)
        return self._safely(lambda: self._flatten_streamed(accumulator.compute()), num_classes)

    def _flatten_streamed(self, report: dict[str, Any]) -> dict[str, float]:
        """:meth:`_flatten`, and with ACE its bound: streamed, ACE is an estimate (exact over the whole set)."""
        out = self._flatten(report)
        bound = report.get("ace_error_bound")
        if isinstance(bound, dict):  # multi-label: the bounds of the macro (logged as eval_ace) and micro ACE
            if "ace" in out:
                out["ace_error_bound"], out["ace_error_bound_micro"] = float(bound["macro"]), float(bound["micro"])
        elif "ace" in out and bound is not None:
            out["ace_error_bound"] = float(bound)
        return out

    def _keep_batch_for_fit(self, logits, labels) -> None:
        """batch_eval_metrics: copy the labelled rows of this batch while the ``max_fit_rows`` budget lasts."""
        if self._fit_budget <= 0:
            return
        z = logits.detach().cpu().float().numpy() if hasattr(logits, "detach") else np.asarray(logits)
        y = labels.detach().cpu().numpy() if hasattr(labels, "detach") else np.asarray(labels)
        if self.settings.multilabel:  # rows of multi-hot labels: keep a row with any labelled decision
            keep = np.flatnonzero((y != self.ignore_index).any(axis=-1))[: self._fit_budget]
            self._fit_rows.append((z[keep], y[keep]))
            self._fit_budget -= len(keep)
            return
        z, y = z.reshape(-1, z.shape[-1]), y.reshape(-1)
        keep = np.flatnonzero(y != self.ignore_index)[: self._fit_budget]
        self._fit_rows.append((z[keep], y[keep]))
        self._fit_budget -= len(keep)

    def _keep_for_fit(self, logits, labels) -> None:
        """Keep a reference to the last evaluation's logits (a bounded random subset if too many)."""
        if not self.keep_fit_rows:
            return
        logits, labels = np.asarray(logits), np.asarray(labels)
        if logits.ndim == 3 and not self.settings.multilabel:  # tokens: only labelled ones are needed
            keep = labels != self.ignore_index
            if keep.sum() > self.max_fit_rows:
                rows = np.flatnonzero(keep.ravel())
                logits, labels = logits.reshape(-1, logits.shape[-1]), labels.ravel()
                logits, labels = logits[rows], labels[rows]
        if len(labels) > self.max_fit_rows:
            seed = getattr(getattr(self.trainer, "args", None), "seed", 0)
            pick = np.sort(np.random.default_rng(seed).choice(len(labels), self.max_fit_rows, replace=False))
            logits, labels = logits[pick], labels[pick]
        self.last_predictions = (logits, labels)
