"""Re-split intervals, paired comparisons and verdicts (issue 15), and the report files they feed."""

import json
import math
import re

import numpy as np
import pytest

import calibkit.verdicts.resplits as resplits_module
from calibkit.verdicts.comparison import TABLE_METRICS, compare_calibrators
from calibkit.verdicts.reporting import write_report
from calibkit.verdicts.resplits import Resplits, markdown_table, resplit_comparison, to_json, verdicts
from tests.test_pages import check_page


def token_logits(n, length, k=4, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, length, k)) * 2
    z[..., 0] += 2
    p = np.exp(z / 2)
    p /= p.sum(-1, keepdims=True)
    y = (rng.random((n, length, 1)) > p.cumsum(-1)).sum(-1).clip(0, k - 1)
    y[rng.random((n, length)) < 0.3] = -100
    return z, y


def test_each_resplit_fits_on_whole_sequences_of_the_original_sizes(monkeypatch):
    """Tokens of one sequence never straddle the two parts, and each part has the original
    number of sequences (the calibration part as many as the validation set)."""
    zv, yv = token_logits(30, 5, seed=1)
    zt, yt = token_logits(20, 7, seed=2)  # another padded length, as Trainer gives per split
    seen = []

    def spy(z_cal, y_cal, z_eval, y_eval, **kwargs):
        seen.append((z_cal, z_eval))
        return compare_calibrators(z_cal, y_cal, z_eval, y_eval, **kwargs)

    monkeypatch.setattr(resplits_module, "compare_calibrators", spy)
    out = resplit_comparison(zv, yv, zt, yt, resplits=6, methods=("uncalibrated", "ts"), theta=2, seed=3)
    # each labelled token row is identified by its logits (continuous: no two rows equal)
    rows = np.concatenate([zv[yv != -100], zt[yt != -100]])
    sequence = np.concatenate(
        [
            np.broadcast_to(np.arange(30)[:, None], yv.shape)[yv != -100],
            30 + np.broadcast_to(np.arange(20)[:, None], yt.shape)[yt != -100],
        ]
    )
    lookup = {row.tobytes(): s for row, s in zip(rows, sequence)}
    assert len(seen) == 6
    for z_cal, z_eval in seen:
        cal = {lookup[r.tobytes()] for r in z_cal}
        ev = {lookup[r.tobytes()] for r in z_eval}
        assert not cal & ev
        assert len(cal) <= 30 and len(cal | ev) <= 50 and len(z_cal) + len(z_eval) == len(rows)
    assert out.unit == "sequences" and out.n_calibration == 30 and out.n_evaluation == 20


def test_resplit_values_equal_the_comparison_on_that_split():
    rng = np.random.default_rng(0)
    zv = rng.normal(size=(200, 3)) * 3
    yv = rng.integers(0, 3, 200)
    zt = rng.normal(size=(150, 3)) * 3
    yt = rng.integers(0, 3, 150)
    zv[np.arange(200), yv] += 2
    zt[np.arange(150), yt] += 2
    out = resplit_comparison(zv, yv, zt, yt, resplits=3, methods=("uncalibrated", "ts", "wts"), theta=5, seed=7)
    # the same permutations, drawn as the function draws them
    draw = np.random.default_rng(7)
    z, y = np.concatenate([zv, zt]), np.concatenate([yv, yt])
    for r in range(3):
        cal = np.zeros(350, dtype=bool)
        cal[draw.permutation(350)[:200]] = True
        ref = compare_calibrators(z[cal], y[cal], z[~cal], y[~cal], methods=("uncalibrated", "ts", "wts"), theta=5)
        for method in ("uncalibrated", "ts", "wts"):
            for m in ("ece", "cece", "rbece", "accuracy", "nll"):
                assert out.column(method, m)[r] == pytest.approx(ref.rows[method][m], rel=1e-12, nan_ok=True)
    s = out.summary("ts", "ece")
    values = out.column("ts", "ece")
    assert s["mean"] == pytest.approx(values.mean()) and s["std"] == pytest.approx(values.std(ddof=1))
    assert s["low"] == pytest.approx(np.percentile(values, 2.5)) and s["high"] == pytest.approx(
        np.percentile(values, 97.5)
    )


