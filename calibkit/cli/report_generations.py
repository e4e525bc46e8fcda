"""``calibkit generations --answers PATH``: the confidence of generated answers, per source, task and pooled.

Reads lm-evaluation-harness ``generate_until`` samples or calibkit's generations format
(:mod:`calibkit.lm.generations`); the sources are the file's numeric columns, the verbalized
confidence parsed from the answers, with ``--model``, the white-box scores of a causal LM, and with
``--confidence agreement,semantic_entropy`` the agreement of several sampled answers a question.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.cli.common import check_options, format_value, name_flags, writable_folder
from calibkit.io.jsonable import json_ready
from calibkit.lm.generations.report import COVERAGE, DECOMPOSED, REJECTION
from calibkit.lm.sources import AGREEMENT, VERBALIZED, WHITEBOX, check_source, current_name, source_kind
from calibkit.metrics.registry import CONFIDENCE_METRICS
from calibkit.metrics.rejection import MAX_REJECTION
from calibkit.metrics.sampling import SAMPLING_DEFAULTS
from calibkit.metrics.settings import DEFAULTS
from calibkit.plots.tables import cell, markdown_table

WHITEBOX_HELP = ", ".join(WHITEBOX)
"""The white-box sources, as the help and the messages list them."""


def _sources(args: argparse.Namespace, data: Any, served: bool = False) -> list[str]:
    """Add the asked-for computed sources to ``data`` (in place of its reference) and return their names.

    Served responses have their log-probabilities' sources as columns, and verbalized: no model to run.
    """
    from calibkit.lm.generations.verbalized import check_words, verbalized_confidence

    asked = _asked(args, data.confidence) if args.confidence else None
    names = list(data.confidence) if asked is None else []
    texts = data.raw if data.raw is not None else data.answers
    verbal = verbalized_confidence(texts, data.origin, check_words(args.confidence_words))
    if asked is None and not np.isnan(verbal).all():  # by default, when some answer states one
        asked_verbal = True
    else:
        asked_verbal = asked is not None and VERBALIZED in asked
    offered = (VERBALIZED,) if served else (VERBALIZED, *WHITEBOX, *AGREEMENT)  # besides the data's own
    for name in asked or []:
        check_source(name, "sources", among=offered, present=data.confidence)
        if name in data.confidence:
            names.append(name)
    if asked_verbal:
        data.confidence[VERBALIZED], data.kinds[VERBALIZED] = verbal, source_kind(VERBALIZED)
        names.append(VERBALIZED)
    whitebox = [s for s in (asked or []) if s in WHITEBOX and s not in data.confidence]  # not read from the file
    if whitebox:
        if not args.model:
            raise ValueError(f"--confidence {','.join(whitebox)}: white-box sources need the causal LM: --model DIR")
        if data.questions is None:
            raise ValueError(f"--confidence {','.join(whitebox)}: {args.answers} has no question column")
        model, tokenizer = _causal_lm(args.model, args.gguf_file)
        from calibkit.lm.generations.whitebox import whitebox_confidence

        computed = whitebox_confidence(model, tokenizer, data.questions, data.answers, tuple(whitebox))
        for name, values in computed.items():
            data.confidence[name], data.kinds[name] = values, source_kind(name)
            names.append(name)
    return names


def _asked(args: argparse.Namespace, columns: dict) -> list[str]:
    """Return the sources ``--confidence`` names, each by its one name (a file's column as it is).

    An old spelling (``letters``) is read, after one line on stderr, as the other old forms are.
    """
    asked = [s.strip() for s in args.confidence.split(",")]
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", FutureWarning)
        names = [s if s in columns else current_name(s, "sources") for s in asked]
    for warning in said:
        print(f"calibkit: {name_flags(str(warning.message), args.command)}", file=sys.stderr)
    return names


def _causal_lm(folder: str, gguf_file: str | None) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    extra = {"gguf_file": gguf_file} if gguf_file else {}
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, **extra)
        model = AutoModelForCausalLM.from_pretrained(folder, **extra)
    except (OSError, ValueError) as exc:
        raise ValueError(f"--model: cannot load a causal LM from {folder}: {str(exc).splitlines()[0]}") from None
    return model.eval(), tokenizer


def format_generations_table(report: dict[str, Any]) -> str:
    """Render the sources side by side, pooled and per task, as a Markdown table.

    Parameters
    ----------
    report : dict
        From :func:`calibkit.lm.generations.generations_report`.

    Returns
    -------
    str
    """
    columns = ("answers", "without", "accuracy", "mean_confidence", *CONFIDENCE_METRICS, *DECOMPOSED, "aurc")
    head = ["task", "source", "kind", *columns, "selective accuracy (80%)", "answer above (LTT)", "answered"]
    rows = []
    groups = [("pooled", report["pooled"])] + ([*report["tasks"].items()] if len(report["tasks"]) > 1 else [])
    for task, group in groups:
        for source, row in group["sources"].items():
            cells = [task, source, report["kinds"][source], str(row["answers"]), f"{row['without']:.1%}"]
            cells += ["" if row[c] is None else format_value(row[c]) for c in (*columns[2:], "selective_accuracy")]
            held = row["abstention"]  # the Learn-then-Test threshold, beside AURC; "none" when none passes
            cells += (
                ["none", ""] if held["threshold"] is None else [f"{held['threshold']:g}", f"{held['answered']:.0%}"]
            )
            rows.append(cells)
    best = report["best"]
    return (
        markdown_table(head, rows)
        + (
            f"\n\nbest calibrated (lowest pooled ECE): {best['calibration']}; best at ranking answers (lowest AURC): "
            f"{best['ranking']}"
        )
        + "\n\n"
        + format_rejection_table(report)
    )


def format_rejection_table(report: dict[str, Any]) -> str:
    """Render each source's rejection metrics (PRR, ROC AUC, AUGRC, ...), pooled with intervals and per task.

    Parameters
    ----------
    report : dict
        From :func:`calibkit.lm.generations.generations_report`.

    Returns
    -------
    str
        A Markdown table, a row per source and task (``[low, high]`` after a pooled value with
        ``--bootstrap``), then the source of highest PRR.
    """
    head = ["task", "source", *(_HEADS.get(m, m) for m in REJECTION)]
    groups = [("pooled", report["pooled"])] + ([*report["tasks"].items()] if len(report["tasks"]) > 1 else [])
    rows = [
        [task, source, *(cell(row[m], _interval(row, m), missing="") for m in REJECTION)]
        for task, group in groups
        for source, row in group["sources"].items()
    ]
    return (
        "Rejection (how well each confidence ranks the answers by their correct score; PRR: 0 random, 1 oracle):\n"
        + markdown_table(head, rows)
        + f"\n\nhighest PRR (pooled; which source ranks best is this run's finding): {report['best'].get('rejection')}"
    )


def _interval(row: dict[str, Any], metric: str) -> tuple[float, float] | None:
    """Return the metric's interval in the row (None where not drawn), an undefined end as NaN."""
    ends = row.get("intervals", {}).get(metric)
    return None if ends is None else tuple(np.nan if e is None else float(e) for e in ends)


PAGE_FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Answers and confidence", ("kind", "answers", "without", "accuracy", "mean_confidence")),
    ("Calibration", ("ece", "ace")),
    ("Proper scores and their parts", ("brier", "nll", *DECOMPOSED)),
    ("Ranking and abstention", ("aurc", "selective_accuracy", "threshold", "answered")),
    ("Rejection by the correct score", REJECTION),
)
"""The page's "Every metric": a table per family, a row per source, a group of rows per task
(pooled first), so that no table is wider than the page (the Markdown table is one row a source)."""

