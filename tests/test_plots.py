"""Plot displays (scikit-learn's Display style) and the report's figures.

The displays draw what the metrics compute (same bins, same numbers), on the axes they are
given, from predictions or from statistics alike; library code never switches the backend.
"""

import matplotlib
import numpy as np
import pytest
from matplotlib.figure import Figure

import calibkit
from calibkit.metrics import CalibrationAccumulator
from calibkit.plots import RegionPlot, ReliabilityDiagram, SmoothReliabilityDiagram
from tests.conftest import softmax

RNG = np.random.default_rng(0)
LOGITS = RNG.normal(size=(3000, 4)) * 2
LABELS = RNG.integers(0, 4, 3000)


def test_reliability_diagram_draws_the_bins_of_ece():
    ax = Figure().subplots()
    display = ReliabilityDiagram.from_predictions(LOGITS, LABELS, n_bins=10, from_logits=True, ax=ax, label="m")
    assert display.ax_ is ax and display.figure_ is ax.figure
    assert display.ece == pytest.approx(calibkit.ece(LOGITS, LABELS, n_bins=10, from_logits=True), abs=1e-12)
    _, bins = calibkit.ece(LOGITS, LABELS, n_bins=10, from_logits=True, return_bins=True)
    np.testing.assert_array_equal(display.count, bins["count"])
    filled = bins["count"] > 0
    np.testing.assert_allclose(display.line_.get_ydata(), bins["accuracy"][filled], rtol=0, atol=1e-12)
    np.testing.assert_allclose(display.line_.get_xdata(), (np.flatnonzero(filled) + 0.5) / 10)
    assert len(display.bars_.patches) == filled.sum()
    assert display.line_.get_label() == "m"


def test_from_statistics_equals_from_predictions_and_draws_per_class():
    probs = softmax(LOGITS)
    stats = CalibrationAccumulator(("ece", "subset_ece")).update(probs[:1000], LABELS[:1000])
    stats.update(probs[1000:], LABELS[1000:])
    a = ReliabilityDiagram.from_statistics(stats.statistics, ax=Figure().subplots())
    b = ReliabilityDiagram.from_predictions(probs, LABELS, ax=Figure().subplots())
    np.testing.assert_allclose(a.accuracy, b.accuracy, rtol=0, atol=1e-12, equal_nan=True)
    for k in range(4):
        ax, support_ax = Figure().subplots(2, 1)
        display = ReliabilityDiagram.from_statistics(stats.statistics, class_index=k, ax=ax, support_ax=support_ax)
        assert display.ece == pytest.approx(calibkit.subset_ece(probs, LABELS)[k], abs=1e-12)
        assert sum(p.get_height() for p in display.support_bars_.patches) == (LABELS == k).sum()


def test_region_plot_counts_the_bins_rbece_counts():
    display = RegionPlot.from_predictions(LOGITS, LABELS, rbece_bins=20, theta=40, from_logits=True)
    assert display.rbece == pytest.approx(calibkit.rbece(LOGITS, LABELS, from_logits=True), abs=1e-12)
    assert display.counted.tolist() == (display.count > 40).tolist()
    assert len(display.counted_bars_.patches) == display.counted.sum()
    assert len(display.ignored_bars_.patches) == (~display.counted).sum()
    np.testing.assert_array_equal(display.support_line_.get_ydata(), display.count)
    # No bin counted: NaN, drawn, without a warning.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(
            RegionPlot.from_predictions(LOGITS[:30], LABELS[:30], from_logits=True, ax=Figure().subplots()).rbece
        )


def test_smooth_reliability_diagram_draws_the_numbers_of_smooth_reliability():
    ax = Figure().subplots()
    display = SmoothReliabilityDiagram.from_predictions(LOGITS, LABELS, from_logits=True, ax=ax)
    curve = calibkit.smooth_reliability(LOGITS, LABELS, from_logits=True)
    assert display.ax_ is ax and display.smece == calibkit.smece(LOGITS, LABELS, from_logits=True)
    assert display.bandwidth == curve["bandwidth"]
    np.testing.assert_array_equal(display.line_.get_xdata(), curve["grid"])
    np.testing.assert_array_equal(display.line_.get_ydata(), curve["accuracy"])
    assert display.line_.get_label().startswith("smECE")
    assert display.density_ is not None
    bare = SmoothReliabilityDiagram(curve, label="m").plot(Figure().subplots(), density=False, diagonal=False)
    assert bare.density_ is None and bare.line_.get_label() == "m" and len(bare.ax_.lines) == 1
    with pytest.raises(ValueError, match=r"`curve` lacks \['bandwidth'"):
        SmoothReliabilityDiagram({k: v for k, v in curve.items() if k != "bandwidth"})
    with pytest.raises(ValueError, match=r"`bandwidth` must be a number"):
        SmoothReliabilityDiagram.from_predictions(LOGITS, LABELS, from_logits=True, bandwidth=0, ax=ax)


def test_bad_arguments_name_themselves():
    stats = CalibrationAccumulator(("ece",)).update(softmax(LOGITS), LABELS).statistics
    with pytest.raises(ValueError, match="`n_bins`: the statistics hold top-label tables of \\[15\\]"):
        ReliabilityDiagram.from_statistics(stats, n_bins=10, ax=Figure().subplots())
    with pytest.raises(ValueError, match="`rbece_bins`"):
        RegionPlot.from_statistics(stats, ax=Figure().subplots())
    with pytest.raises(ValueError, match="`class_index` must lie in \\[0, 4\\)"):
        ReliabilityDiagram.from_statistics(stats, class_index=4, ax=Figure().subplots())
    with pytest.raises(ValueError, match="`class_index` must be an integer"):
        ReliabilityDiagram.from_statistics(stats, class_index=1.0, ax=Figure().subplots())
    with pytest.raises(ValueError, match="`statistics` must be a CalibrationStatistics"):
        ReliabilityDiagram.from_statistics({"top": 1})
    with pytest.raises(ValueError, match="`theta`"):
        RegionPlot.from_predictions(LOGITS, LABELS, theta=-1, from_logits=True)


def test_report_figures_keep_the_callers_backend(tmp_path):
    from calibkit.plots.figures import write_figures
    from calibkit.verdicts.comparison import compare_calibrators

    backend = matplotlib.get_backend()
    y = RNG.integers(0, 3, 800)
    z = RNG.normal(size=(800, 3))
    z[np.arange(800), y] += 1.5
    comparison = compare_calibrators(z[:400], y[:400], z[400:], y[400:], methods=("uncalibrated", "ts"))
    paths = write_figures(comparison, tmp_path)
    assert sorted(paths) == [
        "class_ece_vs_support",
        "regions",
        "reliability",
        "reliability_per_class",
        "reliability_smooth",
    ]
    assert all(p.stat().st_size > 10_000 for p in paths.values())
    assert matplotlib.get_backend() == backend
