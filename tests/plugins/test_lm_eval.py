"""calibkit's rows in lm-evaluation-harness's own results, run offline, equal to ``calibkit choices``/``generations``.

The harness runs in this process: a multiple-choice task on a tiny random GPT-2 (HFLM, a BPE
tokenizer trained in the test), and a ``generate_until`` task on a scripted model whose answers
state a confidence (a random model states none). Each run's ``--log_samples`` output is then read
by calibkit's command line, and every row of the harness's table must equal it to 1e-12.
"""

import json
import math

import numpy as np
import pytest

lm_eval = pytest.importorskip("lm_eval")

from lm_eval.api.model import LM  # noqa: E402
from lm_eval.loggers import EvaluationTracker  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402
from lm_eval.utils import make_table  # noqa: E402

from calibkit.cli import main  # noqa: E402
from calibkit.lm.multiple_choice import choice_probabilities, read_choices  # noqa: E402
from calibkit.metrics.bootstrap import bootstrap_intervals  # noqa: E402
from calibkit.plugins.lm_eval import Z95  # noqa: E402

WORDS = "alpha beta gamma delta red green blue cat dog bird one two three four five is the a of what which".split()
PLUGIN = "class: !function calibkit.plugins.lm_eval.CalibratedTask\n"


def _json_task(folder, name, rows, body):
    data = folder / f"{name}.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    head = f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {json.dumps(str(data))}\n"
    (folder / f"{name}.yaml").write_text(head + "test_split: test\n" + body)


MC_BODY = (
    "output_type: multiple_choice\n"
    'doc_to_text: "Question: {{question}}\\nAnswer:"\ndoc_to_choice: "{{choices}}"\ndoc_to_target: gold\n'
    "metric_list:\n  - metric: acc\n  - metric: brier_score\n"
)


def _run(lm, tasks, folder, names):
    manager = TaskManager(include_path=str(tasks), include_defaults=False)  # its own tasks only: seconds
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        result = lm_eval.simple_evaluate(
            model=lm, tasks=names, task_manager=manager, log_samples=True, verbosity="ERROR", bootstrap_iters=0
        )
    out = folder / "output"
    tracker = EvaluationTracker(output_path=str(out))
    tracker.save_results_aggregated(results=result, samples=result["samples"])
    for name in names:
        tracker.save_results_samples(task_name=name, samples=result["samples"][name])
    return result, out


def choice_rows():
    """30 questions of 4 choices, the gold an index."""
    rng = np.random.default_rng(0)
    return [
        {"question": " ".join(rng.choice(WORDS, 4)), "choices": [str(w) for w in rng.choice(WORDS, 4, replace=False)],
         "gold": int(rng.integers(4))}
        for _ in range(30)
    ]  # fmt: skip


def hflm(path):
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoTokenizer, GPT2LMHeadModel

    return HFLM(pretrained=GPT2LMHeadModel.from_pretrained(path), tokenizer=AutoTokenizer.from_pretrained(path),
                batch_size=8)  # fmt: skip


@pytest.fixture(scope="module")
def choice_run(tmp_path_factory):
    from tests.test_generations_harness import build_model

    folder = tmp_path_factory.mktemp("lm_eval_mc")
    rows = choice_rows()
    path = build_model(folder, [r["question"] + " " + " ".join(r["choices"]) for r in rows])
    tasks = folder / "tasks"
    tasks.mkdir()
    _json_task(tasks, "tiny_mc", rows, MC_BODY)
    (tasks / "tiny_mc_calibkit.yaml").write_text(
        f"include: tiny_mc.yaml\n{PLUGIN}task: tiny_mc_calibkit\ncalibkit:\n  bootstrap: 200\n"
    )
    result, out = _run(hflm(path), tasks, folder, ["tiny_mc_calibkit"])
    return result, out, path