_HEADS = {
    "without": "without a confidence", "mean_confidence": "mean confidence",
    "selective_accuracy": f"selective accuracy ({COVERAGE:.0%})", "threshold": "answer above (LTT)",
    "prr": "PRR", "prr_at": f"PRR@{MAX_REJECTION:.0%}", "roc_auc": "ROC AUC", "pr_auc": "PR AUC (wrong)",
    "augrc": "AUGRC", "risk_at_coverage": f"risk at {COVERAGE:.0%}",
    "coverage_at_risk": f"coverage at risk {DEFAULTS.abstention_alpha:g}",
}  # fmt: skip


def _page_cell(row: dict[str, Any], kind: str, metric: str) -> Any:
    from calibkit.plots import pages

    held = row["abstention"]
    if metric == "kind":
        return kind
    if metric == "answers":
        return row["answers"]
    if metric == "without":
        return pages.Markup(f'<span class="v">{row["without"]:.1%}</span>')
    if metric in ("threshold", "answered"):
        if held["threshold"] is None:
            return pages.number(None, missing="none" if metric == "threshold" else "")
        text = f"{held['threshold']:g}" if metric == "threshold" else f"{held['answered']:.0%}"
        return pages.Markup(f'<span class="v">{text}</span>')
    return pages.number(row[metric], row.get("intervals", {}).get(metric))


