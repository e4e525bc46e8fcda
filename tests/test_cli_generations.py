"""``calibkit generations``: the table, JSON and HTML of generated answers' confidences, and refusals."""

import json

import numpy as np
import pytest

from calibkit.cli import main
from calibkit.cli.report_generations import PAGE_FAMILIES
from calibkit.lm.generations import generations_report, read_generations, verbalized_confidence
from calibkit.lm.sources import source_kind
from tests.test_generations import answers, tiny_lm_and_tokenizer, write_jsonl
from tests.test_pages import check_page


def test_table_json_and_report_agree_with_the_library(tmp_path, capsys):
    file = write_jsonl(tmp_path / "gen.jsonl", answers(200))
    assert (
        main(["generations", "--answers", str(file), "--json", "--resplits", "3", "--output", str(tmp_path / "o")]) == 0
    )
    got = json.loads(capsys.readouterr().out)
    data = read_generations(file)
    data = data.with_source("verbalized", verbalized_confidence(data.answers, data.origin), "verbalized")
    want = generations_report(data)
    for source in ("judge", "overconfident", "verbalized"):  # the verbalized source is added by default
        for key in ("ece", "brier", "nll", "aurc", "answers"):
            assert got["pooled"]["sources"][source][key] == pytest.approx(want["pooled"]["sources"][source][key])
    assert got["kinds"]["verbalized"] == "verbalized" and set(got["tasks"]) == {"math", "trivia"}
    assert len(got["recalibration"]["verdicts"]) == 3 * 3 + 2  # each map of each source, best against the others
    page = (tmp_path / "o" / "report.html").read_text()
    assert "data:image/png;base64," in page and page.count("<table") == len(PAGE_FAMILIES) + 1  # a family each; recal.
    check_page(page)  # the one page design: the answer first, nothing empty, nothing fetched
    assert main(["generations", "--answers", str(file), "--resplits", "0", "--confidence", "judge"]) == 0
    text = capsys.readouterr().out
    assert "| pooled | judge | given | 199 | 0.5% |" in text  # one answer without a judge score
    assert "verbalized" not in text.split("\n", 1)[1]  # asked for one source only


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--confidence", "nope"], "--confidence: unknown confidence source 'nope'; known: judge (in the data), "),
        (["--confidence", "ptrue"], "white-box sources need the causal LM: --model DIR"),
        (["--threshold", "0"], "--threshold must be a number in (0, 1], got 0.0"),
    ],
)
def test_refusals_are_one_line(tmp_path, capsys, argv, message):
    file = write_jsonl(tmp_path / "gen.jsonl", answers(20))
    assert main(["generations", "--answers", str(file), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_bad_row_exits_2_naming_it(tmp_path, capsys):
    rows = answers(20)
    rows[7]["overconfident"] = 1.3
    file = write_jsonl(tmp_path / "gen.jsonl", rows)
    assert main(["generations", "--answers", str(file)]) == 2
    assert f"{file}, row 7: confidence 'overconfident' = 1.3 is outside [0, 1]" in capsys.readouterr().err


def test_whitebox_sources_from_a_saved_causal_lm(tmp_path, capsys):
    from calibkit.lm.generations.whitebox import whitebox_confidence

    model, tokenizer = tiny_lm_and_tokenizer(tmp_path)
    model.save_pretrained(tmp_path / "lm")
    tokenizer.save_pretrained(tmp_path / "lm")
    rows = [
        {"id": str(i), "question": q, "answer": a, "correct": int(i % 2 == 0)}
        for i, (q, a) in enumerate([("the capital of paris ?", "paris"), ("capital ?", "lyon"), ("of ?", "the a")] * 4)
    ]
    file = write_jsonl(tmp_path / "gen.jsonl", rows)
    argv = ["generations", "--answers", str(file), "--model", str(tmp_path / "lm"), "--json", "--resplits", "0"]
    assert main([*argv, "--confidence", "sequence,sequence_normalized,ptrue"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = whitebox_confidence(model, tokenizer, [r["question"] for r in rows], [r["answer"] for r in rows])
    right = np.array([r["correct"] for r in rows])
    for name, values in want.items():
        assert got["kinds"][name] == source_kind(name)  # sequence's log-probabilities, ptrue's white-box
        brier = float(np.mean((values - right) ** 2))
        assert got["pooled"]["sources"][name]["brier"] == pytest.approx(brier, rel=1e-6)


def test_the_page_names_its_best_calibrated_source_by_ece_not_by_brier(tmp_path, capsys):
    """'flat' says the base rate for every answer (ECE 0, Brier 0.24); 'sharp' ranks the answers well
    but is 0.2-0.3 off (ECE 0.24, Brier 0.06): the two scores rank them the other way round."""
    rng = np.random.default_rng(3)
    right = rng.permutation(np.arange(200) < 120).astype(int)  # 60% right
    rows = [
        {"task": "t", "id": f"q{i}", "answer": "a", "correct": int(r), "flat": 0.6, "sharp": 0.8 if r else 0.3}
        for i, r in enumerate(right)
    ]
    file = write_jsonl(tmp_path / "gen.jsonl", rows)
    assert (
        main(["generations", "--answers", str(file), "--json", "--resplits", "0", "--output", str(tmp_path / "o")]) == 0
    )
    sources = json.loads(capsys.readouterr().out)["pooled"]["sources"]
    assert sources["flat"]["ece"] < sources["sharp"]["ece"] and sources["flat"]["brier"] > sources["sharp"]["brier"]
    answer = (tmp_path / "o" / "report.html").read_text().split('<p class="answer">', 1)[1].split("</p>")[0]
    assert answer.startswith("<b>Neither over- nor under-confident on average</b>: ECE 0.000 for the best calibrated")
    assert "for the best calibrated source, 'flat', over 200 answers; the worst, 'sharp', has ECE 0.240" in answer
