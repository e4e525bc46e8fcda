"""Reward models' preference pairs (calibkit.lm.preferences): RewardBench's per-sample output and plain
files read exactly, bad input named by file, line and field, the report per subset and pooled with
RewardBench's sections as RewardBench computes them, and the re-splits of the fit."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from calibkit.calibrators.preference import fit_preference_temperature
from calibkit.lm.preferences import (
    Preferences,
    preference_metrics,
    preference_report,
    preference_resplits,
    read_preferences,
    rewardbench_sections,
)
from calibkit.lm.preferences.rewardbench import EXAMPLE_COUNTS, PRIOR_SETS, SUBSET_MAPPING

SUBSETS = ["alpacaeval-easy", "mt-bench-hard", "math-prm", "hep-cpp", "xstest-should-respond", "shp"]


def rewardbench_rows(n=240, seed=0):
    """Rows as rewardbench writes ``{model}_outputs.jsonl``: some scores lists of one number (a (B, 1) head)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        c, r = float(rng.normal(1, 2)), float(rng.normal(0, 2))
        if i % 9 == 0:
            r = c  # a tie (bf16 rounding)
        rows.append({
            "prompt": f"q{i}", "results": int(c > r),
            "scores_chosen": [c] if i % 5 == 0 else c, "scores_rejected": [r] if i % 5 == 0 else r,
            "text_chosen": "x" * int(rng.integers(1, 60)), "text_rejected": "y" * int(rng.integers(1, 60)),
            "id": i, "subset": SUBSETS[i % len(SUBSETS)],
        })  # fmt: skip
    return rows


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def scalar(v):
    return v[0] if isinstance(v, list) else v


def test_rewardbench_outputs_are_read_exactly(tmp_path):
    rows = rewardbench_rows()
    prefs = read_preferences(write_jsonl(tmp_path / "m_outputs.jsonl", rows))
    assert prefs.ids.tolist() == [str(r["id"]) for r in rows]
    assert prefs.subset.tolist() == [r["subset"] for r in rows]
    assert prefs.chosen.tolist() == [scalar(r["scores_chosen"]) for r in rows]
    assert prefs.rejected.tolist() == [scalar(r["scores_rejected"]) for r in rows]
    assert prefs.length_chosen.tolist() == [len(r["text_chosen"]) for r in rows]
    assert prefs.origin[3] == f"{tmp_path / 'm_outputs.jsonl'}, line 4" and prefs.dropped == []


def rewardbench_section_scores(rows):
    """RewardBench's own computation, written plainly: per-subset accuracy of its ``results``, then the sections."""
    grouped = {}
    for subset in sorted({r["subset"] for r in rows}):
        results = [r["results"] for r in rows if r["subset"] == subset]
        grouped[subset] = sum(results) / len(results)
    sections = {}
    for section, tests in SUBSET_MAPPING.items():
        total, examples = 0.0, 0
        for test in tests:
            if test in grouped:
                total += grouped[test] * EXAMPLE_COUNTS[test]
                examples += EXAMPLE_COUNTS[test]
        if examples:
            sections[section] = total / examples
    prior = [grouped[s] for s in PRIOR_SETS if s in grouped]
    if prior:
        sections["Prior Sets (0.5 weight)"] = sum(prior) / len(prior)
    weights = {"Prior Sets (0.5 weight)": 1}
    total = sum(weights.get(s, 2) for s in sections)
    sections["Score"] = sum(v * weights.get(s, 2) for s, v in sections.items()) / total
    return grouped, sections


def test_report_per_subset_and_rewardbench_sections_equal_rewardbench(tmp_path):
    rows = rewardbench_rows()
    report = preference_report(read_preferences(write_jsonl(tmp_path / "m_outputs.jsonl", rows)))
    grouped, sections = rewardbench_section_scores(rows)
    assert {s: r["accuracy"] for s, r in report["subsets"].items()} == pytest.approx(grouped, rel=1e-12)
    assert report["sections"] == pytest.approx(sections, rel=1e-12)
    assert report["pooled"]["accuracy"] == pytest.approx(sum(r["results"] for r in rows) / len(rows), rel=1e-12)
    assert report["ties"] == sum(1 for i in range(len(rows)) if i % 9 == 0) and report["dropped"] == 0
    margins = np.array([scalar(r["scores_chosen"]) - scalar(r["scores_rejected"]) for r in rows])
    mask = np.array([r["subset"] == "math-prm" for r in rows])
    want = preference_metrics(margins[mask])
    for k in ("ece", "brier", "nll", "aurc"):
        assert report["subsets"]["math-prm"][k] == want[k]


