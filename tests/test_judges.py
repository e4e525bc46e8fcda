"""calibkit.lm.judges: the plain judged file and labels readers, the report, and ``calibkit judge``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from calibkit.cli import main
from calibkit.lm import judges
from calibkit.lm.judges import HumanLabels, Judged, read_judged, read_labels
from calibkit.lm.judges import readers as judged_readers
from calibkit.lm.judges.report import cross_fitted_recalibration, pass_rates
from calibkit.metrics import judges as J


def simulated_run(n=300, labelled=60, seed=0, theta=0.65, tpr=0.9, tnr=0.6, confidence=True):
    rng = np.random.default_rng(seed)
    truth = (rng.random(n) < theta).astype(int)
    verdict = np.where(truth == 1, rng.random(n) < tpr, rng.random(n) >= tnr).astype(int)
    rows = []
    for i in range(n):
        row = {"id": f"q{i}", "task": ["qa", "math"][i % 2], "verdict": int(verdict[i])}
        if confidence:
            row["confidence"] = round(float(np.clip(0.3 + 0.5 * verdict[i] + 0.2 * rng.random(), 0, 1)), 3)
        rows.append(row)
    chosen = rng.choice(n, labelled, replace=False)
    return rows, [{"id": f"q{i}", "label": int(truth[i])} for i in chosen], truth


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_csv(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = list(rows[0])
    path.write_text(",".join(keys) + "\n" + "".join(",".join(str(r[k]) for k in keys) + "\n" for r in rows))
    return path


def judged_files(folder: Path, seed: int = 0) -> dict[str, Path]:
    """A judged run with 60 of 300 samples labelled (JSON Lines, CSV), and a second model's run."""
    rows, labels, _ = simulated_run(seed=seed)
    rows2, labels2, _ = simulated_run(seed=seed + 1, theta=0.5)
    return {
        "judged": write_jsonl(folder / "judged.jsonl", rows),
        "labels": write_csv(folder / "labels.csv", labels),
        "judged2": write_jsonl(folder / "judged2.jsonl", rows2),
        "labels2": write_csv(folder / "labels2.csv", labels2),
    }


# ----- readers


def test_the_plain_file_reads_alike_as_json_lines_csv_and_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows, _, _ = simulated_run(n=20, labelled=5)
    a = read_judged(write_jsonl(tmp_path / "a.jsonl", rows))
    b = read_judged(write_csv(tmp_path / "b.csv", rows))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "c.parquet")
    c = read_judged(tmp_path / "c.parquet")
    for other in (b, c):
        assert other.ids.tolist() == a.ids.tolist() and other.task.tolist() == a.task.tolist()
        np.testing.assert_array_equal(other.verdict, a.verdict)
        np.testing.assert_array_equal(other.confidence, a.confidence)
    assert a.origin[3] == f"{tmp_path / 'a.jsonl'} line 4" and b.origin[3] == f"{tmp_path / 'b.csv'} line 5"


def test_verdicts_as_words_scores_and_no_confidence_no_task(tmp_path):
    rows = [
        {"id": 1, "verdict": "PASS"},
        {"id": 2, "verdict": "fail"},
        {"id": 3, "verdict": True},
        {"id": 4, "verdict": 0.25},
    ]
    data = read_judged(write_jsonl(tmp_path / "mytask.jsonl", rows))
    assert data.verdict.tolist() == [1.0, 0.0, 1.0, 0.25]
    assert np.isnan(data.confidence).all() and set(data.task) == {"mytask"}


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        (
            [{"id": "a", "verdict": 1}, {"id": "a", "verdict": 0}],
            r"x.jsonl line 1 and .*x.jsonl line 2: two judged samples with id 'a'",
        ),
        (
            [{"id": "a", "verdict": 1}, {"id": "b", "verdict": 2}],
            r"^`judged`: .*x.jsonl line 2: verdict = 2 is neither",
        ),
        ([{"id": "a", "verdict": 1}, {"id": "b", "verdict": "maybe"}], r"line 2: verdict = 'maybe'"),
        ([{"id": "a", "verdict": 1, "confidence": 1.5}], r"line 1: confidence = 1.5"),
        ([{"id": "", "verdict": 1}], r"line 1: the id is empty"),
        ([{"id": "a", "grade": 1}], r"no judged samples found"),
    ],
)
def test_bad_judged_files_are_refused_in_one_line_naming_file_and_line(tmp_path, rows, expected):
    with pytest.raises(ValueError, match=expected):
        read_judged(write_jsonl(tmp_path / "x.jsonl", rows))