def test_the_choice_rows_equal_calibkit_choices_on_the_samples_file(choice_run, capsys):
    result, out, _ = choice_run
    row = result["results"]["tiny_mc_calibkit"]
    assert main(["choices", "--predictions", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["tasks"]["tiny_mc_calibkit"]
    assert report["questions"] == 30
    for metric in ("ece", "brier", "nll", "aurc", "cece"):  # cece: every question has 4 choices
        assert abs(row[f"{metric},none"] - report[metric]) <= 1e-12, metric
    assert row["acc,none"] == pytest.approx(report["accuracy"], abs=1e-12)  # the harness's acc, calibkit's accuracy
    data = read_choices(out)
    ci = bootstrap_intervals(choice_probabilities(data), data.gold, metrics=("ece", "brier", "nll", "aurc", "cece"),
                             bootstrap=200, seed=0)["intervals"]  # fmt: skip
    for metric, (low, high) in ci.items():
        if metric == "accuracy":
            continue
        assert abs(row[f"{metric}_ci_lower,none"] - low) <= 1e-12
        assert abs(row[f"{metric}_ci_upper,none"] - high) <= 1e-12
        assert abs(row[f"{metric}_stderr,none"] - (high - low) / (2 * Z95)) <= 1e-12
        assert low <= row[f"{metric},none"] <= high or metric == "ece"  # ECE's bootstrap is biased upwards


def test_the_harness_table_prints_the_rows_with_their_stderr(choice_run):
    result, _, _ = choice_run
    lines = {line.split("|")[5].strip(): line for line in make_table(result).splitlines()[2:]}
    rows = {"acc", "brier_score", "ece", "brier", "nll", "aurc", "cece", "ece_ci_lower", "ece_ci_upper"}
    assert rows <= set(lines)
    assert "ece_stderr" not in lines  # the stderr key is read into its metric's row, not shown as one
    stderr = result["results"]["tiny_mc_calibkit"]["ece_stderr,none"]
    assert lines["ece"].split("|")[9].strip() == f"{stderr:.4f}"
    assert lines["acc"].split("|")[9].strip() == "N/A"  # bootstrap_iters=0: the harness's own stderr is off


def test_the_samples_file_logs_numbers(choice_run):
    _, out, _ = choice_run
    sample = json.loads(next(out.rglob("samples_tiny_mc_calibkit_*.jsonl")).read_text().splitlines()[0])
    assert isinstance(sample["ece"]["gold"], int) and len(sample["ece"]["loglik"]) == 4
    assert [float(r[0]) for r in sample["filtered_resps"]] == sample["ece"]["loglik"]
    gold, probs = sample["brier_score"]  # the harness logs a numpy array's text; the class, numbers
    assert isinstance(probs, list) and math.isclose(sum(probs), 1.0)


def test_a_gold_given_as_a_list_of_one_index_is_that_choice(choice_run, tmp_path, capsys):
    """``doc_to_target`` giving ``[2]``: the harness scores ``pred in gold``; calibkit reads the choice it names."""
    result, _, path = choice_run
    rows = [{**r, "gold": [r["gold"]]} for r in choice_rows()]
    _json_task(tmp_path, "tiny_mc_list", rows, MC_BODY.replace("  - metric: brier_score\n", ""))
    (tmp_path / "tiny_mc_list_calibkit.yaml").write_text(
        f"include: tiny_mc_list.yaml\n{PLUGIN}task: tiny_mc_list_calibkit\ncalibkit:\n  bootstrap: 200\n"
    )
    listed, out = _run(hflm(path), tmp_path, tmp_path, ["tiny_mc_list_calibkit"])
    row, plain = listed["results"]["tiny_mc_list_calibkit"], result["results"]["tiny_mc_calibkit"]
    for metric in ("acc", "ece", "brier", "nll", "aurc", "cece", "ece_ci_lower", "ece_ci_upper"):
        assert row[f"{metric},none"] == pytest.approx(plain[f"{metric},none"], abs=1e-12), metric  # as the index
    sample = json.loads(next(out.rglob("samples_tiny_mc_list_calibkit_*.jsonl")).read_text().splitlines()[0])
    assert json.loads(str(sample["target"])) == [rows[0]["gold"][0]] and sample["ece"]["gold"] == rows[0]["gold"][0]
    assert main(["choices", "--predictions", str(out), "--json"]) == 0  # the samples file reads the same
    report = json.loads(capsys.readouterr().out)["tasks"]["tiny_mc_list_calibkit"]
    for metric in ("ece", "brier", "nll", "aurc", "cece"):
        assert abs(row[f"{metric},none"] - report[metric]) <= 1e-12, metric


class ScriptedLM(LM):
    """Answers each question with the text the test wrote for it (a random model states no confidence)."""

    def __init__(self, answers):
        super().__init__()
        self.answers = answers

    def generate_until(self, requests):
        return [self.answers[r.doc["question"]] for r in requests]

    def loglikelihood(self, requests):  # pragma: no cover - generate_until only
        raise NotImplementedError

    def loglikelihood_rolling(self, requests):  # pragma: no cover
        raise NotImplementedError


GEN_BODY = (
    "output_type: generate_until\n"
    'doc_to_text: "Q: {{question}}\\nA:"\ndoc_to_target: answer\n'
    "generation_kwargs:\n  until: ['\\n\\n']\n  do_sample: false\n"
    "metric_list:\n  - metric: exact_match\n    aggregation: mean\n    higher_is_better: true\n"
)


@pytest.fixture(scope="module")
def generation_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lm_eval_gen")
    rng = np.random.default_rng(1)
    rows, answers = [], {}
    for i in range(40):
        question, gold = f"question {i}", str(rng.choice(WORDS))
        stated = float(rng.uniform(0.3, 1.0))
        right = rng.random() < stated  # roughly calibrated
        said = gold if right else "zzz"
        tail = "" if i % 8 == 7 else f"\nConfidence: {round(100 * stated)}%"  # one in eight states none
        answers[question] = said + tail
        rows.append({"question": question, "answer": answers[question] if right else gold})
    tasks = folder / "tasks"
    tasks.mkdir()
    _json_task(tasks, "tiny_gen", rows, GEN_BODY)
    (tasks / "tiny_gen_calibkit.yaml").write_text(
        f"include: tiny_gen.yaml\n{PLUGIN}task: tiny_gen_calibkit\ncalibkit:\n  bootstrap: 200\n"
    )
    return _run(ScriptedLM(answers), tasks, folder, ["tiny_gen_calibkit"])


def test_the_generation_rows_equal_calibkit_generations_on_the_samples_file(generation_run, capsys):
    result, out = generation_run
    row = result["results"]["tiny_gen_calibkit"]
    argv = ["generations", "--answers", str(out), "--confidence", "verbalized", "--bootstrap", "200", "--json"]
    assert main([*argv, "--resplits", "0"]) == 0
    verbal = json.loads(capsys.readouterr().out)["pooled"]["sources"]["verbalized"]
    assert verbal["answers"] == 35 and row["without_confidence,none"] == pytest.approx(5 / 40, abs=1e-12)
    assert abs(row["without_confidence,none"] - verbal["without"]) <= 1e-12
    for metric in ("ece", "brier", "nll", "aurc"):
        assert abs(row[f"{metric},none"] - verbal[metric]) <= 1e-12, metric
    for metric in ("ece", "brier", "nll"):
        low, high = verbal["intervals"][metric]
        assert abs(row[f"{metric}_ci_lower,none"] - low) <= 1e-12
        assert abs(row[f"{metric}_ci_upper,none"] - high) <= 1e-12
    assert "aurc_stderr,none" not in row or row["aurc_stderr,none"] == "N/A"  # no bootstrap of AURC there
    assert 0 < row["exact_match,none"] < 1


def test_the_rejection_rows_by_name_equal_calibkit_generations_with_their_intervals(tmp_path, capsys):
    """``metrics: [prr, augrc, roc_auc]``: the rejection rows, each with its interval, as the report computes them."""
    rng = np.random.default_rng(3)
    rows, answers = [], {}
    for i in range(40):
        question, gold = f"question {i}", str(rng.choice(WORDS))
        stated = float(rng.uniform(0.3, 1.0))
        right = rng.random() < stated
        answers[question] = (gold if right else "zzz") + f"\nConfidence: {round(100 * stated)}%"
        rows.append({"question": question, "answer": answers[question] if right else gold})
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    _json_task(tasks, "tiny_rej", rows, GEN_BODY)
    (tasks / "tiny_rej_calibkit.yaml").write_text(
        f"include: tiny_rej.yaml\n{PLUGIN}task: tiny_rej_calibkit\n"
        "calibkit:\n  bootstrap: 100\n  metrics: [prr, augrc, roc_auc]\n"
    )
    result, out = _run(ScriptedLM(answers), tasks, tmp_path, ["tiny_rej_calibkit"])
    row = result["results"]["tiny_rej_calibkit"]
    argv = ["generations", "--answers", str(out), "--confidence", "verbalized", "--bootstrap", "100", "--json"]
    assert main([*argv, "--resplits", "0"]) == 0
    verbal = json.loads(capsys.readouterr().out)["pooled"]["sources"]["verbalized"]
    for metric in ("prr", "augrc", "roc_auc"):
        assert abs(row[f"{metric},none"] - verbal[metric]) <= 1e-12, metric
        low, high = verbal["intervals"][metric]
        assert (
            abs(row[f"{metric}_ci_lower,none"] - low) <= 1e-12 and abs(row[f"{metric}_ci_upper,none"] - high) <= 1e-12
        )
    assert "ece,none" not in row and 0 < row["prr,none"] <= 1


def _load(tasks, name):
    return TaskManager(include_path=str(tasks), include_defaults=False).load([name])  # its own tasks: seconds


@pytest.mark.parametrize(
    "extra, message",
    [
        ("metric_list:\n  - metric: !function utils.mine\n", "gives no row in a multiple_choice task"),
        ("metric_list:\n  - metric: my_metric\n", "gives no row in a multiple_choice task"),
        ("filter_list:\n  - name: first\n    filter:\n      - function: take_first\n", "has filters"),
        ("calibkit:\n  metrics: [ece, nope]\n", "`calibkit: metrics`"),
        ("calibkit:\n  bootstrap: -3\n", "calibkit: bootstrap"),
        ("calibkit:\n  seed: -1\n", "`calibkit: seed` must be an integer >= 0"),  # the carrier's one check
        ("calibkit:\n  threshold: 1.5\n", "`calibkit: threshold` must be a number in"),
        ("calibkit:\n  n_bin: 10\n", "the `calibkit` key holds"),
    ],
)
def test_what_the_harness_would_drop_silently_is_refused(tmp_path, extra, message):
    rows = [{"question": "q", "choices": ["a", "b"], "gold": 0}, {"question": "r", "choices": ["a", "b"], "gold": 1}]
    _json_task(tmp_path, "base_mc", rows, MC_BODY)
    (tmp_path / "utils.py").write_text("def mine(references, predictions):\n    return 1.0\n")
    (tmp_path / "cal.yaml").write_text(f"include: base_mc.yaml\n{PLUGIN}task: cal\n{extra}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        with pytest.raises(ValueError, match=message.replace("`", ".").replace("[", ".")):
            _load(tmp_path, "cal")


@pytest.mark.parametrize(
    "first, gold, message",
    [
        (0, 5, "is not one of the 2 choices"),
        (0, -1, "is not one of the 2 choices"),  # the harness scores -1 as a wrong answer, silently
        ("a", "Z", "is not one of the 2 choices"),  # a text that is no choice's
        ("a", " b", "is not one of the 2 choices"),  # a choice's text, with the delimiter: not the choice's text
        ([0], [0, 1], "names 2 choices"),
        ([0], [], "names no single choice"),
    ],
)
def test_a_gold_answer_that_is_not_one_choice_is_refused_when_the_task_loads(tmp_path, first, gold, message):
    """Refused when the task loads (no model is run here), naming the question: its doc_id and its fields."""
    rows = [
        {"question": "q", "choices": ["a", "b"], "gold": first},
        {"question": "r", "choices": ["a", "b"], "gold": gold},
    ]
    _json_task(tmp_path, "base_mc", rows, MC_BODY)
    (tmp_path / "cal.yaml").write_text(f"include: base_mc.yaml\n{PLUGIN}task: cal\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        with pytest.raises(ValueError, match=message) as refused:
            _load(tmp_path, "cal")
    assert "the question doc_id 1 {'question': 'r'" in str(refused.value)


@pytest.mark.parametrize("golds", [[0, 1], ["b", "a"], [[1], [0]]])
def test_a_gold_index_text_or_list_of_one_index_loads_as_that_choice(tmp_path, golds):
    rows = [{"question": q, "choices": ["a", "b"], "gold": g} for q, g in zip("qr", golds)]
    _json_task(tmp_path, "base_mc", rows, MC_BODY)
    (tmp_path / "cal.yaml").write_text(f"include: base_mc.yaml\n{PLUGIN}task: cal\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        task = _load(tmp_path, "cal")["tasks"]["cal"]
    want = [g[0] if isinstance(g, list) else "ab".index(g) if isinstance(g, str) else g for g in golds]
    assert [task._choices_and_gold(doc)[1] for doc in task.eval_docs] == want


def test_metrics_over_positions_need_a_fixed_number_of_choices(tmp_path):
    rows = [
        {"question": "q", "choices": ["a", "b"], "gold": 0},
        {"question": "r", "choices": ["a", "b", "c"], "gold": 1},
    ]
    _json_task(tmp_path, "base_mc", rows, MC_BODY)
    acc = "metric_list:\n  - metric: acc\n"
    (tmp_path / "cal.yaml").write_text(
        f"include: base_mc.yaml\n{PLUGIN}task: cal\n{acc}calibkit:\n  metrics: [ece, cece]\n"
    )
    (tmp_path / "plain.yaml").write_text(f"include: base_mc.yaml\n{PLUGIN}task: plain\n{acc}")
    (tmp_path / "brier.yaml").write_text(f"include: base_mc.yaml\n{PLUGIN}task: brier\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        with pytest.raises(ValueError, match="brier_score stacks"):  # the harness's own fails at the run's end
            _load(tmp_path, "brier")
        with pytest.raises(ValueError, match="answer positions"):
            _load(tmp_path, "cal")
        task = _load(tmp_path, "plain")["tasks"]["plain"]
    assert "cece" not in task.aggregation() and "ece" in task.aggregation()  # the default leaves them out


def test_write_task_writes_the_two_lines_and_the_task_runs_calibrated(tmp_path):
    from calibkit.plugins.lm_eval import CalibratedTask, write_task

    rows = [{"question": "q", "choices": ["a", "b"], "gold": 0}, {"question": "r", "choices": ["a", "b"], "gold": 1}]
    _json_task(tmp_path, "base_mc", rows, MC_BODY)
    path = write_task(tmp_path / "calibrated", "base_mc", include_path=str(tmp_path), defaults=False)
    text = path.read_text()
    assert path.name == "base_mc_calibkit.yaml" and PLUGIN in text
    assert text.startswith(f"include: {tmp_path / 'base_mc.yaml'}\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        task = _load(path.parent, "base_mc_calibkit")["tasks"]["base_mc_calibkit"]
    assert isinstance(task, CalibratedTask) and {"acc", "brier_score", "ece", "cece"} <= set(task.aggregation())
    with pytest.raises(ValueError, match="no task"):
        write_task(tmp_path, "no_such_task_anywhere", include_path=str(tmp_path), defaults=False)


def test_the_llm_demo_shows_the_harness_table_with_calibkits_rows(choice_run, tmp_path, capsys):
    from transformers import AutoTokenizer, GPT2LMHeadModel

    from calibkit.demos.llm_harness import CHOICE_TASK, harness_choice_section

    path = choice_run[2]
    model, tokenizer = GPT2LMHeadModel.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)
    rng = np.random.default_rng(2)
    examples = []
    for i in range(12):  # 2 to 4 choices, as BIG-bench's general_knowledge has: no metric over positions
        choices = [str(w) for w in rng.choice(WORDS, 2 + i % 3, replace=False)]
        examples.append(
            {"input": f"what is {choices[0]} ?", "target_scores": {c: int(j == i % 2) for j, c in enumerate(choices)}}
        )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        part = harness_choice_section(model, tokenizer, examples, "Q: what is red ?\nA: red\n\n", tmp_path)
    text, numbers = "\n".join(part["lines"]), part["json"]["results"]
    shown = {line.split("|")[5].strip() for line in text.splitlines() if line.count("|") == 10}
    assert {"Metric", "acc", "ece", "ece_ci_lower", "brier", "nll", "aurc"} <= shown and "cece" not in shown
    assert main(["choices", "--predictions", part["json"]["samples"], "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["tasks"][CHOICE_TASK]
    assert report["questions"] == 12
    for metric in ("ece", "brier", "nll", "aurc"):
        assert abs(numbers[f"{metric},none"] - report[metric]) <= 1e-12, metric


@pytest.mark.parametrize(
    "answer, metric, message",
    [
        ("blue\nConfidence: 150%", "exact_match", "above 100%"),  # a stated confidence is never clipped
        ("blue\nConfidence: 80%", "!function utils.twice", "neither 0/1 nor a score in"),
    ],
)
def test_a_generated_answer_calibkit_cannot_read_is_refused(tmp_path, answer, metric, message):
    rows = [{"question": "sky", "answer": "blue"}, {"question": "grass", "answer": "green"}]
    body = GEN_BODY.replace("metric: exact_match", f"metric: {metric}")
    _json_task(tmp_path, "base_gen", rows, body)
    (tmp_path / "utils.py").write_text("def twice(references, predictions):\n    return 2.0\n")
    (tmp_path / "cal.yaml").write_text(f"include: base_gen.yaml\n{PLUGIN}task: cal\n")
    lm = ScriptedLM({"sky": answer, "grass": "green\nConfidence: 60%"})
    with pytest.raises(ValueError, match=message):
        _run(lm, tmp_path, tmp_path, ["cal"])


@pytest.mark.parametrize("metric, threshold", [("exact_match", 1), ("!function utils.half", 0.5)])
def test_an_answer_scored_exactly_at_the_threshold_is_right(tmp_path, metric, threshold):
    """Right when the score is at least `threshold`: exact_match 1 at `threshold: 1`, a score of 0.5 at 0.5."""
    said = {"sky": "blue\nConfidence: 80%", "grass": "green\nConfidence: 80%"}
    rows = [{"question": q, "answer": a} for q, a in said.items()]  # exact_match: the whole answer is the target
    _json_task(tmp_path, "base_gen", rows, GEN_BODY.replace("metric: exact_match", f"metric: {metric}"))
    (tmp_path / "utils.py").write_text("def half(references, predictions):\n    return 0.5\n")
    options = f"calibkit:\n  threshold: {threshold}\n  bootstrap: 0\n  metrics: [brier, ece]\n"
    (tmp_path / "cal.yaml").write_text(f"include: base_gen.yaml\n{PLUGIN}task: cal\n{options}")
    result, _ = _run(ScriptedLM(said), tmp_path, tmp_path, ["cal"])
    row = result["results"]["cal"]
    assert row[f"{metric.split('.')[-1]},none"] == threshold  # the score is the threshold itself
    assert row["brier,none"] == pytest.approx(0.2**2, abs=1e-12)  # both right at 80%: wrong would give 0.8**2
    assert row["ece,none"] == pytest.approx(0.2, abs=1e-12)


def test_a_generate_until_task_with_filters_is_refused(tmp_path):
    rows = [{"question": "sky", "answer": "blue"}]
    filters = "filter_list:\n  - name: strict\n    filter:\n      - function: regex\n        regex_pattern: (\\w+)\n"
    _json_task(tmp_path, "base_gen", rows, GEN_BODY + filters)
    (tmp_path / "cal.yaml").write_text(f"include: base_gen.yaml\n{PLUGIN}task: cal\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        with pytest.raises(ValueError, match="has filters \\(strict\\)"):
            _load(tmp_path, "cal")
        assert "base_gen" in _load(tmp_path, "base_gen")["tasks"]  # the plain task loads: the class refuses