def test_sections_only_for_rewardbench_subsets():
    prefs = Preferences(
        np.array(["a", "b", "c"], dtype=object), np.array(["mine", "mine", "yours"], dtype=object),
        np.array([1.0, 2.0, 0.0]), np.array([0.0, 3.0, -1.0]),
    )  # fmt: skip
    report = preference_report(prefs)
    assert report["sections"] is None and "RewardBench" in report["sections_note"]
    assert set(report["subsets"]) == {"mine", "yours"} and report["pooled"]["pairs"] == 3
    only = preference_report(prefs, subsets=["yours"])
    assert only["pooled"]["pairs"] == 1 and list(only["subsets"]) == ["yours"]
    assert rewardbench_sections({"alpacaeval-easy": 1.0}) == {"Chat": 1.0, "Score": 1.0}


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_plain_files_in_every_format(tmp_path, suffix):
    import pyarrow as pa
    import pyarrow.csv
    import pyarrow.parquet as pq

    table = pa.table({
        "id": ["p1", "p2", "p3"], "subset": ["s", "s", "t"], "reward_chosen": [1.5, -0.25, 2.0],
        "reward_rejected": [0.5, 0.75, 2.0], "length_chosen": [10, 20, 5], "length_rejected": [12, 3, 5],
    })  # fmt: skip
    path = tmp_path / f"pairs{suffix}"
    if suffix == ".csv":
        pyarrow.csv.write_csv(table, path)
    elif suffix == ".parquet":
        pq.write_table(table, path)
    else:
        write_jsonl(path, table.to_pylist())
    prefs = read_preferences(path)
    assert prefs.margins.tolist() == [1.0, -1.0, 0.0] and prefs.subset.tolist() == ["s", "s", "t"]
    assert prefs.length_chosen.tolist() == [10, 20, 5] and prefs.length_rejected.tolist() == [12, 3, 5]
    folder = read_preferences(tmp_path)  # a folder: the files of pairs in it
    assert folder.ids.tolist() == ["p1", "p2", "p3"]


def bad_cases(tmp_path):
    """(rows or text, file name, what the one line must say)."""
    ok = {"id": "a", "reward_chosen": 1.0, "reward_rejected": 0.0}
    return [
        ([ok, {**ok, "id": "b", "reward_chosen": float("nan")}], "line 2: reward_chosen is NaN"),
        ([ok, {**ok, "id": "b", "reward_rejected": float("inf")}], "line 2: reward_rejected is infinite"),
        ([ok, {**ok, "id": "b", "reward_rejected": None}], "line 2: reward_rejected is missing"),
        ([ok, {"id": "b", "reward_chosen": 2.0}], "line 2: reward_rejected is missing"),
        ([ok, {**ok, "id": "b", "reward_chosen": "high"}], "line 2: reward_chosen = 'high' is not a number"),
        ([{**ok, "reward_chosen": [1.0, 2.0]}], "line 1: reward_chosen = [1.0, 2.0] is not a number (a list of 2"),
        ([ok, {**ok}], "line 1 and .*line 2: two pairs with id 'a' in subset 'all'"),
        ([ok, {**ok, "id": ""}], "line 2: id is empty"),
        ([ok, {**ok, "id": "b", "subset": None}], "line 1: subset is empty"),
        ([{"id": "a", "reward_chosen": 1.0}], "has no column 'reward_rejected'"),
        ([{"reward_chosen": 1.0, "reward_rejected": 0.0}], "has no column 'id'"),
        ([{"chosen": 1.0, "rejected": 0.0}], "no reward columns.*_all.jsonl of every score has no id"),
        ([{**ok, "text_chosen": "x", "text_rejected": 3}], "line 1: text_rejected = 3 is not a text or a length"),
        ([], "holds no preference pair (an empty file)"),
    ]


def test_bad_input_is_one_line_naming_file_line_and_field(tmp_path):
    for i, (rows, said) in enumerate(bad_cases(tmp_path)):
        path = write_jsonl(tmp_path / f"bad{i}.jsonl", rows)
        with pytest.raises(ValueError, match=".*".join(re.escape(part) for part in said.split(".*"))) as caught:
            read_preferences(path)
        message = str(caught.value)
        assert "\n" not in message and message.startswith("`location`: ") and (str(path) in message or not rows)