def test_bad_labels_are_refused_naming_file_and_line(tmp_path):
    judged = read_judged(write_jsonl(tmp_path / "j.jsonl", [{"id": f"q{i}", "verdict": i % 2} for i in range(5)]))
    twice = write_csv(
        tmp_path / "twice.csv", [{"id": "q1", "label": 1}, {"id": "q2", "label": 0}, {"id": "q1", "label": 0}]
    )
    with pytest.raises(
        ValueError, match=r"^`labels`: .*twice.csv line 2 and .*twice.csv line 4: two labels with id 'q1'"
    ):
        read_labels(twice)
    with pytest.raises(ValueError, match=r"^`labels`: .*out.csv line 3: label = 3 is neither"):
        read_labels(write_csv(tmp_path / "out.csv", [{"id": "q1", "label": 1}, {"id": "q2", "label": 3}]))
    nowhere = read_labels(write_csv(tmp_path / "nowhere.csv", [{"id": "q1", "label": 1}, {"id": "zz", "label": 0}]))
    with pytest.raises(ValueError, match=r"^`labels`: .*nowhere.csv line 3: id 'zz' matches no judged sample"):
        judges.match_labels(judged, nowhere)
    score = read_labels(write_csv(tmp_path / "score.csv", [{"id": "q1", "label": 1}, {"id": "q2", "label": 0.5}]))
    with pytest.raises(ValueError, match=r"score.csv line 3: label = 0.5 is off the verdicts' scale"):
        judges.match_labels(judged, score)


def test_match_labels_finds_each_labels_sample_as_a_loop_would():
    rng = np.random.default_rng(0)
    ids = np.array([f"s{i}" for i in rng.permutation(50)], dtype=object)
    judged = Judged(ids, np.array(["t"] * 50, dtype=object), np.ones(50), np.full(50, np.nan))
    wanted = ids[rng.choice(50, 12, replace=False)]
    at = judges.match_labels(judged, HumanLabels(wanted, np.ones(12)))
    assert at.tolist() == [ids.tolist().index(w) for w in wanted]


def test_a_registered_reader_goes_ahead_of_the_table_and_reads_its_files(tmp_path):
    saved = list(judged_readers.JUDGED_READERS)

    def read(file):
        return Judged(
            np.array(["x"], dtype=object),
            np.array(["log"], dtype=object),
            np.ones(1),
            np.full(1, 0.9),
            None,
            [f"{file}"],
        )

    try:
        judges.register_judged_reader(judges.JudgedReader("log", lambda f: f.suffix == ".log", read, "a log"))
        assert [r.kind for r in judged_readers.JUDGED_READERS][-2:] == ["log", "table"]  # after the tools' logs
        (tmp_path / "run.log").write_text("anything")
        write_jsonl(tmp_path / "t.jsonl", [{"id": "y", "verdict": 0}])
        data = read_judged(tmp_path)
        assert sorted(data.ids.tolist()) == ["x", "y"]
    finally:
        judged_readers.JUDGED_READERS[:] = saved


# ----- the report


def _loaded(tmp_path, **kw):
    rows, labels, truth = simulated_run(**kw)
    return (
        read_judged(write_jsonl(tmp_path / "j.jsonl", rows)),
        read_labels(write_csv(tmp_path / "l.csv", labels)),
        truth,
    )