def fake(values: dict[str, dict[str, list[float]]], **fields) -> Resplits:
    """A Resplits whose columns are given (other metrics NaN); ``fields`` override the others."""
    metrics = list(TABLE_METRICS)
    r = len(next(iter(next(iter(values.values())).values())))
    table = {}
    for method, columns in values.items():
        table[method] = np.full((r, len(metrics)), np.nan)
        for metric, column in columns.items():
            table[method][:, metrics.index(metric)] = column
    k = 2
    settings = dict(
        methods=list(values), metrics=metrics, values=table, per_class={m: np.zeros((r, k)) for m in values},
        support=np.array([5, 5]), class_names=["a", "b"], resplits=r, n_calibration=10, n_evaluation=10, seed=0,
    )  # fmt: skip
    return Resplits(**{**settings, **fields})


def test_paired_shares_respect_the_direction_of_each_metric():
    out = fake(
        {
            "uncalibrated": {"ece": [0.3] * 20, "accuracy": [0.8] * 20, "ecd": [0.2] * 20},
            "ts": {"ece": [0.1] * 19 + [0.4], "accuracy": [0.8] * 10 + [0.9] * 10, "ecd": [-0.1] * 20},
        }
    )
    assert out.paired("ts", "uncalibrated", "ece")["better"] == 0.95
    assert out.paired("ts", "uncalibrated", "ece")["worse"] == 0.05
    acc = out.paired("ts", "uncalibrated", "accuracy")
    assert acc["better"] == 0.5 and acc["worse"] == 0.0  # ties are neither
    assert out.paired("ts", "uncalibrated", "ecd")["better"] == 1.0  # |-0.1| < |0.2|: closer to 0
    table = markdown_table(out)
    assert re.search(r"\| ece \| 0\.3000 ± 0\.0000 \[0\.3000, 0\.3000\] \| 0\.1150 ± .* ▲ \|", table)


@pytest.mark.parametrize(
    "wts, ts, verdict",
    [
        ([0.1] * 20, [0.2] * 20, "holds"),
        ([0.3] * 20, [0.2] * 20, "does not hold"),
        ([0.1] * 10 + [0.3] * 10, [0.2] * 20, "inconclusive"),
        ([0.1] * 18 + [0.3] * 2, [0.2] * 20, "inconclusive"),  # 90% < 95%
        ([0.1] * 19 + [0.3], [0.2] * 20, "holds"),
    ],
)
def test_verdicts_follow_the_95_percent_rule(wts, ts, verdict):
    out = fake({"uncalibrated": {"cece": [0.5] * 20}, "ts": {"cece": ts}, "wts": {"cece": wts}})
    claim = next(c for c in verdicts(out) if c["claim"] == "WTS gives a lower CECE than TS")
    assert claim["verdict"] == verdict


def test_rbece_against_ece_and_accuracy_claims():
    out = fake(
        {
            "uncalibrated": {"rbece": [0.3] * 20, "ece": [0.1] * 20, "accuracy": [0.8] * 20},
            "ts": {"accuracy": [0.8] * 20},
            "rd-ts": {"accuracy": [0.7] * 20},
        }
    )
    claims = {c["claim"]: c["verdict"] for c in verdicts(out)}
    assert claims["RBECE is larger than ECE on this data (it exposes miscalibration that ECE averages away)"] == "holds"
    assert claims["TS keeps the accuracy of the uncalibrated model"] == "holds"
    assert claims["RD-TS keeps the accuracy of the uncalibrated model"] == "does not hold"