def test_dropped_pairs_are_counted_and_stated(tmp_path):
    ok = {"id": "a", "subset": "s", "reward_chosen": 1.0, "reward_rejected": 0.0}
    rows = [ok, {**ok, "id": "b", "reward_chosen": None}, {**ok, "id": "c", "reward_rejected": float("nan")}]
    rows.append({**ok, "id": "d", "subset": "t", "reward_chosen": float("-inf")})
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    with pytest.raises(ValueError, match="line 2: reward_chosen is missing .*`drop_missing`"):
        read_preferences(path)
    prefs = read_preferences(path, drop_missing=True)
    assert prefs.ids.tolist() == ["a"]
    assert prefs.dropped == [
        f"{path}, line 2: reward_chosen is missing",
        f"{path}, line 3: reward_rejected is NaN",
        f"{path}, line 4: reward_chosen is infinite",
    ]
    report = preference_report(prefs)
    assert report["dropped"] == 3 and report["dropped_pairs"] == prefs.dropped
    with pytest.raises(ValueError, match=r"`subsets`: \['t'\] has no pair \(the subsets: \['s'\]\)"):
        preference_report(prefs, subsets=["t"])  # a subset whose pairs were all dropped
    everything = write_jsonl(tmp_path / "q.jsonl", rows[1:])
    with pytest.raises(ValueError, match="no preference pair in .* \\(3 dropped: "):
        read_preferences(everything, drop_missing=True)


def test_a_bad_margin_in_memory_names_its_origin():
    prefs = Preferences(
        np.array(["a", "b"], dtype=object), np.array(["all", "all"], dtype=object), np.array([1.0, np.nan]),
        np.array([0.0, 0.0]), origin=["f.jsonl, line 1", "f.jsonl, line 2"],
    )  # fmt: skip
    with pytest.raises(ValueError, match="f.jsonl, line 2: the margin is nan"):
        preference_report(prefs)


def test_resplits_fit_on_one_half_and_judge_on_the_other():
    rng = np.random.default_rng(1)
    z = rng.normal(1.0, 2.0, 400)  # a latent margin: the first answer wins with probability sigmoid(z)
    wins = rng.random(400) < 1.0 / (1.0 + np.exp(-z))
    margins = np.where(wins, z, -z) * 3.0  # chosen minus rejected, over-confident by 3: T = 3 calibrates
    n = margins.size
    prefs = Preferences(np.arange(n).astype(str).astype(object), np.full(n, "all", dtype=object), margins, np.zeros(n))
    out = preference_resplits(prefs, resplits=6, seed=3, methods=("temperature", "isotonic"))
    draw = np.random.default_rng(3)
    for r in range(6):  # the same halves, by hand
        fit = np.zeros(n, dtype=bool)
        fit[draw.permutation(n)[: n // 2]] = True
        t = fit_preference_temperature(margins[fit])
        assert out["temperatures"][r] == t
        assert out["values"]["temperature"]["ece"][r] == preference_metrics(margins[~fit], temperature=t)["ece"]
        assert out["values"]["raw"]["nll"][r] == preference_metrics(margins[~fit])["nll"]
    assert 2 < np.mean(out["temperatures"]) < 4
    verdicts = {(v["method"], v["metric"]): v for v in out["verdicts"]}
    assert verdicts["temperature", "ece"]["verdict"] == "holds" and verdicts["temperature", "ece"]["compared"] == 6
    assert verdicts["temperature", "nll"]["verdict"] == "holds"
    with pytest.raises(ValueError, match="`methods` has unknown names \\['platt'\\]"):
        preference_resplits(prefs, methods=("platt",))


def test_a_half_with_no_wrong_pair_fits_no_temperature_and_says_so():
    margins = np.array([1.0, 2.0, 3.0, 4.0, -1.0, 5.0])
    n = margins.size
    prefs = Preferences(np.arange(n).astype(str).astype(object), np.full(n, "all", dtype=object), margins, np.zeros(n))
    out = preference_resplits(prefs, resplits=8, seed=0, methods=("temperature",))
    fitted = ~np.isnan(out["temperatures"])
    assert out["unfitted"] == int((~fitted).sum()) > 0
    assert np.isnan(out["values"]["temperature"]["ece"][~fitted]).all()
    assert out["verdicts"][0]["compared"] == int(fitted.sum())
    assert not math.isnan(out["values"]["raw"]["ece"][0])