def test_report_rates_are_the_estimators_on_the_labelled_slice_and_the_rest(tmp_path):
    judged, labels, _ = _loaded(tmp_path)
    report = judges.judge_report(judged, labels, bootstrap=200)
    at = judges.match_labels(judged, labels)
    rest = np.setdiff1d(np.arange(len(judged)), at)
    rates = report["pooled"]["rates"]
    ppi = J.ppi_mean(labels.label, judged.verdict[at], judged.verdict[rest])
    assert rates["ppi"]["estimate"] == pytest.approx(ppi["estimate"], abs=1e-12)
    assert rates["ppi"]["ci_upper"] == pytest.approx(ppi["ci_upper"], abs=1e-12)
    rg = J.rogan_gladen(labels.label, judged.verdict[at], judged.verdict[rest], bootstrap=200)
    assert rates["rogan_gladen"]["estimate"] == pytest.approx(rg["estimate"]) and rates["rogan_gladen"][
        "ci_lower"
    ] == pytest.approx(rg["ci_lower"])
    assert rates["naive"]["estimate"] == pytest.approx(judged.verdict.mean())
    assert rates["human"]["estimate"] == pytest.approx(labels.label.mean())
    counts = report["pooled"]["against_people"]["counts"]
    assert counts == dict(zip(J.COUNT_CELLS, J.confusion_counts(judged.verdict[at], labels.label).tolist()))
    assert set(report["tasks"]) == {"qa", "math"}
    assert sum(t["labelled"] for t in report["tasks"].values()) == 60


def test_report_refuses_rogan_gladen_for_a_chance_judge_and_still_gives_ppi():
    judged = Judged(np.array([f"{i}" for i in range(8)], dtype=object), np.array(["t"] * 8, dtype=object),
                    np.array([1, 0, 1, 0, 1, 1, 0, 1.0]), np.full(8, np.nan))  # fmt: skip
    labels = HumanLabels(np.array(["0", "1", "2", "3"], dtype=object), np.array([1, 1, 0, 0.0]))  # TPR = TNR = 0.5
    rates = judges.judge_report(judged, labels, bootstrap=0)["pooled"]["rates"]
    assert "TPR + TNR = 1.000 <= 1" in rates["rogan_gladen"]["refused"]
    assert "estimate" in rates["ppi"]


def test_pass_rates_refusals_one_label_every_sample_labelled_scores():
    v = np.array([1.0, 0.0, 1.0])
    assert "at least 2" in pass_rates(v, np.array([0]), np.array([1.0]), binary=True)["ppi"]["refused"]
    every = pass_rates(v, np.array([0, 1, 2]), np.array([1.0, 0.0, 0.0]), binary=True)
    assert "every judged sample has a label" in every["ppi"]["refused"] and "estimate" in every["human"]
    scores = pass_rates(np.array([0.2, 0.9, 0.7, 0.4]), np.array([0, 1]), np.array([0.1, 0.8]), binary=False)
    assert "scores" in scores["rogan_gladen"]["refused"] and "estimate" in scores["ppi"]


def test_report_refuses_no_labels():
    judged = Judged(np.array(["a"], dtype=object), np.array(["t"], dtype=object), np.ones(1), np.full(1, np.nan))
    with pytest.raises(ValueError, match="`labels`: no label"):
        judges.judge_report(judged, HumanLabels(np.array([], dtype=object), np.zeros(0)))