def test_report_files_carry_intervals_verdicts_and_figures(tmp_path):
    rng = np.random.default_rng(4)
    k = 5
    counts = [400, 200, 60, 12, 4]  # two classes too small for a reliability panel
    y = np.repeat(np.arange(k), counts)
    z = rng.normal(size=(y.size, k))
    z[np.arange(y.size), y] += 2.5
    z *= 2
    order = rng.permutation(y.size)
    z, y = z[order], y[order]
    half = y.size // 2
    names = ["big", "mid", "small", "tiny", "rare"]
    comparison = compare_calibrators(z[:half], y[:half], z[half:], y[half:], class_names=names, theta=5)
    resplits = resplit_comparison(z[:half], y[:half], z[half:], y[half:], resplits=5, class_names=names, theta=5)
    paths = write_report(comparison, tmp_path, "test report", resplits=resplits)
    report = json.loads(paths["json"].read_text())
    cell = report["resplits"]["table"]["wts"]["cece"]
    assert set(cell) >= {"mean", "std", "low", "high", "vs_uncalibrated", "vs_ts"}
    assert cell["mean"] == pytest.approx(np.nanmean(resplits.column("wts", "cece")))
    found = {c["verdict"] for c in report["resplits"]["verdicts"]}
    assert found <= {"holds", "does not hold", "inconclusive", "cannot be tested here", "not testable with this data"}
    assert "not testable with this data" in found  # the claims that need the authors' data are listed, with why
    assert len(report["resplits"]["verdicts"]) >= 5
    page = paths["html"].read_text()
    assert page.count("data:image/png;base64,") == 5
    check_page(page)  # the answer first, no empty section, nothing fetched from a network
    assert 'id="verdicts"' in page and "WTS gives a lower CECE than TS" in page  # the verdicts as a table
    assert "Verdicts on the papers' claims" in paths["markdown"].read_text()
    meaning = report["resplits"]["what_this_means"]
    assert meaning.startswith("For overall calibration pick ")
    assert paths["markdown"].read_text().index("## What this means") < paths["markdown"].read_text().index("## Over")
    assert f"## What this means\n\n{meaning}" in paths["verdicts"].read_text() and "id='what-this-means'" in page
    assert (tmp_path / "class_ece_vs_support.png").stat().st_size > 10_000
    assert not math.isnan(cell["std"])
    assert json.loads(json.dumps(to_json(resplits, verdicts(resplits))))["resplits"] == 5


def test_small_classes_are_listed_not_drawn(tmp_path):
    from calibkit.plots.figures import MIN_PANEL_SUPPORT, small_classes_line

    rng = np.random.default_rng(5)
    y = np.repeat(np.arange(3), [300, 80, 10])
    z = rng.normal(size=(y.size, 3))
    z[np.arange(y.size), y] += 2
    comparison = compare_calibrators(z, y, z, y, methods=("uncalibrated", "ts"), class_names=["a", "b", "c"])
    support = comparison.statistics["uncalibrated"].top_table(15)[:, :, 0].sum(axis=1)
    line = small_classes_line(comparison, [2], support)
    assert line.startswith(f"Fewer than {MIN_PANEL_SUPPORT} test samples") and "c (n=10, ECE" in line


def test_compare_calibrators_bootstraps_token_logits_by_sequence():
    """The single split's bootstrap intervals resample sentences, as the re-splits do (tokens of a
    sentence are not independent): they equal bootstrap_intervals on the (N, L, K) input."""
    from calibkit.metrics.bootstrap import bootstrap_intervals

    rng = np.random.default_rng(0)
    z = rng.normal(size=(60, 12, 3)) * 3
    y = rng.integers(0, 3, (60, 12))
    y[:, 9:] = -100
    comparison = compare_calibrators(z[:30], y[:30], z[30:], y[30:], methods=("uncalibrated",), bootstrap=40, seed=2)
    expected = bootstrap_intervals(z[30:], y[30:], from_logits=True, bootstrap=40, seed=2, theta=40)
    assert expected["n_blocks"] == 30
    for name, (low, high) in comparison.intervals["uncalibrated"].items():
        np.testing.assert_allclose((low, high), expected["intervals"][name], rtol=1e-9, atol=1e-12, err_msg=name)
    other = np.where(y == -100, -1, y)  # another ignore_index: the same intervals
    again = compare_calibrators(
        z[:30], other[:30], z[30:], other[30:], methods=("uncalibrated",), bootstrap=40, seed=2, ignore_index=-1
    )
    assert again.intervals["uncalibrated"] == comparison.intervals["uncalibrated"]
