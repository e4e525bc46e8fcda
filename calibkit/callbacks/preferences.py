"""TRL's preference trainers: preference calibration at every evaluation, the pairwise temperature at the end.

A reward model trained by TRL's ``RewardTrainer`` (Bradley-Terry loss ``-log sigmoid(r_c - r_r)``)
and a policy trained by ``DPOTrainer`` (implicit reward ``beta * log(pi / pi_ref)``, ``sigmoid``
loss) both give a probability that the chosen answer is preferred, ``sigmoid(margin)``. TRL logs
its accuracy and mean margin as averages of per-batch averages; nothing says whether a 0.9
preference is right nine times in ten. :class:`PreferenceCallback` (``RewardTrainer``) and
:class:`DPOPreferenceCallback` (``DPOTrainer``) log, at every evaluation, what
:func:`calibkit.metrics.preferences.preference_metrics` returns on the margins of every pair of
the evaluation set (ECE, Brier, NLL, accuracy, ties, the length bias), pooled over pairs, as
``<prefix>_preference_<name>``, where ``<prefix>`` is the Trainer's ``metric_key_prefix``
(``eval``, or ``eval_<name>`` for each dataset of an ``eval_dataset`` dict). At the end of
training they fit the pairwise temperature
(:func:`calibkit.calibrators.preference.fit_preference_temperature`) on the last evaluation's
pairs, log it and keep it (``temperature_fitted``); with ``calibrate=True`` the reward model is
wrapped by :func:`calibkit.calibrators.calibrate` (its rewards divided by ``T``) and saved to
``<output_dir>/calibrated-preference/`` (``calibkit.callbacks.preference_fitting``).

Every pair is read whole. TRL's collators put a batch's chosen rows above its rejected rows
(``torch.chunk(rewards, 2)``); ``trainer.predict`` and ``compute_metrics`` see per-batch blocks
``[chosen; rejected]`` and cut the last batch to the dataset's size, which drops its rejected
rows, so the callbacks use neither. Two ways, the same numbers:

- ``cb.attach(trainer)`` (recommended): the rewards are taken from the evaluation's own forward
  passes (``compute_loss`` is wrapped; forward hooks read the model's outputs, and the reference
  model's for DPO), so the callback costs no forward pass; its numbers are added to the
  evaluation's metrics before ``Trainer.log``, so they are in the same log entry as TRL's, reach
  every ``report_to`` integration and can be ``metric_for_best_model``. With several processes
  each batch's pairs are gathered (``accelerator.gather_for_metrics``).
- ``callbacks=[cb]`` alone: ``on_evaluate`` reads the ``eval_dataloader`` it receives with the
  ``model`` it receives (and the reference model given to :class:`DPOPreferenceCallback`): one
  more forward pass over the evaluation set. ``on_evaluate`` fires after ``Trainer.log``, so the
  numbers are added to the evaluation's metrics (what ``trainer.evaluate()`` returns,
  ``metric_for_best_model``) and to its entry of ``state.log_history``, but the ``report_to``
  integrations have already been called (a warning says so once).

The user guide: ``docs/guide/reward_models/training.rst``.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import torch
from transformers import TrainerCallback

from calibkit.calibrators.preference import fit_preference_temperature
from calibkit.callbacks.preference_batches import (
    OutputHooks,
    PreferencePairs,
    dpo_batch_pairs,
    on_device,
    reward_batch_pairs,
    sequence_logps,
    to_numpy,
)
from calibkit.callbacks.preference_fitting import calibrated_reward_model, logged_numbers, save_calibrated
from calibkit.metrics.preferences import check_margins, preference_metrics
from calibkit.metrics.settings import UNSET, resolve_settings

__all__ = [
    "DPOPreferenceCallback",
    "PreferenceCallback",
    "PreferencePairs",
    "dpo_batch_pairs",
    "reward_batch_pairs",
    "sequence_logps",
]
KEY = "preference"
"""The logged keys are ``<prefix>_preference_<name>``."""


class PreferenceCallback(TrainerCallback):
    """Preference calibration of a reward model at every evaluation; the pairwise temperature at the end.

    For TRL's ``RewardTrainer`` (any ``Trainer`` whose batches are TRL's preference batches:
    ``input_ids`` and ``attention_mask`` with the chosen rows above the rejected rows, one reward
    a row). See the module docstring for the two ways to add it and what each logs.

    Parameters
    ----------
    n_bins : int, default 15
        Bins of the ECE and the reliability reading (the settings' default).
    temperature : float, default 1.0
        The temperature the logged metrics read the margins at (``sigmoid(margin / T)``).
    fit : bool, default True
        Fit the pairwise temperature at the end of training on the last evaluation's pairs.
    fit_dataset : str, optional
        With an ``eval_dataset`` dict, the name of the dataset to fit on (default: the first one
        evaluated); ``"eval"`` names a single evaluation set.
    calibrate : bool or callable, default False
        True: at the end, :func:`calibkit.calibrators.calibrate` wraps the reward model with the
        fitted ``T`` (its rewards divided by ``T``; the card states ``T``, the pairs it was fitted
        on and the preference metrics before and after). A callable
        ``calibrate(model, temperature) -> model`` is called instead. The result is kept as
        ``calibrated_model``, saved with the tokenizer to
        ``<output_dir>/calibrated-preference/`` and, with ``args.push_to_hub``, uploaded to the
        run's Hub repository under that folder.

    Attributes
    ----------
    temperature_fitted : float or None
        The pairwise temperature fitted at the end of training (None before, or when refused).
    last_pairs : dict of str to PreferencePairs
        The last evaluation's pairs, by ``metric_key_prefix``.
    calibrated_model : object or None
        The calibrated model (or what the ``calibrate`` callable returned).
    calibrated_dir : str or None
        Where it was saved.

    Examples
    --------
    >>> cb = PreferenceCallback(n_bins=10)
    >>> cb.n_bins, cb.fit
    (10, True)
    """

    def __init__(
        self,
        *,
        n_bins: int = UNSET.n_bins,
        temperature: float = 1.0,
        fit: bool = True,
        fit_dataset: str | None = None,
        calibrate: bool | Callable[[Any, float], Any] = False,
    ) -> None:
        if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature > 0):
            raise ValueError(f"`temperature` must be a finite number > 0, got {temperature!r}")
        if not isinstance(fit, bool):
            raise ValueError(f"`fit` must be True or False, got {fit!r}")
        if not (isinstance(calibrate, bool) or callable(calibrate)):
            raise ValueError(f"`calibrate` must be True, False or a callable (model, T) -> model, got {calibrate!r}")
        self.n_bins = resolve_settings(n_bins=n_bins).n_bins  # the settings' check of it
        self.temperature, self.fit = float(temperature), fit
        self.fit_dataset, self.calibrate = fit_dataset, calibrate
        self.trainer = None
        self.temperature_fitted: float | None = None
        self.last_pairs: dict[str, PreferencePairs] = {}
        self.calibrated_model = None
        self.calibrated_dir: str | None = None
        self._dataloaders: dict[str, Any] = {}
        self._batches: list[PreferencePairs] | None = None
        self._capture_error: str | None = None
        self._warned: set[str] = set()

    # -- what a batch is, for this trainer -----------------------------------------------------
    def scoring_modules(self) -> tuple[torch.nn.Module, ...]:
        """Return the modules whose outputs :meth:`captured_pairs` reads (the trainer's model).

        Returns
        -------
        tuple of torch.nn.Module
        """
        return (self.trainer.model,)

    def captured_pairs(self, inputs: dict[str, Any], hooks: OutputHooks) -> PreferencePairs:
        """Return a batch's pairs from the outputs its evaluation's forward pass gave (``attach``).

        Parameters
        ----------
        inputs : dict
            The batch as ``compute_loss`` received it.
        hooks : OutputHooks
            The forward outputs kept while ``compute_loss`` ran.

        Returns
        -------
        PreferencePairs
        """
        outputs = hooks.of(self.trainer.model)
        if not outputs:
            raise RuntimeError("calibkit: the reward model was not called in this evaluation step")
        return reward_batch_pairs(outputs[0].logits, inputs["attention_mask"])

    def batch_pairs(self, model: torch.nn.Module, batch: dict[str, Any]) -> PreferencePairs:
        """Return a batch's pairs by running ``model`` on it (the ``on_evaluate`` way).

        Parameters
        ----------
        model : torch.nn.Module
            The reward model (one output a row).
        batch : dict
            A batch of the evaluation's data loader (``input_ids``, ``attention_mask``).

        Returns
        -------
        PreferencePairs
        """
        rewards = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        return reward_batch_pairs(rewards, batch["attention_mask"])

    def check_args(self, args: Any) -> None:
        """Check the run's arguments where they change what a margin means (nothing for a reward model).

        Parameters
        ----------
        args : transformers.TrainingArguments
        """

    # -- reading every pair -------------------------------------------------------------------
    def read_pairs(self, model: torch.nn.Module, dataloader: Iterable[dict[str, Any]]) -> PreferencePairs:
        """Return every pair of a data loader, running ``model`` (and a reference model) on each batch.

        Parameters
        ----------
        model : torch.nn.Module
        dataloader : iterable of dict
            TRL's preference batches.

        Returns
        -------
        PreferencePairs
        """
        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                parts = [self.batch_pairs(model, on_device(batch, device)) for batch in dataloader]
        finally:
            model.train(was_training)
        return PreferencePairs.concat(parts)

    def metrics(self, pairs: PreferencePairs, temperature: float | None = None) -> dict[str, float]:
        """Return the logged numbers of pairs: the scalars of :func:`~calibkit.metrics.preferences.preference_metrics`.

        Parameters
        ----------
        pairs : PreferencePairs
        temperature : float, optional
            Default: the callback's ``temperature``.

        Returns
        -------
        dict of str to float
            Keys as :func:`~calibkit.metrics.preferences.preference_metrics` names them (a nested
            number as ``<outer>_<inner>``), without a prefix; ``pairs`` always.
        """
        report = preference_metrics(
            check_margins(pairs.margins),
            temperature=self.temperature if temperature is None else temperature,
            n_bins=self.n_bins,
            length_chosen=pairs.length_chosen,
            length_rejected=pairs.length_rejected,
        )
        return logged_numbers(report)

    def _evaluated(self, prefix: str, pairs: PreferencePairs) -> dict[str, float]:
        """Keep the pairs of an evaluation and return its log entries (``<prefix>_preference_<name>``)."""
        self.last_pairs[prefix] = pairs
        if not len(pairs):
            self._warn_once("empty", f"calibkit: no preference pair in the evaluation {prefix!r}; nothing logged")
            return {}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # empty bins and the like: expected mid-training
                numbers = self.metrics(pairs)
        except ValueError as exc:  # NaN or infinite rewards (fp16 overflow, ...)
            warnings.warn(
                f"calibkit: preference metrics set to NaN for {prefix!r}: {exc}", RuntimeWarning, stacklevel=2
            )
            numbers = {"pairs": float(len(pairs)), "ece": math.nan, "brier": math.nan, "nll": math.nan}
        return {f"{prefix}_{KEY}_{name}": value for name, value in numbers.items()}

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, RuntimeWarning, stacklevel=3)

    # -- attach: the evaluation's own forward passes -------------------------------------------
    def attach(self, trainer) -> PreferenceCallback:
        """Read the pairs from ``trainer``'s own evaluation passes and log them in its evaluation's entry.

        Wraps ``trainer.evaluation_loop`` (the metrics are added to the evaluation's before
        ``Trainer.log``) and ``trainer.compute_loss`` (forward hooks keep each evaluation batch's
        outputs), and adds the callback to the trainer (idempotent).

        Parameters
        ----------
        trainer : trl.RewardTrainer or trl.DPOTrainer
            A ``Trainer`` with TRL's preference batches.

        Returns
        -------
        PreferenceCallback
            ``self``.

        Raises
        ------
        ValueError
            When ``trainer`` is not a Trainer, or this callback is attached to another one.
        """
        if self.trainer is trainer:
            return self
        if self.trainer is not None:
            raise ValueError(f"this {type(self).__name__} is already attached to another Trainer")
        if not all(hasattr(trainer, name) for name in ("callback_handler", "compute_loss", "evaluation_loop")):
            raise ValueError(f"`trainer` must be a transformers Trainer, got {type(trainer).__name__}")
        self.trainer = trainer
        self.check_args(trainer.args)
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)
        self._wrap_evaluation_loop(trainer)
        self._wrap_compute_loss(trainer)
        return self

    def _wrap_evaluation_loop(self, trainer) -> None:
        original = trainer.evaluation_loop

        def evaluation_loop(*args, **kwargs):
            description = kwargs.get("description", args[1] if len(args) > 1 else "Evaluation")
            if description == "Prediction":  # trainer.predict(): not an evaluation
                return original(*args, **kwargs)
            prefix = kwargs.get("metric_key_prefix", args[4] if len(args) > 4 else "eval")
            self._dataloaders[prefix] = kwargs.get("dataloader", args[0] if args else None)
            self._batches, self._capture_error = [], None
            try:
                output = original(*args, **kwargs)
            finally:
                batches, self._batches = self._batches, None
            if self._capture_error is not None:
                warnings.warn(
                    f"calibkit: the evaluation {prefix!r}'s pairs could not be read ({self._capture_error}); "
                    "no preference metrics logged",
                    RuntimeWarning,
                    stacklevel=2,
                )
                self.last_pairs.pop(prefix, None)
            elif output.metrics is not None:
                output.metrics.update(self._evaluated(prefix, PreferencePairs.concat(batches)))
            return output

        trainer.evaluation_loop = evaluation_loop

    def _wrap_compute_loss(self, trainer) -> None:
        original = trainer.compute_loss

        def compute_loss(model, inputs, *args, **kwargs):
            if self._batches is None or trainer.model.training:
                return original(model, inputs, *args, **kwargs)
            with OutputHooks(self.scoring_modules()) as hooks:
                result = original(model, inputs, *args, **kwargs)
            if self._capture_error is None:
                try:
                    self._batches.append(self._gathered(self.captured_pairs(inputs, hooks)))
                except (ValueError, RuntimeError, KeyError) as exc:  # not a preference batch: say so, keep training
                    self._capture_error = f"{type(exc).__name__}: {exc}"
            return result

        trainer.compute_loss = compute_loss

    def _gathered(self, pairs: PreferencePairs) -> PreferencePairs:
        """With several processes, every process's pairs of this batch (the sampler's repeats dropped)."""
        accelerator = getattr(self.trainer, "accelerator", None)
        if accelerator is None or accelerator.num_processes == 1:
            return pairs
        gathered = [
            accelerator.gather_for_metrics(torch.as_tensor(getattr(pairs, f.name), device=accelerator.device))
            for f in dataclasses.fields(pairs)
        ]
        return PreferencePairs(*(to_numpy(g, np.float64 if i == 0 else np.int64) for i, g in enumerate(gathered)))

    # -- the callback's events ----------------------------------------------------------------
    def on_train_begin(self, args, state, control, **kwargs):
        """Check the run's arguments (DPO: its loss) before the first evaluation.

        Parameters
        ----------
        args : transformers.TrainingArguments
        state : transformers.TrainerState
        control : transformers.TrainerControl
        **kwargs
            The other objects ``Trainer`` passes to callbacks.
        """
        self.check_args(args)

    def on_evaluate(self, args, state, control, model=None, eval_dataloader=None, metrics=None, **kwargs):
        """Without :meth:`attach`: read every pair of the evaluation and add the numbers to its metrics.

        Parameters
        ----------
        args : transformers.TrainingArguments
        state : transformers.TrainerState
            The evaluation's entry of ``log_history`` gets the numbers too.
        control : transformers.TrainerControl
        model : torch.nn.Module
            The model evaluated.
        eval_dataloader : torch.utils.data.DataLoader
            The evaluation's data loader (every pair of it is read).
        metrics : dict
            The evaluation's metrics (updated in place: ``trainer.evaluate()`` returns them).
        **kwargs
            The other objects ``Trainer`` passes to callbacks.
        """
        if self.trainer is not None or metrics is None or model is None or eval_dataloader is None:
            return
        runtime = [key for key in metrics if key.endswith("_runtime")]
        prefix = runtime[0][: -len("_runtime")] if runtime else "eval"
        self.check_args(args)
        if getattr(args, "world_size", 1) > 1:
            self._warn_once("world", "calibkit: without cb.attach(trainer), each process reads only its share of pairs")
        self._dataloaders[prefix] = eval_dataloader
        ours = self._evaluated(prefix, self.read_pairs(model, eval_dataloader))
        metrics.update(ours)
        if state.log_history and f"{prefix}_runtime" in state.log_history[-1]:
            state.log_history[-1].update(ours)
        if ours and getattr(args, "report_to", None):
            self._warn_once(
                "report_to",
                "calibkit: on_evaluate runs after Trainer.log, so the report_to integrations did not get the "
                "preference metrics (they are in trainer.state.log_history); call cb.attach(trainer) to log them there",
            )

    def on_train_end(self, args, state, control, model=None, **kwargs):
        """Fit the pairwise temperature on the last evaluation's pairs, log it, keep it; calibrate if asked.

        With ``load_best_model_at_end`` the pairs are read again with the model now loaded.

        Parameters
        ----------
        args : transformers.TrainingArguments
        state : transformers.TrainerState
        control : transformers.TrainerControl
        model : torch.nn.Module
            The model at the end of training.
        **kwargs
            The other objects ``Trainer`` passes to callbacks.
        """
        if not self.fit or not self.last_pairs:
            return
        prefix = self._fit_prefix()
        if prefix is None:
            return
        pairs = self.last_pairs[prefix]
        if getattr(args, "load_best_model_at_end", False) and model is not None and self._dataloaders.get(prefix):
            pairs = self.read_pairs(model, self._dataloaders[prefix])
        try:
            temperature = fit_preference_temperature(pairs.margins)
        except ValueError as exc:
            warnings.warn(
                f"calibkit: no pairwise temperature fitted on {prefix!r}: {exc}", RuntimeWarning, stacklevel=2
            )
            return
        self.temperature_fitted = temperature
        logs = {f"{KEY}/temperature": temperature, f"{KEY}/fit_pairs": float(len(pairs)), **self.fit_logs(temperature)}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for when, t in (("before", self.temperature), ("after", temperature)):
                logs.update({f"{KEY}/{when}_{k}": v for k, v in self.metrics(pairs, t).items() if k != "pairs"})
        self._log(logs, state)
        if self.calibrate is not False and model is not None:
            fitted_on = f"the {len(pairs)} pairs of the evaluation {prefix!r} at step {state.global_step}"
            self.calibrated_model = self.calibrated(model, temperature, pairs, fitted_on)
            if state.is_world_process_zero and hasattr(self.calibrated_model, "save_pretrained"):
                self.calibrated_dir = save_calibrated(self.calibrated_model, args, kwargs.get("processing_class"))

    def fit_logs(self, temperature: float) -> dict[str, float]:
        """Return the trainer's own numbers of the fit, logged beside ``T`` (none for a reward model).

        Parameters
        ----------
        temperature : float
            The fitted pairwise temperature.

        Returns
        -------
        dict of str to float
        """
        return {}

    def calibrated(self, model: Any, temperature: float, pairs: PreferencePairs, fitted_on: str) -> Any:
        """Return the model calibrated by ``temperature``, or what the ``calibrate`` callable returns.

        Parameters
        ----------
        model : transformers.PreTrainedModel
            The reward model at the end of training.
        temperature : float
            The fitted pairwise temperature.
        pairs : PreferencePairs
            The pairs it was fitted on (the card's numbers before and after).
        fitted_on : str
            The data it was fitted on, in words (the card states it).

        Returns
        -------
        object
        """
        if callable(self.calibrate):
            return self.calibrate(model, temperature)
        return calibrated_reward_model(model, temperature, pairs, self.n_bins, fitted_on)

    def _fit_prefix(self) -> str | None:
        if self.fit_dataset is None:
            return next(iter(self.last_pairs))
        prefix = self.fit_dataset if self.fit_dataset == "eval" else f"eval_{self.fit_dataset}"
        if prefix not in self.last_pairs:  # warned, not raised: the end of a long training is no place to stop
            warnings.warn(
                f"calibkit: `fit_dataset`: {self.fit_dataset!r} was not evaluated (evaluated: "
                f"{sorted(self.last_pairs)}); no pairwise temperature fitted",
                RuntimeWarning,
                stacklevel=3,
            )
            return None
        return prefix

    def _log(self, logs: dict[str, float], state) -> None:
        if self.trainer is not None:
            self.trainer.log(logs)
        else:
            state.log_history.append({**logs, "step": state.global_step})


class DPOPreferenceCallback(PreferenceCallback):
    """Preference calibration of DPO's implicit rewards at every evaluation; the pairwise temperature at the end.

    For TRL's ``DPOTrainer``: the margin of a pair is ``beta * ((log pi(c) - log ref(c)) -
    (log pi(r) - log ref(r)))`` summed over the completion's tokens (``completion_mask``), whose
    ``sigmoid`` is the preference probability of DPO's default ``loss_type="sigmoid"`` (another
    loss, an ``f_divergence_type`` other than ``"reverse_kl"`` or an ``ld_alpha`` are warned
    about: the numbers are then those of the sigmoid loss's reading). With :meth:`PreferenceCallback.attach` the
    reference log-probabilities come from the evaluation's own reference pass (or the batch's
    precomputed ``ref_chosen_logps`` / ``ref_rejected_logps``); without it, ``on_evaluate`` runs
    ``ref_model`` (or uses the precomputed columns).

    Parameters
    ----------
    ref_model : torch.nn.Module, optional
        The reference model (the ``ref_model`` given to ``DPOTrainer``). Needed without
        :meth:`PreferenceCallback.attach` unless the batches carry precomputed reference log-probabilities;
        with :meth:`PreferenceCallback.attach`, default: ``trainer.ref_model``.
    beta : float, optional
        DPO's ``beta``; default: the run's ``args.beta``.
    n_bins : int, default 15
        As in :class:`PreferenceCallback`.
    temperature : float, default 1.0
        As in :class:`PreferenceCallback`.
    fit : bool, default True
        As in :class:`PreferenceCallback`.
    fit_dataset : str, optional
        As in :class:`PreferenceCallback`.
    calibrate : callable, optional
        ``calibrate(model, temperature) -> model``, as in :class:`PreferenceCallback` (a policy is
        not a reward model: ``True`` is refused). The fit also logs ``preference/calibrated_beta``,
        ``beta / T``: the ``beta`` whose implicit rewards are calibrated.

    Examples
    --------
    >>> DPOPreferenceCallback(beta=0.1).beta
    0.1
    """

    def __init__(
        self,
        ref_model: torch.nn.Module | None = None,
        *,
        beta: float | None = None,
        n_bins: int = UNSET.n_bins,
        temperature: float = 1.0,
        fit: bool = True,
        fit_dataset: str | None = None,
        calibrate: Callable[[Any, float], Any] | None = None,
    ) -> None:
        if calibrate is True:
            raise ValueError("`calibrate=True` wraps a reward model; a DPO policy takes a callable (model, T) -> model")
        super().__init__(
            n_bins=n_bins, temperature=temperature, fit=fit, fit_dataset=fit_dataset, calibrate=calibrate or False
        )
        if beta is not None and not (isinstance(beta, (int, float)) and math.isfinite(beta) and beta > 0):
            raise ValueError(f"`beta` must be a finite number > 0, got {beta!r}")
        self.ref_model, self.beta = ref_model, None if beta is None else float(beta)

    def check_args(self, args: Any) -> None:
        """Take ``beta`` from the run (unless given); refuse padding-free batches, warn about other losses.

        Parameters
        ----------
        args : trl.DPOConfig

        Raises
        ------
        ValueError
            With ``padding_free=True`` (no chosen/rejected halves), or when no ``beta`` is known.
        """
        if getattr(args, "padding_free", False):
            raise ValueError("`args.padding_free=True` packs the pairs into one row: the callback needs padded pairs")
        if self.beta is None:
            beta = getattr(args, "beta", None)
            if beta is None:
                raise ValueError("`beta`: give DPO's beta (the run's arguments have none)")
            self.beta = float(beta)
        loss = list(getattr(args, "loss_type", ["sigmoid"]) or ["sigmoid"])
        others = {
            "loss_type": loss != ["sigmoid"],
            "f_divergence_type": getattr(args, "f_divergence_type", "reverse_kl") != "reverse_kl",
            "ld_alpha": getattr(args, "ld_alpha", None) is not None,
        }
        for name in (n for n, other in others.items() if other):
            self._warn_once(
                name,
                f"calibkit: with `{name}={getattr(args, name)!r}` sigmoid(beta * margin) is not the probability "
                "this DPO loss models; the preference metrics read it as the sigmoid loss would",
            )

    def fit_logs(self, temperature: float) -> dict[str, float]:
        """Return ``preference/calibrated_beta``, ``beta / T``: the ``beta`` whose implicit rewards are calibrated.

        Parameters
        ----------
        temperature : float
            The fitted pairwise temperature.

        Returns
        -------
        dict of str to float
        """
        return {f"{KEY}/calibrated_beta": self.beta / temperature}

    def scoring_modules(self) -> tuple[torch.nn.Module, ...]:
        """Return the policy and the reference model (whose outputs :meth:`captured_pairs` reads).

        Returns
        -------
        tuple of torch.nn.Module
        """
        return (self.trainer.model, self._reference())

    def _reference(self) -> torch.nn.Module | None:
        return self.ref_model if self.ref_model is not None else getattr(self.trainer, "ref_model", None)

    def captured_pairs(self, inputs: dict[str, Any], hooks: OutputHooks) -> PreferencePairs:
        """Return a batch's pairs from the policy's and the reference's outputs of its evaluation step.

        Parameters
        ----------
        inputs : dict
            The batch as ``compute_loss`` received it (``input_ids``, ``completion_mask``, maybe
            ``ref_chosen_logps`` / ``ref_rejected_logps``).
        hooks : OutputHooks
            The forward outputs kept while ``compute_loss`` ran.

        Returns
        -------
        PreferencePairs
        """
        ids, mask = inputs["input_ids"], inputs["completion_mask"]
        policy = hooks.of(self.trainer.model)
        reference = self._reference()
        if "ref_chosen_logps" in inputs:
            ref = torch.cat([inputs["ref_chosen_logps"], inputs["ref_rejected_logps"]])
        elif reference is not None and hooks.of(reference):
            ref = sequence_logps(hooks.of(reference)[0], ids, mask)
        elif len(policy) > 1:  # a PEFT policy with its adapter disabled is its own reference (the second call)
            ref = sequence_logps(policy[1], ids, mask)
        else:
            raise RuntimeError("calibkit: no reference log-probabilities in this DPO evaluation step")
        return dpo_batch_pairs(sequence_logps(policy[0], ids, mask), ref, mask, self.beta)

    def batch_pairs(self, model: torch.nn.Module, batch: dict[str, Any]) -> PreferencePairs:
        """Return a batch's pairs by running the policy and the reference model on it (the ``on_evaluate`` way).

        Parameters
        ----------
        model : torch.nn.Module
            The policy.
        batch : dict
            A batch of the evaluation's data loader (``input_ids``, ``attention_mask``,
            ``completion_mask``, maybe precomputed reference log-probabilities).

        Returns
        -------
        PreferencePairs

        Raises
        ------
        ValueError
            When there is no reference: neither ``ref_model`` nor precomputed columns.
        """
        ids, mask = batch["input_ids"], batch["completion_mask"]
        policy = sequence_logps(model(input_ids=ids, attention_mask=batch["attention_mask"]), ids, mask)
        if "ref_chosen_logps" in batch:
            ref = torch.cat([batch["ref_chosen_logps"], batch["ref_rejected_logps"]])
        elif self.ref_model is not None:
            self.ref_model.eval()
            ref_ids = ids.to(next(self.ref_model.parameters()).device)
            output = self.ref_model(input_ids=ref_ids, attention_mask=batch["attention_mask"].to(ref_ids.device))
            ref = sequence_logps(output, ref_ids, mask.to(ref_ids.device))
        else:
            raise ValueError(
                "`ref_model`: DPOPreferenceCallback needs the reference model to read the implicit rewards "
                "(or cb.attach(trainer), or precompute_ref_log_probs=True)"
            )
        return dpo_batch_pairs(policy, ref, mask, self.beta)