def test_recalibration_is_cross_fitted_never_judged_on_what_it_was_fitted_on(monkeypatch):
    from calibkit.lm.judges import report as module

    rng = np.random.default_rng(1)
    p = rng.random(80)
    y = (rng.random(80) < p**2).astype(float)
    fitted_on, applied_to = [], []
    real_fit, real_apply = module.fit_score_map, module.apply_score_map

    def fit(method, s, o):
        fitted_on.append(set(s.tolist()))
        return real_fit(method, s, o)

    def apply(m, s):
        applied_to.append(set(s.tolist()))
        return real_apply(m, s)

    monkeypatch.setattr(module, "fit_score_map", fit)
    monkeypatch.setattr(module, "apply_score_map", apply)
    out = cross_fitted_recalibration(p, y, folds=4)
    assert len(applied_to) == 8  # 4 folds x 2 maps
    for i, held in enumerate(applied_to):
        assert not held & fitted_on[i + i // 4]  # each fold's fit precedes its application; the full fit follows
    # in-sample isotonic is optimistic: its ECE on the data it was fitted on is lower than cross-fitted
    in_sample = real_apply(real_fit("isotonic", p, y), p)
    from calibkit.metrics.functional.core import calibration_report

    assert calibration_report(in_sample, y.astype(int), metrics=["ece"])["ece"] < out["isotonic"]["metrics"]["ece"]


def test_recalibration_refuses_too_few_samples():
    assert "refused" in cross_fitted_recalibration(np.array([0.2, 0.8, 0.6]), np.array([0.0, 1.0, 1.0]))


def test_compare_runs_paired_on_the_same_questions_else_independent(tmp_path):
    judged, labels, _ = _loaded(tmp_path)
    rng = np.random.default_rng(3)
    verdict = np.where(rng.random(len(judged)) < 0.2, 1 - judged.verdict, judged.verdict)
    flipped = Judged(judged.ids, judged.task, verdict, judged.confidence)
    relabelled = HumanLabels(labels.ids, np.where(rng.random(len(labels)) < 0.2, 1 - labels.label, labels.label))
    paired = judges.compare_runs((judged, labels), (flipped, relabelled))
    assert paired["construction"] == "paired"
    at = judges.match_labels(judged, labels)
    rest = np.setdiff1d(np.arange(len(judged)), at)
    direct = J.ppi_mean_difference(
        (labels.label, judged.verdict[at], judged.verdict[rest]),
        (relabelled.label, flipped.verdict[at], flipped.verdict[rest]),
        paired=True,
    )
    assert paired["estimate"] == pytest.approx(direct["estimate"]) and paired["se"] == pytest.approx(direct["se"])
    rows, kept = rng.permutation(len(judged)), rng.permutation(len(labels))  # the second run in another order
    shuffled = Judged(flipped.ids[rows], flipped.task[rows], flipped.verdict[rows], flipped.confidence[rows])
    reordered = HumanLabels(relabelled.ids[kept], relabelled.label[kept])
    again = judges.compare_runs((judged, labels), (shuffled, reordered))
    assert again["estimate"] == pytest.approx(paired["estimate"], abs=1e-12) and again["construction"] == "paired"
    other, other_labels, _ = _loaded(tmp_path / "2", seed=9)
    assert judges.compare_runs((judged, labels), (other, other_labels))["construction"] == "independent"


def test_answer_sentence_says_lenient_when_people_pass_less():
    report = {"pooled": {"samples": 2000, "labelled": 40, "calibration": {"ece": 0.18}, "rates": {
        "naive": {"estimate": 0.71, "ci_lower": 0.69, "ci_upper": 0.73},
        "ppi": {"estimate": 0.63, "ci_lower": 0.58, "ci_upper": 0.68},
        "human": {"estimate": 0.6, "ci_lower": 0.5, "ci_upper": 0.7}}}}  # fmt: skip
    assert judges.answer_sentence(report) == (
        "The judge passes 71% [69%, 73%] of 2,000 answers; people pass 63% [58%, 68%] (PPI++ with 40 labels): "
        "the judge is lenient, ECE 0.18."
    )


# ----- the command


def test_calibkit_judge_prints_writes_the_page_json_and_markdown(tmp_path, capsys):
    f = judged_files(tmp_path / "in")
    code = main(["judge", "--judged", str(f["judged"]), "--labels", str(f["labels"]), "--bootstrap", "50",
                 "--output", str(tmp_path / "out")])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[1].startswith("The judge passes ")
    assert {p.name for p in (tmp_path / "out").iterdir()} >= {
        "report.html",
        "report.json",
        "table.md",
        "reliability.png",
    }
    page = (tmp_path / "out" / "report.html").read_text()
    assert page.index("The judge passes") < page.index("Pass rate") and "PPI++" in page
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["answer"] == printed.splitlines()[1] and report["labelled"] == 60


def test_calibkit_judge_two_runs_and_one_line_errors_naming_flags(tmp_path, capsys):
    f = judged_files(tmp_path / "in")
    main(["judge", "--judged", str(f["judged"]), "--labels", str(f["labels"]), "--other-judged", str(f["judged2"]),
          "--other-labels", str(f["labels2"]), "--bootstrap", "0", "--json"])  # fmt: skip
    assert json.loads(capsys.readouterr().out)["comparison"]["construction"] == "independent"
    second = ["--other-judged", str(f["judged2"]), "--other-labels", str(f["judged2"])]
    code = main(["judge", "--judged", str(f["judged"]), "--labels", str(f["labels"]), *second])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("calibkit: error: --other-labels: ") and len(err.splitlines()) == 1
