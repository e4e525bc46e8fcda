"""A calibrated reward model: its one output divided by the pairwise temperature, in the one head table.

A reward model is a ``*ForSequenceClassification`` with ``num_labels=1``, trained with the
Bradley-Terry loss (TRL's ``RewardTrainer``), so ``sigmoid(r_a - r_b)`` is its probability that
``a`` is preferred to ``b``. :func:`calibrate_reward_model` (what
:func:`~calibkit.calibrators.calibrate` calls for such a model) wraps it with the ``reward-ts``
head of :data:`~calibkit.calibrators.modeling_calibkit.HEADS`: the reward divided by ``T``, so every
ranking is unchanged and ``sigmoid((r_a - r_b) / T)`` is calibrated. It saves, reloads with
``trust_remote_code=True`` without calibkit, and pushes as every calibrated model does; its model
card states ``T``, the data it was fitted on and the caller's before/after preference metrics.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calibkit.calibrators.preference import PreferenceTemperature
from calibkit.calibrators.wrapping import task_of, wrap
from calibkit.metrics.preferences import PREFERENCE_METRICS

__all__ = ["calibrate_reward_model", "is_reward_model"]


def is_reward_model(model: Any) -> bool:
    """Tell whether ``model`` is a reward model: a sequence classifier with one output.

    Parameters
    ----------
    model : transformers.PreTrainedModel

    Returns
    -------
    bool
    """
    try:
        task = task_of(model)
    except ValueError:
        return False
    return task == "sequence-classification" and getattr(model.config, "num_labels", None) == 1


def _temperature_of(calibrator: Any) -> PreferenceTemperature:
    """Return the fitted pairwise temperature ``calibrator`` means: a number ``T`` or a PreferenceTemperature."""
    if isinstance(calibrator, PreferenceTemperature):
        if not hasattr(calibrator, "temperature_"):
            raise ValueError("`calibrator`: this PreferenceTemperature is not fitted: call .fit(margins) first")
        return calibrator
    if calibrator is None or isinstance(calibrator, bool) or not isinstance(calibrator, (int, float, np.number)):
        raise ValueError(
            "`calibrator`: a reward model is calibrated by its pairwise temperature: pass T (a number > 0) or "
            f"PreferenceTemperature().fit(margins), got {calibrator!r}"
        )
    try:
        return PreferenceTemperature.from_temperature(float(calibrator))
    except ValueError:
        raise ValueError(f"`calibrator`: the temperature must be a finite number > 0, got {calibrator!r}") from None


def _side(metrics: dict, side: str, temperature: float) -> tuple[dict[str, float], int | None]:
    """Return one side's numbers (and its pair count when it is a ``preference_metrics`` result), checked."""
    values = metrics.get(side)
    if not isinstance(values, dict) or not values:
        raise ValueError(f'`metrics`: "{side}" must be a non-empty dict of metric name to number')
    pairs = None
    if "pairs" in values and "temperature" in values:  # a preference_metrics result: its numbers
        pairs, measured = values["pairs"], values["temperature"]
        expected = 1.0 if side == "before" else temperature
        if not math.isclose(float(measured), expected, rel_tol=1e-9):
            raise ValueError(
                f'`metrics`: "{side}" was measured at temperature {measured!r}, expected {expected!r} '
                f"(before: 1, the model as trained; after: the model's T)"
            )
        values = {name: values[name] for name in PREFERENCE_METRICS if name in values}
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not math.isfinite(value):
            raise ValueError(f'`metrics`: "{side}" {name!r} must be a finite number, got {value!r}')
    return {str(name): float(value) for name, value in values.items()}, pairs


