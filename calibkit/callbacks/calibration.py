"""A ``TrainerCallback`` that logs calibration metrics at every evaluation and calibrates at the end.

Why ``attach(trainer)`` is needed: in ``transformers`` no callback event receives the logits or
labels, and ``on_evaluate`` fires only after ``Trainer.log`` has already copied the metrics into
``state.log_history`` and handed them to every ``report_to`` integration, so keys added there
would never be logged. The official door for metrics is ``compute_metrics``: ``attach`` composes
the trainer's ``compute_metrics`` (yours, if any) with calibkit's, so the calibration metrics
are returned together with yours, prefixed ``eval_`` by the Trainer, logged everywhere, and
usable as ``metric_for_best_model``.

- Without ``batch_eval_metrics``: the Trainer hands over the gathered predictions of the whole
  evaluation set (all processes); they are read in place (no copy) in one compiled pass.
- With ``batch_eval_metrics=True``: each (gathered) batch updates a streaming
  :class:`~calibkit.CalibrationAccumulator`, so memory is O(bins x classes); ACE is then the
  streaming estimate, logged with its bound (``eval_ace_error_bound``: the exact ACE lies within
  it of ``eval_ace``).
- Multi-process evaluation: the Trainer gathers predictions across processes (dropping the
  samples the distributed sampler duplicated) before ``compute_metrics``, so every process
  computes the same numbers as a single process would.
- A user ``preprocess_logits_for_metrics`` (e.g. an argmax to save memory) still runs and your
  ``compute_metrics`` sees its output; calibkit then keeps the raw logits beside it.
- A multi-label model (``problem_type="multi_label_classification"``, found at ``attach``): each
  metric of a label is logged as its macro average over the labels (``eval_ece``) and its micro
  average (``eval_ece_micro``), CECE and the other class-wise summaries over the labels' ECEs, and
  each label's ECE as ``eval_ece_label_<name>``; the fits are the multi-label scalings
  (``"wts"`` is WTS's weights per label, ``"ts"`` one temperature; ``"platt"``,
  ``"label_temperature"``), and a method with no multi-label form (RD-TS, ...) is skipped with a
  warning.
- A causal LM (a ``*ForCausalLM``, found at ``attach``, or ``next_token=True``): the logits at
  position ``t`` are scored against the label at ``t + 1``, as the model's loss does. The
  evaluation set's ``(N, T, V)`` logits are never held: the Trainer's default concatenation of
  every batch's logits does not fit at V = 128,000 (1,000 sequences of 512 tokens are 262 GB in
  float32), and ``batch_eval_metrics`` still gathers each batch's logits onto every process and
  changes the signature your ``compute_metrics`` must have. So calibkit streams through
  ``preprocess_logits_for_metrics``: each batch's logits are reduced to the accumulator's sums
  where they are (on the GPU, by the torch engine) and the Trainer keeps only an ``(N, 1)``
  placeholder, which is what your ``compute_metrics`` sees as predictions unless you give a
  ``preprocess_logits_for_metrics`` of your own (its output is then passed on). With several
  processes the sums are all-reduced before the report (samples the distributed sampler repeats
  to even out the last batch are counted again). Logged: ``eval_<metric>`` as for classifiers,
  and each of the 10 most frequent next tokens' ECE as ``eval_ece_class_<token>`` (never one key
  per vocabulary entry). At the end of training TS and WTS (the default fits for a causal LM) are
  fitted by :meth:`~calibkit.calibrators.TemperatureScaling.fit_batches`, which reads the
  evaluation set through the model once per Newton step (a handful of passes) and never holds its
  logits; RD-TS is refused with its reason (its slope comes from classifiers' top-label
  confidence). In a multi-process run each process fits on its own share of the evaluation set,
  and the main process's temperature is saved.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from transformers import TrainerCallback

from calibkit.callbacks.causal_lm import CAUSAL_LM_FITS, CausalLMStreaming, label_key
from calibkit.metrics.accumulator import CalibrationAccumulator
from calibkit.metrics.registry import HELD, LOGGED, METRICS, metric_names
from calibkit.metrics.settings import UNSET, CalibrationSettings, resolve_settings, settings_keywords
from calibkit.metrics.validation import check_bool

DEFAULT_METRICS = LOGGED
"""The metrics logged by default: the registry's ``logged`` ones (ece, cece, rbece, fce, ecd, esce)."""