def generations_tables(report: dict[str, Any]) -> list[str]:
    """Render the sources' metrics as HTML tables that fit the page: a table per family (:data:`PAGE_FAMILIES`).

    Parameters
    ----------
    report : dict
        From :func:`calibkit.lm.generations.generations_report`.

    Returns
    -------
    list of str
        One table a family: a row per source, in a group of rows per task (pooled first; no groups
        with one task); each metric's name links to its guide entry, intervals (``--bootstrap``) below
        the pooled values.
    """
    from calibkit.plots import pages

    groups = [("pooled", report["pooled"])] + ([*report["tasks"].items()] if len(report["tasks"]) > 1 else [])
    out = []
    for i, (title, metrics) in enumerate(PAGE_FAMILIES):
        head = ["source", *(pages.metric_link(m, _HEADS.get(m, m)) for m in metrics)]
        rows: list[Any] = []
        for task, group in groups:
            if len(groups) > 1:
                name = "pooled" if task == "pooled" else f"task '{task}'"
                rows.append(pages.group_row(f"{name}: {group['questions']:,} questions", len(head)))
            rows += [
                [source, *(_page_cell(row, report["kinds"][source], m) for m in metrics)]
                for source, row in group["sources"].items()
            ]
        classes = ["text", *("text" if m == "kind" else "" for m in metrics)]
        out.append(pages.html_table(head, rows, classes=classes, caption=title, table_id="table" if i == 0 else None))
    return [pages.side_by_side(*out, kind="tables")]


def format_recalibration(resplits: dict[str, Any]) -> str:
    """Render the held-out means over re-splits and the verdicts of the recalibrations.

    Parameters
    ----------
    resplits : dict
        From :func:`calibkit.lm.generations.recalibration_resplits`.

    Returns
    -------
    str
    """
    names = list(next(iter(next(iter(resplits["values"].values())).values())))
    rows = [
        [source, name, *(format_value(float(np.nanmean(v))) if not np.isnan(v).all() else "" for v in values.values())]
        for source, maps in resplits["values"].items()
        for name, values in maps.items()
    ]
    verdicts = [f"- **{v['verdict']}**: {v['claim']} ({_share(v)})" for v in resplits["verdicts"]]
    return markdown_table(["source", "map", *names], rows) + "\n\n" + "\n".join(verdicts)


def _share(verdict: dict[str, Any]) -> str:
    if verdict["better"] is None or np.isnan(verdict["better"]):
        return "nothing compared"
    return f"better in {verdict['better']:.0%}, worse in {verdict['worse']:.0%} of the re-splits"