def _check_metrics(metrics: Any, temperature: float) -> dict:
    """Return the card's metrics ``{"n", "before", "after"}`` as plain JSON numbers, checked.

    Each side is a dict of metric name to number, or what
    :func:`calibkit.metrics.preferences.preference_metrics` returns (its :data:`PREFERENCE_METRICS`
    kept, ``n`` its pairs, its temperature checked: 1 before, ``T`` after).
    """
    if not isinstance(metrics, dict):
        raise ValueError(
            '`metrics` must be a dict {"before": {name: number}, "after": {name: number}, "n": pairs}, '
            f"got {type(metrics).__name__}"
        )
    unknown = set(metrics) - {"before", "after", "n"}
    if unknown:
        raise ValueError(f'`metrics`: unknown keys {sorted(unknown)}; expected "before", "after" and "n"')
    (before, pairs_before), (after, pairs_after) = (_side(metrics, s, temperature) for s in ("before", "after"))
    if set(before) != set(after):
        raise ValueError(
            f'`metrics`: "before" and "after" must name the same metrics, got {sorted(before)} and {sorted(after)}'
        )
    if pairs_before != pairs_after:
        raise ValueError(f'`metrics`: "before" counts {pairs_before} pairs, "after" {pairs_after}')
    n = metrics.get("n", pairs_before)
    out: dict = {"before": before, "after": after}
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f'`metrics`: "n" must be the number of pairs (an integer >= 1), got {n!r}')
        if pairs_before is not None and n != pairs_before:
            raise ValueError(f'`metrics`: "n" is {n} but the metrics count {pairs_before} pairs')
        out["n"] = int(n)
    return out


def calibrate_reward_model(
    model: Any, calibrator: Any, metrics: dict | None = None, fitted_on: str | None = None, given: dict | None = None
):
    """Wrap a reward model with the ``reward-ts`` head: its reward divided by the pairwise temperature ``T``.

    What :func:`~calibkit.calibrators.calibrate` does for a model with one output.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A ``*ForSequenceClassification`` with ``num_labels=1`` (held, not copied). A decoder
        (GPT-2, Llama, ...) reads the reward at the last non-pad token: set its
        ``config.pad_token_id`` (TRL's trainers set it, on the calibrated model's config too).
    calibrator : float or PreferenceTemperature
        ``T > 0``, or a fitted :class:`~calibkit.calibrators.preference.PreferenceTemperature`.
    metrics : dict, optional
        The preference metrics before and after ``T``, for the card:
        ``{"before": {name: number}, "after": {name: number}, "n": pairs}``, or
        ``{"before": preference_metrics(m), "after": preference_metrics(m, temperature=T)}``
        (:func:`calibkit.metrics.preferences.preference_metrics`: its ECE, Brier, NLL, accuracy,
        AURC and mean confidence are kept, ``n`` is its pairs).
    fitted_on : str, optional
        The data ``T`` was fitted on, in words (the card states it).
    given : dict, optional
        The classifier arguments of ``calibrate`` (``method``, ``logits``, ``labels``,
        ``dataset``): refused when set, since a reward model takes none of them.

    Returns
    -------
    CalibratedModelForSequenceClassification
        Whose ``logits`` (the reward, shape ``(N, 1)``) are the base model's divided by ``T``.

    Raises
    ------
    ValueError
        On a model that is not a reward model, a temperature that is not a finite number > 0, an
        unfitted ``PreferenceTemperature``, a classifier argument, or bad ``metrics``/``fitted_on``.
    """
    if not is_reward_model(model):
        labels = getattr(getattr(model, "config", None), "num_labels", "?")
        raise ValueError(
            f"`model`: a pairwise temperature calibrates a reward model (a *ForSequenceClassification with "
            f"num_labels=1), got {type(model).__name__} with num_labels={labels}; a classifier takes a Calibrator "
            "(e.g. TemperatureScaling.from_temperature(T, num_labels))"
        )
    extra = sorted(name for name, value in (given or {}).items() if value is not None)
    if extra:
        raise ValueError(
            f"`{extra[0]}`: a reward model is calibrated by its pairwise temperature alone: pass T or "
            "PreferenceTemperature().fit(margins) as `calibrator` (margins = reward_chosen - reward_rejected)"
        )
    block = _temperature_of(calibrator).calibration_block()
    if fitted_on is not None:
        if not isinstance(fitted_on, str) or not fitted_on.strip():
            raise ValueError(
                f"`fitted_on` must be a non-empty string naming the data T was fitted on, got {fitted_on!r}"
            )
        block["fitted_on"] = fitted_on.strip()
    if metrics is not None:
        block["metrics"] = _check_metrics(metrics, block["temperature"])
    return wrap(model, "sequence-classification", block)
