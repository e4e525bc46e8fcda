"""What the callback does at the end of training: calibrators fitted, calibrated models saved and pushed.

:class:`EndFitter` is the half of :class:`~calibkit.callbacks.CalibrationCallback` that fits: on
the last evaluation's logits, which :class:`~calibkit.callbacks.evaluation_logging.EvaluationLogger`
kept (collected again when ``load_best_model_at_end`` loaded another checkpoint), or for a causal
LM by streaming the evaluation set through the model
(:meth:`~calibkit.calibrators.TemperatureScaling.fit_batches`). Each calibrated model is saved to
``<output_dir>/calibrated-<method>/`` and pushed with ``args.push_to_hub``. It needs no Trainer to
be tested: fake ``args``, ``state`` and an object holding ``last_predictions`` will do.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterable
from typing import Any

from calibkit.callbacks.causal_lm import CAUSAL_LM_FITS
from calibkit.metrics.settings import DEFAULTS, CalibrationSettings

__all__ = ["CAUSAL_LM_FITS", "DEFAULT_FITS", "EndFitter", "block_logs", "fit_method"]

DEFAULT_FITS = ("wts", "rd-ts")
"""The calibrators fitted at the end of training by default."""


def fit_method(name: Any) -> str:
    """Return a fit method's one name: a calibrator of the registry (``"wts"``), or a multi-label mode (``"platt"``).

    Parameters
    ----------
    name : str
        A method name or alias, as :func:`~calibkit.calibrators.make_calibrator` or
        :func:`~calibkit.calibrators.calibrated.multilabel_mode` take it.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        On a name that is neither.
    """
    from calibkit.calibrators.calibrated import make_calibrator, multilabel_mode

    try:
        return make_calibrator(name).method
    except ValueError:
        mode = multilabel_mode(name)
        if mode is None:
            raise
        return mode


def block_logs(method: str, block: dict) -> dict[str, float]:
    """Return the log entries of a calibration block: its numbers, and its metrics before and after.

    Parameters
    ----------
    method : str
        The fit's name, in the keys (``calibration/<method>/<key>``).
    block : dict
        A calibrated model's ``config.calibration``, with its ``metrics``.

    Returns
    -------
    dict of str to float
    """
    logs = {}
    for key, value in block.items():
        if isinstance(value, (int, float)) and key != "method":
            logs[f"calibration/{method}/{key}"] = float(value)
    for when in ("before", "after"):
        for name, value in block["metrics"][when].items():
            logs[f"calibration/{method}/{when}_{name}"] = value
    return logs


class EndFitter:
    """Fit calibrators at the end of training, save (and push) the calibrated models, log the results.

    Parameters
    ----------
    fit : iterable of str, optional
        The methods to fit (:func:`fit_method` names them); default :data:`DEFAULT_FITS`.
    evaluation : object
        Where the last evaluation's logits are: ``last_predictions`` (``(logits, labels)`` or
        None), ``no_fit_reason``, ``user_preprocess`` and ``class_counts``, as an
        :class:`~calibkit.callbacks.evaluation_logging.EvaluationLogger` holds them.
    settings : CalibrationSettings, optional
        ``multilabel``, ``next_token`` and ``ignore_index`` are read.

    Attributes
    ----------
    fitted : dict of str to Calibrator
        The fitted calibrators by method.
    calibrated_dirs : dict of str to str
        The folders the calibrated models were saved to, by method.
    """

    def __init__(
        self, fit: Iterable[str] | str | None = None, *, evaluation: Any, settings: CalibrationSettings | None = None
    ) -> None:
        self.set_fits(DEFAULT_FITS if fit is None else fit)
        self.evaluation = evaluation
        self.settings = DEFAULTS if settings is None else settings
        self.trainer = None
        self.fitted: dict[str, Any] = {}
        self.calibrated_dirs: dict[str, str] = {}

    def set_fits(self, fit: Iterable[str] | str) -> None:
        """Set the methods to fit (checked, each by its one name).

        Parameters
        ----------
        fit : iterable of str, or str
            Method names; ``()`` fits nothing.
        """
        from calibkit.calibrators.calibrated import multilabel_mode

        fit = (fit,) if isinstance(fit, str) else fit
        self.fit_methods = tuple(fit_method(m) for m in fit)  # validates the names
        self._multilabel_fits = {m: multilabel_mode(m) for m in self.fit_methods}

    def use_causal_lm_fits(self) -> None:
        """Fit a causal LM's default methods (:data:`CAUSAL_LM_FITS`) instead."""
        self.set_fits(CAUSAL_LM_FITS)

    def on_train_end(self, args, state, control=None, **kwargs) -> None:
        """Fit the calibrators on the last evaluation's logits, save (and push) each calibrated model, log the results.

        Parameters
        ----------
        args : transformers.TrainingArguments
            The run's arguments (``output_dir``, ``push_to_hub``, ``hub_model_id``, ``hub_token``).
        state : transformers.TrainerState
            Only the main process saves and pushes.
        control : transformers.TrainerControl
            Not used (optional).
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
        if self.evaluation.last_predictions is None:
            warnings.warn(
                f"calibkit: no calibrator fitted: {self.evaluation.no_fit_reason}", RuntimeWarning, stacklevel=2
            )
            return
        logits, labels = self.evaluation.last_predictions
        model = self.trainer.model
        logs = {}
        for method in self.fit_methods:
            try:
                calibrated = self._fit_one(method, model, logits, labels)
            except ValueError as exc:
                warnings.warn(f"calibkit: {method} could not be fitted: {exc}", RuntimeWarning, stacklevel=2)
                continue
            logs.update(block_logs(method, calibrated.config.calibration))
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
        if (
            not (args.load_best_model_at_end and state.best_model_checkpoint)
            or self.evaluation.last_predictions is None
        ):
            return
        match = re.search(r"checkpoint-(\d+)$", str(state.best_model_checkpoint).rstrip("/\\"))
        evaluated = [entry["step"] for entry in state.log_history if any(k.startswith("eval_") for k in entry)]
        if match and evaluated and int(match.group(1)) == evaluated[-1]:
            return  # the best model is the last evaluated one
        self.evaluation.last_predictions = None
        if self.evaluation.user_preprocess is not None:  # predict() hands over the user's output, not logits
            self.evaluation.no_fit_reason = (
                "the best checkpoint was loaded at the end, and its logits cannot be collected again past "
                "your preprocess_logits_for_metrics"
            )
            return
        dataset = self.trainer.eval_dataset
        if isinstance(dataset, dict):
            dataset = list(dataset.values())[-1]
        self.evaluation.no_fit_reason = "the best checkpoint's logits could not be collected"
        try:  # compute_metrics keeps the logits of the model now loaded
            self.trainer.predict(dataset)
        except (ValueError, RuntimeError) as exc:  # nothing stops training: the fits are skipped, with the reason
            self.evaluation.last_predictions = None
            self.evaluation.no_fit_reason = f"the best checkpoint's logits could not be collected ({exc})"

    def _fit_one(self, method: str, model, logits, labels):
        from calibkit.calibrators.calibrated import CALIBRATORS, calibrate, make_calibrator

        if self.settings.multilabel:
            from calibkit.calibrators.calibrated import multilabel_calibrator

            mode = self._multilabel_fits[method]
            if mode is None:
                raise ValueError(
                    f"{method} has no multi-label form (multi-label fits: ts, wts, label_temperature, platt, ir)"
                )
            calibrator = multilabel_calibrator(mode, ignore_index=self.settings.ignore_index).fit(logits, labels)
            self.fitted[method] = calibrator
            return calibrate(model, calibrator, logits=logits, labels=labels)
        if method not in CALIBRATORS:
            raise ValueError(f"{method} is a multi-label calibrator; this model has one softmax over its classes")
        calibrator = make_calibrator(method, ignore_index=self.settings.ignore_index).fit(logits, labels)
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

    def _fit_causal_lm(self, args, state) -> None:
        """Fit TS/WTS on the evaluation set's next tokens, streamed through the model (never holding its logits)."""
        from calibkit.calibrators.calibrated import calibrate, make_calibrator
        from calibkit.calibrators.modeling_calibkit import CAUSAL_LM_METHODS

        dataset = self.trainer.eval_dataset
        if isinstance(dataset, dict):
            dataset = list(dataset.values())[-1]
        if dataset is None:
            warnings.warn(
                "calibkit: no calibrator fitted: the Trainer has no evaluation set", RuntimeWarning, stacklevel=2
            )
            return
        model = self.trainer.model
        logs: dict[str, float] = {}
        for method in self.fit_methods:
            if method not in CAUSAL_LM_METHODS:
                warnings.warn(
                    f"calibkit: {method} is not fitted on a causal LM: a vocabulary is calibrated by a temperature "
                    f"({', '.join(CAUSAL_LM_METHODS)}); RD-TS's slope comes from classifiers' top-label confidence",
                    RuntimeWarning,
                    stacklevel=2,
                )
                continue
            calibrator = make_calibrator(method, ignore_index=self.settings.ignore_index)
            try:
                calibrator.fit_batches(
                    lambda: self._lm_batches(dataset), next_token=True, class_counts=self.evaluation.class_counts
                )
            except ValueError as exc:
                warnings.warn(f"calibkit: {method} could not be fitted: {exc}", RuntimeWarning, stacklevel=2)
                continue
            self.fitted[method] = calibrator
            calibrated = calibrate(model, calibrator, report=False)
            logs[f"calibration/{method}/temperature"] = float(calibrator.temperature_)
            logs[f"calibration/{method}/passes"] = float(calibrator.n_iter_)
            if state.is_world_process_zero:
                self._save(method, calibrated, args)
        if logs:
            self.trainer.log(logs)

    def _lm_batches(self, dataset):
        """Yield ``(logits, labels)`` of every evaluation batch, the model run on its device (one pass)."""
        import torch

        trainer = self.trainer
        model = trainer.model
        was_training = model.training
        model.eval()
        try:
            for inputs in trainer.get_eval_dataloader(dataset):
                inputs = trainer._prepare_inputs(inputs)
                labels = inputs.get("labels")
                if labels is None:
                    continue
                with torch.no_grad():
                    logits = model(**{k: v for k, v in inputs.items() if k != "labels"}).logits
                yield logits, labels
        finally:
            model.train(was_training)