def run(
    args: argparse.Namespace,
    served: dict[str, Any] | None = None,
    letters: Callable[[argparse.Namespace], tuple[str, dict[str, Any]]] | None = None,
) -> int:
    """Run ``calibkit generations --answers PATH`` (and, for :mod:`calibkit.cli.report_served`, ``calibkit served``).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``calibkit generations`` (or of ``calibkit served``).
    served : dict, optional
        The answers are a served model's responses, read with these keywords of ``read_served``.
    letters : callable, optional
        Returns a section to add to the report and its JSON (the served letters').

    Returns
    -------
    int
        The exit status, 0 (bad input raises a one-line ``ValueError``, which :func:`calibkit.cli.main`
        prints as exit status 2).
    """
    from calibkit.lm.generations import (
        generations_report,
        read_agreement,
        read_generations,
        recalibration_resplits,
    )

    settings = check_options(args)  # --threshold too, by the sampling settings' one check
    asked = {s.strip() for s in args.confidence.split(",")} if args.confidence else set()
    if served is None and set(AGREEMENT) & asked:
        # several sampled answers a question: the majority answer, its agreement as confidence
        data = read_agreement(
            args.answers,
            metric=args.metric,
            harness_filter=args.harness_filter,
            answer=args.agreement_answer,
            similarity=args.similarity,
        )
    else:
        data = read_generations(
            args.answers, metric=args.metric, harness_filter=args.harness_filter,
            served=served,
        )  # fmt: skip
    names = _sources(args, data, served is not None)
    report = generations_report(
        data, sources=names, threshold=args.threshold, bootstrap=args.bootstrap, seed=args.seed, **settings
    )
    tasks = len(report["tasks"])
    source = (
        f"{args.answers} ({len(data)} answers, {tasks} task{'s' * (tasks != 1)}; right when correct >= "
        f"{args.threshold:g})"
    )
    table = format_generations_table(report)
    out: dict[str, Any] = {"source": source, **report}
    table += "\n\n" + _abstention(args, data, names, report, out)
    if args.resplits:
        resplit = recalibration_resplits(
            data, sources=names, resplits=args.resplits, threshold=args.threshold, n_bins=args.n_bins, seed=args.seed
        )
        how = f"fitted on half of the answers, judged on the other half, {args.resplits} re-splits; held-out means"
        table += f"\n\nRecalibration of each source ({how}):\n{format_recalibration(resplit)}"
        out["recalibration"] = {
            "resplits": args.resplits,
            "means": {
                s: {m: {k: _mean(v) for k, v in metrics.items()} for m, metrics in maps.items()}
                for s, maps in resplit["values"].items()
            },
            "verdicts": resplit["verdicts"],
        }
    if letters is not None:  # served multiple choice: the metrics over the letters, the unreturned mass
        section, out["letters"] = letters(args)
        table += section
    text = json.dumps(json_ready(out), indent=2)
    print(text if args.json else f"calibkit report: {source}\n{table}")
    if args.output:
        folder = writable_folder(args.output)
        (folder / "report.json").write_text(text + "\n")
        (folder / "table.md").write_text(f"# calibkit report: {source}\n{table}\n")
        page = _html(folder, source, table, data, names, args, report)
        if not args.json:
            print(f"report: {page}")
    return 0


def _abstention(args: argparse.Namespace, data: Any, names: list[str], report: dict, out: dict) -> str:
    """Render the abstention thresholds (with ``--resplits``, their held-out check too, added to ``out``)."""
    from calibkit.lm.generations.abstention import abstention_lines, abstention_resplits

    held = None
    if args.resplits:
        held = abstention_resplits(
            data, sources=names, resplits=args.resplits, threshold=args.threshold, seed=args.seed,
            abstention_alpha=args.abstention_alpha, abstention_delta=args.abstention_delta,
        )  # fmt: skip
        out["abstention_resplits"] = held
    how = "Learn then Test: answered when the confidence is at least the threshold"
    return f"Abstention with a guarantee ({how}):\n" + "\n".join(abstention_lines(report, held))


