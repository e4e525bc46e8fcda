"""One list of settings, every door: each entry point that takes settings as keywords spells out every
field of CalibrationSettings (or says here why it does not), so a setting added to the dataclass and
forgotten at a door fails this test instead of being silently unavailable there."""

import inspect

import pytest

import calibkit
from calibkit.callbacks import CalibrationCallback
from calibkit.io.dask import calibration_report as dask_report
from calibkit.io.shards import stream_report
from calibkit.metrics.accumulator import CalibrationAccumulator
from calibkit.metrics.bootstrap import bootstrap_intervals
from calibkit.metrics.settings import CalibrationSettings, names

# door -> the settings it leaves out on purpose, with the reason
DOORS = {
    "calibration_report": (calibkit.calibration_report, {}),
    "CalibrationAccumulator": (CalibrationAccumulator, {}),
    "bootstrap_intervals": (bootstrap_intervals, {}),
    "CalibrationCallback": (CalibrationCallback, {"from_logits": "the Trainer always hands over logits"}),
    "stream_report": (stream_report, {"from_logits": "each shard says it by its column name"}),
    "dask.calibration_report": (dask_report, {}),
}


def missing_settings(door, setting_names, excused) -> list[str]:
    parameters = inspect.signature(door).parameters
    return [name for name in setting_names if name not in parameters and name not in excused]


@pytest.mark.parametrize("door", sorted(DOORS))
def test_every_setting_is_a_keyword_of_the_door(door):
    function, excused = DOORS[door]
    assert missing_settings(function, names(), excused) == []
    assert set(excused) <= set(names())  # an excuse for a setting that no longer exists is stale


@pytest.mark.parametrize("door", sorted(DOORS))
def test_the_doors_defaults_are_the_settings_defaults(door):
    function, _ = DOORS[door]
    defaults = CalibrationSettings()
    for name, parameter in inspect.signature(function).parameters.items():
        if name in names() and parameter.default is not None and parameter.default is not inspect.Parameter.empty:
            assert parameter.default == getattr(defaults, name), f"{door}: {name}={parameter.default!r}"


def test_a_setting_added_to_the_dataclass_and_not_to_a_door_is_seen():
    planted = (*names(), "smoothing_bandwidth")
    assert missing_settings(calibkit.calibration_report, planted, {}) == ["smoothing_bandwidth"]


def test_the_streaming_doors_take_eps(tmp_path):
    """eps (the clip of NLL and ECD's logs) was missing at the shards and Dask doors."""
    import numpy as np

    p = np.array([[1.0, 0.0], [0.6, 0.4], [0.2, 0.8]])
    y = np.array([1, 0, 1])
    np.savez(tmp_path / "a.npz", probs=p, labels=y)
    for eps in (1e-12, 1e-3):
        streamed = stream_report(tmp_path, metrics=["nll"], eps=eps, progress=False)["nll"]
        assert streamed == pytest.approx(calibkit.nll(p, y, eps=eps), rel=1e-12)
    assert calibkit.nll(p, y, eps=1e-3) != calibkit.nll(p, y, eps=1e-12)