DEFAULT_FITS = ("wts", "rd-ts")
"""The calibrators fitted at the end of training by default."""


def _fit_method(name: Any) -> str:
    """Return a fit method's one name: a calibrator of the registry (``"wts"``), or a multi-label mode (``"platt"``)."""
    from calibkit.calibrators.calibrated import make_calibrator, multilabel_mode

    try:
        return make_calibrator(name).method
    except ValueError:
        mode = multilabel_mode(name)
        if mode is None:
            raise
        return mode


def _concat_batches(batches: Any, pad: float) -> np.ndarray:
    """Concatenate per-batch arrays (``eval_do_concat_batches=False``).

    Token batches of different lengths are padded with ``pad`` (labels: -100, so the padding is
    never read).
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


class CalibrationCallback(CausalLMStreaming, TrainerCallback):
    """Calibration metrics at every evaluation; fitted calibrators and calibrated models at the end.

    Parameters
    ----------
    metrics : iterable of str, default :data:`DEFAULT_METRICS`
        Names from :data:`calibkit.METRICS` (or ``"all"``); each is logged as ``eval_<name>``.
    per_class : bool, default True
        Also log each class's subset ECE as ``eval_ece_class_<label name>`` (names from
        ``model.config.id2label``).
    fit : iterable of str, optional
        Default ``("wts", "rd-ts")``, for a causal LM ``("ts", "wts")``.
        Calibrators fitted at the end of training on the last evaluation's logits (those of the
        best checkpoint with ``load_best_model_at_end``, collected again); each gives a
        calibrated model saved to ``<output_dir>/calibrated-<method>/`` (and pushed to the
        Hub with the model when ``args.push_to_hub`` is set). ``()`` fits nothing.
    max_fit_rows : int, default 2_000_000
        Bound on the predictions (sequences, or labelled tokens) kept for the fits. Without
        ``batch_eval_metrics`` the last evaluation's logits are kept by reference (no copy) and
        larger sets are subsampled uniformly at random (seeded by ``args.seed``); with it, the
        first ``max_fit_rows`` labelled predictions of the evaluation are copied.
    ignore_index : int, default -100
        Label of the positions to skip.
    multilabel : bool, optional
        Multi-label metrics and fits (see the module docstring); default: from the model's
        ``problem_type`` at :meth:`attach`.
    next_token : bool, optional
        Next-token metrics of a causal LM (logits at ``t`` scored against the label at
        ``t + 1``); default: True when the model is a ``*ForCausalLM``, found at :meth:`attach`.
    n_bins, ace_ranges, sce_bins, rbece_bins, theta, fce_bins, fce_variant, esce_bins, eps, coverage
        Metric settings, as in :class:`calibkit.CalibrationSettings`.
    settings : CalibrationSettings, optional
        All the settings in one object, instead of the keywords above (``from_logits`` is
        always True here: the Trainer hands over logits).

    Examples
    --------
    >>> cb = CalibrationCallback(metrics=("cece", "rbece"), fit=("wts",))
    >>> cb.metric_names
    ('cece', 'rbece')
    """

    def __init__(
        self,
        metrics: Iterable[str] | str = DEFAULT_METRICS,
        *,
        per_class: bool = True,
        fit: Iterable[str] | None = None,
        max_fit_rows: int = 2_000_000,
        ignore_index: int = UNSET.ignore_index,
        n_bins: int = UNSET.n_bins,
        ace_ranges: int = UNSET.ace_ranges,
        sce_bins: int = UNSET.sce_bins,
        rbece_bins: int = UNSET.rbece_bins,
        theta: float = UNSET.theta,
        fce_bins: int = UNSET.fce_bins,
        fce_variant: str = UNSET.fce_variant,
        esce_bins: int = UNSET.esce_bins,
        eps: float = UNSET.eps,
        coverage: float = UNSET.coverage,
        multilabel: bool | None = None,
        next_token: bool | None = None,
        settings: CalibrationSettings | None = None,
    ) -> None:
        from calibkit.calibrators.calibrated import multilabel_mode

        if isinstance(metrics, str) and metrics == "all":
            names = METRICS
        else:
            try:
                names = metric_names(metrics)
            except ValueError:
                names = ("accuracy",)  # refused just below, with the message of this door
            if "accuracy" in names:  # eval_accuracy is always logged; naming it is a mistake
                raise ValueError(f"`metrics` must be names from {list(METRICS)} or 'all', got {metrics!r}")
            if any(m in HELD for m in names):
                metric_names(names, streaming=True)  # refused (the callback streams), saying where it is given
        self.metric_names = names
        self.per_class = check_bool(per_class, "per_class")
        self._fit_given = fit is not None
        fit = DEFAULT_FITS if fit is None else (fit,) if isinstance(fit, str) else fit
        self.fit_methods = tuple(_fit_method(m) for m in fit)  # validates the names
        self._multilabel_fits = {m: multilabel_mode(m) for m in self.fit_methods}
        if isinstance(max_fit_rows, bool) or not isinstance(max_fit_rows, int) or max_fit_rows < 1:
            raise ValueError(f"`max_fit_rows` must be an integer >= 1, got {max_fit_rows!r}")
        self.max_fit_rows = max_fit_rows
        keywords = settings_keywords(locals())
        # Built and checked once, here, not at the first evaluation.
        self.settings = resolve_settings(settings, **keywords).replace(from_logits=True)
        # None: read it from the model at attach; settings= say "multi-label" only by True (a bool's False
        # default cannot be told from a choice)
        self._multilabel_given = multilabel if settings is None else (True if settings.multilabel else None)
        self._next_token_given = next_token if settings is None else (True if settings.next_token else None)
        self._lm_accumulator: CalibrationAccumulator | None = None
        self._lm_error: str | None = None
        self._class_counts: np.ndarray | None = None
        self.ignore_index = self.settings.ignore_index
        # Computed metrics: the requested ones, plus subset_ece for the per-class keys.
        self._computed = names + (("subset_ece",) if self.per_class and "subset_ece" not in names else ())
        self.trainer = None
        self.user_compute_metrics: Callable | None = None
        self.user_preprocess: Callable | None = None
        self.last_predictions: tuple[np.ndarray, np.ndarray] | None = None
        self.calibrated_dirs: dict[str, str] = {}
        self.fitted: dict[str, Any] = {}
        self._accumulator: CalibrationAccumulator | None = None
        self._evaluating = True
        self._no_fit_reason = "no evaluation with labels ran during training"

    # -- wiring ------------------------------------------------------------------------------
    def attach(self, trainer) -> CalibrationCallback:
        """Compose ``trainer.compute_metrics`` with calibkit's and register the callback (idempotent).

        Parameters
        ----------
        trainer : transformers.Trainer
            The trainer to log calibration metrics for; a user ``compute_metrics`` and
            ``preprocess_logits_for_metrics`` it holds keep running.

        Returns
        -------
        CalibrationCallback
            ``self``.

        Raises
        ------
        ValueError
            When ``trainer`` is not a Trainer, or this callback is attached to another one.
        """
        if self.trainer is trainer:
            return self
        if self.trainer is not None:
            raise ValueError("this CalibrationCallback is already attached to another Trainer")
        if not all(hasattr(trainer, name) for name in ("callback_handler", "compute_metrics", "evaluation_loop")):
            raise ValueError(f"`trainer` must be a transformers Trainer, got {type(trainer).__name__}")
        problem = getattr(getattr(getattr(trainer, "model", None), "config", None), "problem_type", None)
        if (problem == "multi_label_classification") != self.settings.multilabel:
            if self._multilabel_given is not None:  # the user said so, and the model says otherwise
                raise ValueError(f"`multilabel={self.settings.multilabel}` but the model's problem_type is {problem!r}")
            self.settings = self.settings.replace(multilabel=True)  # only None gets here: from the model
        from calibkit.calibrators.modeling_calibkit_lm import is_causal_lm

        if is_causal_lm(getattr(trainer, "model", None)) and self._next_token_given is None:
            self.settings = self.settings.replace(next_token=True)  # what a causal LM's loss scores
            if not self._fit_given:
                self.fit_methods = CAUSAL_LM_FITS
        self.trainer = trainer
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)
        self.user_compute_metrics = trainer.compute_metrics
        self.user_preprocess = trainer.preprocess_logits_for_metrics
        trainer.compute_metrics = self.compute_metrics
        if self.user_preprocess is not None or self.settings.next_token:
            trainer.preprocess_logits_for_metrics = self.preprocess_logits_for_metrics
        self._wrap_evaluation_loop(trainer)
        return self

    def _wrap_evaluation_loop(self, trainer) -> None:
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

    # -- metrics -----------------------------------------------------------------------------
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
            logits, labels = _concat_batches(logits, 0.0), _concat_batches(labels, -100)
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
            self._fit_budget = self.max_fit_rows if self.fit_methods else 0
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
            self._no_fit_reason = f"the last evaluation's logits could not be used ({error})"
        elif self._fit_rows:
            self.last_predictions = tuple(np.concatenate(part) for part in zip(*self._fit_rows))
        elif self.fit_methods:
            self.last_predictions = None
            self._no_fit_reason = "the last evaluation had no labelled prediction"
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
        if not self.fit_methods:
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

    # -- end of training ---------------------------------------------------------------------
    def on_train_end(self, args, state, control, **kwargs):
        """Fit the calibrators on the last evaluation's logits, save (and push) each calibrated model, log the results.

        Parameters
        ----------
        args : transformers.TrainingArguments
            The run's arguments (``output_dir``, ``push_to_hub``, ``hub_model_id``, ``hub_token``).
        state : transformers.TrainerState
            Only the main process saves and pushes.
        control : transformers.TrainerControl
            Not used.
        **kwargs
            The other objects ``Trainer`` passes to callbacks.
        """
        if not self.fit_methods:
            return
        if self.trainer is None:
            warnings.warn(
                "calibkit: CalibrationCallback was not attached (call cb.attach(trainer)); nothing fitted", stacklevel=2
            )
            return
        if self.settings.next_token:
            self._fit_causal_lm(args, state)
            return
        self._logits_of_the_loaded_model(args, state)
        if self.last_predictions is None:
            warnings.warn(f"calibkit: no calibrator fitted: {self._no_fit_reason}", RuntimeWarning, stacklevel=2)
            return
        logits, labels = self.last_predictions
        model = self.trainer.model
        logs = {}
        for method in self.fit_methods:
            try:
                calibrated = self._fit_one(method, model, logits, labels)
            except ValueError as exc:
                warnings.warn(f"calibkit: {method} could not be fitted: {exc}", RuntimeWarning, stacklevel=2)
                continue
            block = calibrated.config.calibration
            for key, value in block.items():
                if isinstance(value, (int, float)) and key != "method":
                    logs[f"calibration/{method}/{key}"] = float(value)
            for when in ("before", "after"):
                for name, value in block["metrics"][when].items():
                    logs[f"calibration/{method}/{when}_{name}"] = value
            if state.is_world_process_zero:
                self._save(method, calibrated, args)
        if logs:
            self.trainer.log(logs)

    def _logits_of_the_loaded_model(self, args, state) -> None:
        """With ``load_best_model_at_end``, make the kept logits those of the model now loaded.

        The Trainer reloads the best checkpoint before ``on_train_end``; when that is not the last
        evaluation's model, its logits are collected again (``trainer.predict`` on the evaluation
        set, the last one of a dict), so that the temperature fitted and the weights saved belong
        together (they came from two models, silently).
        """
        if not (args.load_best_model_at_end and state.best_model_checkpoint) or self.last_predictions is None:
            return
        match = re.search(r"checkpoint-(\d+)$", str(state.best_model_checkpoint).rstrip("/\\"))
        evaluated = [entry["step"] for entry in state.log_history if any(k.startswith("eval_") for k in entry)]
        if match and evaluated and int(match.group(1)) == evaluated[-1]:
            return  # the best model is the last evaluated one
        self.last_predictions = None
        if self.user_preprocess is not None:  # predict() hands over the user's output, not logits
            self._no_fit_reason = (
                "the best checkpoint was loaded at the end, and its logits cannot be collected again past "
                "your preprocess_logits_for_metrics"
            )
            return
        dataset = self.trainer.eval_dataset
        if isinstance(dataset, dict):
            dataset = list(dataset.values())[-1]
        self._no_fit_reason = "the best checkpoint's logits could not be collected"
        try:  # compute_metrics keeps the logits of the model now loaded
            self.trainer.predict(dataset)
        except (ValueError, RuntimeError) as exc:  # nothing stops training: the fits are skipped, with the reason
            self.last_predictions = None
            self._no_fit_reason = f"the best checkpoint's logits could not be collected ({exc})"

    def _fit_one(self, method: str, model, logits, labels):
        from calibkit.calibrators.calibrated import CALIBRATORS, calibrate, make_calibrator

        if self.settings.multilabel:
            from calibkit.calibrators.calibrated import multilabel_calibrator

            mode = self._multilabel_fits[method]
            if mode is None:
                raise ValueError(
                    f"{method} has no multi-label form (multi-label fits: ts, wts, label_temperature, platt, ir)"
                )
            calibrator = multilabel_calibrator(mode, ignore_index=self.ignore_index).fit(logits, labels)
            self.fitted[method] = calibrator
            return calibrate(model, calibrator, logits=logits, labels=labels)
        if method not in CALIBRATORS:
            raise ValueError(f"{method} is a multi-label calibrator; this model has one softmax over its classes")
        calibrator = make_calibrator(method, ignore_index=self.ignore_index).fit(logits, labels)
        self.fitted[method] = calibrator
        return calibrate(model, calibrator, logits=logits, labels=labels)

    def _save(self, method: str, calibrated, args) -> None:
        folder = os.path.join(args.output_dir, f"calibrated-{method}")
        calibrated.save_pretrained(folder)
        processing = getattr(self.trainer, "processing_class", None)
        if processing is not None and hasattr(processing, "save_pretrained"):
            processing.save_pretrained(folder)
        self.calibrated_dirs[method] = folder
        if args.push_to_hub:
            self._push(folder, method, args)

    def _push(self, folder: str, method: str, args) -> None:
        from huggingface_hub import HfApi

        repo_id = args.hub_model_id or os.path.basename(os.path.abspath(args.output_dir))
        try:
            HfApi(token=args.hub_token).upload_folder(
                repo_id=repo_id,
                folder_path=folder,
                path_in_repo=f"calibrated-{method}",
                commit_message=f"calibkit: calibrated model ({method})",
            )
        except Exception as exc:  # a failed upload must not lose the trained model
            warnings.warn(
                f"calibkit: pushing calibrated-{method} to {repo_id} failed: {exc}", RuntimeWarning, stacklevel=2
            )