def _mean(values: np.ndarray) -> float | None:
    return None if np.isnan(values).all() else float(np.nanmean(values))


def _answer(report: dict[str, Any]) -> Any:
    """Write the page's sentence: the best calibrated source, its direction and ECE, the worst, the best ranker."""
    from calibkit.plots import pages

    sources = report["pooled"]["sources"]
    scored = {s: r for s, r in sources.items() if r.get("ece") is not None}
    if not scored:
        return "No source gave a confidence to score."
    best = min(scored, key=lambda s: scored[s]["ece"])
    row = scored[best]
    gap = (row.get("accuracy") or 0.0) - (row.get("mean_confidence") or 0.0)  # ESCE's sign: < 0 over-confident
    then = f" for the best calibrated source, '{best}', over {row['answers']:,} answers"
    if len(scored) > 1:
        worst = max(scored, key=lambda s: scored[s]["ece"])
        then += f"; the worst, '{worst}', has ECE {scored[worst]['ece']:.3f}"
    if report["best"].get("ranking"):
        then += f"; best at ranking answers (lowest AURC): '{report['best']['ranking']}'"
    return pages.answer_line(gap, row["ece"], then=then)


def _html(
    folder: Path, source: str, table: str, data: Any, names: list[str], args: argparse.Namespace,
    report: dict[str, Any],
) -> Path:  # fmt: skip
    """Write ``report.html``: the answer, one reliability diagram per source (pooled) and the tables."""
    from calibkit.plots import ReliabilityDiagram, pages
    from calibkit.plots.figures import new_figure, reliability_csv

    right = (data.correct >= args.threshold).astype(np.int64)
    columns = min(len(names), 4)
    rows = -(-len(names) // columns)
    fig = new_figure(figsize=(3.6 * columns, 3.6 * rows))
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    drawn = []
    for ax, name in zip(axes, names):
        has = ~np.isnan(data.confidence[name])
        if has.any():
            drawn.append((name, ReliabilityDiagram.from_predictions(
                data.confidence[name][has], right[has], n_bins=args.n_bins, ax=ax, bootstrap=SAMPLING_DEFAULTS.bootstrap
            )))  # fmt: skip
        ax.set_title(f"{name} ({data.kinds[name]})", fontsize=9)
        ax.set_xlabel("confidence that the answer is right")
        ax.set_ylabel("share of right answers")
    for ax in axes[len(names) :]:
        ax.set_visible(False)
    fig.tight_layout()
    figure = folder / "reliability.png"
    fig.savefig(figure, dpi=100)
    numbers = reliability_csv(folder / "reliability.csv", drawn)
    page = folder / "report.html"
    shown = format_generations_table(report)  # drawn as the tables of each family; what follows it as written
    rest = table[len(shown) :] if table.startswith(shown) else table
    facts = [source, f"{len(names)} confidence source{'s' * (len(names) != 1)}"]
    pooled = report["pooled"]["sources"]
    headline = [("ece", pooled[n].get("ece"), None, f"ece {n}") for n in names[:5] if n in pooled]
    sections = [
        pages.Section("Reliability per source", [pages.figure(
            figure, "One reliability diagram per confidence source: the share of right answers against the "
            "confidence, with each bin's 95% bootstrap band", "pooled over the tasks", data=numbers, wide=True)]),
        pages.Section("Every metric", [*generations_tables(report), *pages.markdown_to_html(rest)],
                      "Per source, pooled and per task."),
    ]  # fmt: skip
    text = pages.report_page(
        "calibkit report: generations", pages.summary(_answer(report), facts, headline), sections,
        files=["table.md", "report.json"],
    )  # fmt: skip
    page.write_text(text, encoding="utf-8")
    return page
