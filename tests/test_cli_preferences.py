"""``calibkit preferences``: the table, JSON, Markdown and page of a reward model's preferences, the fit."""

from __future__ import annotations

import json
import re

import pytest

from calibkit.cli import main
from calibkit.lm.preferences import preference_metrics, read_preferences
from tests.test_preferences import rewardbench_rows, write_jsonl


@pytest.fixture
def scores(tmp_path):
    return write_jsonl(tmp_path / "rm_outputs.jsonl", rewardbench_rows(300, seed=2))


def test_the_report_json_markdown_and_page(scores, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["preferences", "--scores", str(scores), "--fit", "--resplits", "4", "--bootstrap", "50",
                 "--output", str(out)])  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0 and printed.startswith(f"calibkit preferences: {scores} (300 pairs, 6 subsets; T = 1)")
    prefs = read_preferences(scores)
    want = preference_metrics(prefs.margins, length_chosen=prefs.length_chosen, length_rejected=prefs.length_rejected)
    saved = json.loads((out / "report.json").read_text())
    assert saved["pooled"]["ece"] == pytest.approx(want["ece"], rel=1e-12)
    assert saved["pooled"]["length_bias"] == pytest.approx(want["length_bias"], rel=1e-12)
    assert saved["ties"] == want["ties"] > 0 and saved["dropped"] == 0
    assert set(saved["sections"]) == {"Chat", "Chat Hard", "Safety", "Reasoning", "Prior Sets (0.5 weight)", "Score"}
    fit = saved["fit"]
    assert fit["pooled"]["ece"] == pytest.approx(
        preference_metrics(prefs.margins, temperature=fit["temperature"])["ece"]
    )
    assert fit["resplits"]["resplits"] == 4 and len(fit["resplits"]["temperatures"]) == 4
    table = (out / "table.md").read_text()
    assert f"| pooled | 300 | {want['ties']} | {want['accuracy']:.4f} [" in table
    assert "| RewardBench section | accuracy |" in table and "length bias: accuracy" in table
    verdict = next(v for v in fit["resplits"]["verdicts"] if v["method"] == "temperature" and v["metric"] == "ece")
    page = (out / "report.html").read_text()
    answer = re.search(r'<p class="answer">(.*?)</p>', page).group(1)
    assert answer.startswith("<b>The reward model&#x27;s preferences are ") or answer.startswith(
        "<b>The reward model's preferences are "
    )
    assert f"ECE {want['ece']:.3f} [" in answer and f"temperature {fit['temperature']:.3g} lowers it in " in answer
    assert f"in {verdict['better_count']} of {verdict['compared']} re-splits." in answer
    assert page.index('class="answer"') < page.index("<h2>")  # the answer first
    assert (out / "reliability.png").exists() and (out / "reliability.csv").exists()


def test_json_and_the_direction(scores, capsys):
    assert main(["preferences", "--scores", str(scores), "--json"]) == 0
    saved = json.loads(capsys.readouterr().out)
    assert "fit" not in saved and saved["temperature"] == 1.0
    assert saved["pooled"]["confidence_gap"] == pytest.approx(
        saved["pooled"]["accuracy"] - saved["pooled"]["mean_confidence"]
    )


def test_every_pair_right_fits_no_temperature_and_says_so(tmp_path, capsys):
    rows = [{"id": str(i), "reward_chosen": 1.0 + i, "reward_rejected": 0.0} for i in range(10)]
    path = write_jsonl(tmp_path / "right.jsonl", rows)
    out = tmp_path / "out"
    assert main(["preferences", "--scores", str(path), "--fit", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "No temperature fitted: every one of the 10 pairs is ranked right or tied" in printed
    assert "no temperature fitted (every pair ranked right or tied)" in (out / "report.html").read_text()
    assert json.loads((out / "report.json").read_text())["fit"]["temperature"] is None


def test_dropped_pairs_are_stated_in_the_table(tmp_path, capsys):
    rows = [{"id": str(i), "reward_chosen": float(i % 3), "reward_rejected": 1.0} for i in range(8)]
    rows[2]["reward_chosen"] = None
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    assert main(["preferences", "--scores", str(path), "--drop-missing"]) == 0
    printed = capsys.readouterr().out
    assert (
        f"dropped pairs (a reward missing, NaN or infinite): 1\n- {path}, line 3: reward_chosen is missing" in printed
    )
    assert "(7 pairs, 1 subset; T = 1)" in printed
