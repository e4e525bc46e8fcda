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

The callback is two halves, each usable and tested alone:
:class:`~calibkit.callbacks.evaluation_logging.EvaluationLogger` (what logs at each evaluation:
``compute_metrics``, the evaluation-loop patch, streaming) and
:class:`~calibkit.callbacks.end_fitting.EndFitter` (what fits, saves and pushes at the end).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from transformers import TrainerCallback

from calibkit.callbacks.causal_lm import CAUSAL_LM_FITS, CausalLMStreaming, label_key
from calibkit.callbacks.end_fitting import DEFAULT_FITS, EndFitter, fit_method
from calibkit.callbacks.evaluation_logging import (
    MAX_FIT_ROWS,
    EvaluationLogger,
    check_max_fit_rows,
    concat_batches,
    logged_metric_names,
)
from calibkit.metrics.accumulator import CalibrationAccumulator
from calibkit.metrics.registry import HELD, LOGGED, METRICS, metric_names
from calibkit.metrics.settings import UNSET, CalibrationSettings, resolve_settings, settings_keywords
from calibkit.metrics.validation import check_bool

__all__ = ["DEFAULT_FITS", "DEFAULT_METRICS", "CalibrationCallback"]

REEXPORTED = (CAUSAL_LM_FITS, CausalLMStreaming, label_key, CalibrationAccumulator, HELD, METRICS, metric_names)
"""Names this module held before the callback's halves moved out (issue 54): still importable from here."""

DEFAULT_METRICS = LOGGED
"""The metrics logged by default: the registry's ``logged`` ones (ece, cece, rbece, fce, ecd, esce)."""

# the private names they had here
_fit_method, _concat_batches = fit_method, concat_batches


class CalibrationCallback(TrainerCallback):
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
        max_fit_rows: int = MAX_FIT_ROWS,
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
        names = logged_metric_names(metrics)
        check_bool(per_class, "per_class")
        self._fit_given = fit is not None
        fitting = EndFitter(fit, evaluation=None)  # validates the names, in the order of the keywords
        max_fit_rows = check_max_fit_rows(max_fit_rows)
        keywords = settings_keywords(locals())
        # Built and checked once, here, not at the first evaluation.
        resolved = resolve_settings(settings, **keywords).replace(from_logits=True)
        # None: read it from the model at attach; settings= say "multi-label" only by True (a bool's False
        # default cannot be told from a choice)
        self._multilabel_given = multilabel if settings is None else (True if settings.multilabel else None)
        self._next_token_given = next_token if settings is None else (True if settings.next_token else None)
        self.evaluation = EvaluationLogger(
            names,
            per_class=per_class,
            max_fit_rows=max_fit_rows,
            keep_fit_rows=bool(fitting.fit_methods),
            settings=resolved,
        )
        fitting.evaluation, fitting.settings = self.evaluation, resolved
        self.fitting = fitting
        self.trainer = None

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
                self.fitting.use_causal_lm_fits()
        self.trainer = trainer
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)
        self.fitting.trainer = trainer
        self.evaluation.attach(trainer)
        return self

    # -- the two halves' state, read (and set) where it was ------------------------------------
    @property
    def settings(self) -> CalibrationSettings:
        """The metrics' and the fits' settings (``multilabel`` and ``next_token`` completed at :meth:`attach`)."""
        return self.evaluation.settings

    @settings.setter
    def settings(self, value: CalibrationSettings) -> None:
        self.evaluation.settings = self.fitting.settings = value

    @property
    def fit_methods(self) -> tuple[str, ...]:
        """The methods fitted at the end of training."""
        return self.fitting.fit_methods

    @fit_methods.setter
    def fit_methods(self, value: Iterable[str]) -> None:
        self.fitting.set_fits(value)
        self.evaluation.keep_fit_rows = bool(self.fitting.fit_methods)

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The metrics logged at each evaluation."""
        return self.evaluation.metric_names

    @property
    def per_class(self) -> bool:
        """Whether each class's ECE is logged."""
        return self.evaluation.per_class

    @property
    def max_fit_rows(self) -> int:
        """The bound on the predictions kept for the fits."""
        return self.evaluation.max_fit_rows

    @property
    def ignore_index(self) -> int:
        """The label of the positions skipped."""
        return self.settings.ignore_index

    @property
    def user_compute_metrics(self) -> Callable | None:
        """The trainer's own ``compute_metrics``, composed with calibkit's."""
        return self.evaluation.user_compute_metrics

    @property
    def user_preprocess(self) -> Callable | None:
        """The trainer's own ``preprocess_logits_for_metrics``."""
        return self.evaluation.user_preprocess

    @property
    def last_predictions(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The last evaluation's ``(logits, labels)`` kept for the fits (bounded by ``max_fit_rows``)."""
        return self.evaluation.last_predictions

    @last_predictions.setter
    def last_predictions(self, value: tuple[np.ndarray, np.ndarray] | None) -> None:
        self.evaluation.last_predictions = value

    @property
    def fitted(self) -> dict[str, Any]:
        """The calibrators fitted at the end of training, by method."""
        return self.fitting.fitted

    @property
    def calibrated_dirs(self) -> dict[str, str]:
        """The folders the calibrated models were saved to, by method."""
        return self.fitting.calibrated_dirs

    # -- each evaluation, then the end -------------------------------------------------------
    def compute_metrics(self, eval_pred, compute_result: bool | None = None) -> dict[str, float]:
        """Return the user's metrics (keys unchanged) plus calibkit's (``EvaluationLogger.compute_metrics``).

        Parameters
        ----------
        eval_pred : transformers.EvalPrediction
            The (gathered) predictions and label ids of the evaluation, or of one batch.
        compute_result : bool, optional
            As in ``batch_eval_metrics``.

        Returns
        -------
        dict of str to float
        """
        return self.evaluation.compute_metrics(eval_pred, compute_result)

    def preprocess_logits_for_metrics(self, logits, labels):
        """Run the user's preprocessing and keep the raw logits beside it (``EvaluationLogger``).

        Parameters
        ----------
        logits : torch.Tensor
        labels : torch.Tensor

        Returns
        -------
        object
        """
        return self.evaluation.preprocess_logits_for_metrics(logits, labels)

    def on_train_end(self, args, state, control, **kwargs):
        """Fit the calibrators, save (and push) each calibrated model, log the results (``EndFitter``).

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
        if self.fit_methods and self.trainer is None:
            warnings.warn(
                "calibkit: CalibrationCallback was not attached (call cb.attach(trainer)); nothing fitted", stacklevel=2
            )
            return
        self.fitting.on_train_end(args, state, control, **kwargs)
