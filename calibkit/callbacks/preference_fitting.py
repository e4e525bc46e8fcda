"""What the TRL callbacks log and what they leave at the end: the numbers of a report, the calibrated reward model.

:func:`logged_numbers` flattens :func:`~calibkit.metrics.preferences.preference_metrics`' report
into the scalars a ``Trainer`` logs; :func:`calibrated_reward_model` wraps the reward model with
the fitted pairwise temperature (:func:`calibkit.calibrators.calibrate`, its card stating ``T``,
the pairs and the numbers before and after); :func:`save_calibrated` saves it with the tokenizer
to ``<output_dir>/calibrated-preference/`` and pushes it with ``args.push_to_hub``, as
:mod:`calibkit.callbacks.end_fitting` does for classifiers.
"""

from __future__ import annotations

import math
import os
import warnings
from typing import Any

import numpy as np

from calibkit.metrics.preferences import preference_metrics

__all__ = ["SETTINGS_KEYS", "calibrated_reward_model", "logged_numbers", "save_calibrated"]

SETTINGS_KEYS = ("temperature", "n_bins")
"""Keys of the report that echo its settings: not logged."""


def logged_numbers(report: dict[str, Any], outer: str = "") -> dict[str, float]:
    """Return the numbers of a report, nested dicts flattened as ``<outer>_<inner>``.

    Arrays (the reliability diagram's) are left out; None (an accuracy over no pair, a correlation
    of a constant) is NaN, so that every evaluation logs the same keys.

    Parameters
    ----------
    report : dict
        What :func:`~calibkit.metrics.preferences.preference_metrics` returns.
    outer : str, default ""
        The name of the dict ``report`` is in (the keys' prefix).

    Returns
    -------
    dict of str to float
    """
    out: dict[str, float] = {}
    for key, value in report.items():
        name = f"{outer}_{key}" if outer else str(key)
        if isinstance(value, dict):
            out.update(logged_numbers(value, name))
        elif value is None:
            out[name] = math.nan
        elif isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)) and name not in SETTINGS_KEYS:
            out[name] = float(value)
    return out


def calibrated_reward_model(model: Any, temperature: float, pairs: Any, n_bins: int, fitted_on: str) -> Any:
    """Return ``model`` wrapped by :func:`calibkit.calibrators.calibrate` with the pairwise temperature.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A reward model (``num_labels=1``).
    temperature : float
        The fitted pairwise temperature ``T``.
    pairs : PreferencePairs
        The pairs ``T`` was fitted on: the card's preference metrics before (``T = 1``) and after.
    n_bins : int
        The ECE's bins.
    fitted_on : str
        The data ``T`` was fitted on, in words.

    Returns
    -------
    CalibratedModelForSequenceClassification
        Whose rewards are the model's divided by ``T``.
    """
    from calibkit.calibrators.calibrated import calibrate

    lengths = {"length_chosen": pairs.length_chosen, "length_rejected": pairs.length_rejected}
    metrics = {
        when: preference_metrics(pairs.margins, temperature=t, n_bins=n_bins, **lengths)
        for when, t in (("before", 1.0), ("after", temperature))
    }
    return calibrate(model, temperature, metrics=metrics, fitted_on=fitted_on)


def save_calibrated(calibrated: Any, args: Any, processing_class: Any = None) -> str:
    """Save a calibrated model (and the tokenizer) to ``<output_dir>/calibrated-preference/``; push it if asked.

    Parameters
    ----------
    calibrated : transformers.PreTrainedModel
        The calibrated model.
    args : transformers.TrainingArguments
        ``output_dir``; with ``push_to_hub``, ``hub_model_id`` and ``hub_token`` (the folder is
        uploaded under ``calibrated-preference/``; a failed upload warns, the model stays saved).
    processing_class : object, optional
        The tokenizer, saved beside the model.

    Returns
    -------
    str
        The folder.
    """
    folder = os.path.join(args.output_dir, "calibrated-preference")
    calibrated.save_pretrained(folder)
    if processing_class is not None and hasattr(processing_class, "save_pretrained"):
        processing_class.save_pretrained(folder)
    if not getattr(args, "push_to_hub", False):
        return folder
    from huggingface_hub import HfApi

    repo_id = args.hub_model_id or os.path.basename(os.path.abspath(args.output_dir))
    try:
        HfApi(token=args.hub_token).upload_folder(
            repo_id=repo_id,
            folder_path=folder,
            path_in_repo="calibrated-preference",
            commit_message="calibkit: calibrated reward model (pairwise temperature)",
        )
    except Exception as exc:  # a failed upload must not lose the trained model
        warnings.warn(
            f"calibkit: pushing calibrated-preference to {repo_id} failed: {exc}", RuntimeWarning, stacklevel=2
        )
    return folder
