"""``calibkit preferences --scores FILE``: a reward model's preference probabilities, per subset and pooled.

Reads RewardBench's per-sample output (``{model}_outputs.jsonl``) or a plain file of pairs
(:mod:`calibkit.lm.preferences`), judges ``sigmoid((r_chosen - r_rejected) / T)`` at ``T = 1``
(the model as trained) per subset and pooled, with RewardBench's sections where the subsets are
RewardBench's; ``--fit`` fits the pairwise temperature on every pair and judges it, and the
confidence maps beside it, fitted on half of the pairs and judged on the other half over the
re-splits.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.cli.common import check_options, writable_folder
from calibkit.io.jsonable import json_ready
from calibkit.lm.preferences.report import JUDGED
from calibkit.metrics.preferences import PREFERENCE_HEADLINE
from calibkit.metrics.registry import PREFERENCE_METRICS
from calibkit.plots.tables import cell, markdown_table

COLUMNS = ("pairs", "ties", *PREFERENCE_METRICS)
"""The columns of the subsets' table, in order."""

_HEADS = {"mean_confidence": "mean confidence"}


def format_preferences_table(report: dict[str, Any]) -> str:
    """Render a preference report as Markdown: pooled and per subset, the length bias, the sections, what was left out.

    Parameters
    ----------
    report : dict
        From :func:`calibkit.lm.preferences.preference_report`.

    Returns
    -------
    str
    """
    pooled = report["pooled"]
    intervals = pooled.get("intervals", {})
    rows = [["pooled", *(cell(pooled[c], intervals.get(c)) for c in COLUMNS)]]
    if len(report["subsets"]) > 1:
        rows += [[name, *(cell(r[c]) for c in COLUMNS)] for name, r in report["subsets"].items()]
    lines = [markdown_table(["subset", *(_HEADS.get(c, c) for c in COLUMNS)], rows)]
    lines.append(
        f"ties (equal rewards: confidence 0.5, counted wrong as RewardBench's accuracy counts them): "
        f"{report['ties']:,} of {report['pairs']:,} pairs"
    )
    bias = pooled.get("length_bias")
    if bias:
        lines.append(
            f"length bias: accuracy {cell(bias['accuracy_chosen_longer'], missing='-')} where the chosen answer is the "
            f"longer ({bias['chosen_longer']:,} pairs), {cell(bias['accuracy_chosen_shorter'], missing='-')} where it "
            f"is the shorter ({bias['chosen_shorter']:,}; {bias['equal_length']:,} of equal length); correlation of "
            f"the margin and the length difference {cell(bias['correlation'], missing='-')}"
        )
    if report["sections"]:
        head = ["RewardBench section", "accuracy"]
        lines.append(markdown_table(head, [[name, cell(value)] for name, value in report["sections"].items()]))
    elif report["sections_note"]:
        lines.append(report["sections_note"])
    if report["dropped"]:
        shown = "\n".join(f"- {line}" for line in report["dropped_pairs"])
        more = report["dropped"] - len(report["dropped_pairs"])
        lines.append(f"dropped pairs (a reward missing, NaN or infinite): {report['dropped']:,}\n{shown}")
        lines[-1] += f"\n- ... and {more:,} more" if more > 0 else ""
    return "\n\n".join(lines)


def format_fit(fit: dict[str, Any]) -> str:
    """Render the fitted temperature, the numbers at it, and the re-splits' held-out means and verdicts.

    Parameters
    ----------
    fit : dict
        :func:`run`'s ``fit``: ``temperature`` (or ``refused``), ``pooled`` at it, ``resplits``.

    Returns
    -------
    str
    """
    if fit["temperature"] is None:
        return f"No temperature fitted: {fit['refused']}"
    after = fit["pooled"]
    text = (
        f"Temperature T = {fit['temperature']:.4g}, fitted on every pair (NLL over pairs); at T: ECE "
        f"{cell(after['ece'])}, Brier {cell(after['brier'])}, NLL {cell(after['nll'])} (ranking unchanged)"
    )
    held = fit.get("resplits")
    if not held:
        return text
    metrics = JUDGED
    rows = [[method, *(cell(values[m], missing="-") for m in metrics)] for method, values in held["means"].items()]
    how = f"fitted on half of the pairs, judged on the other half, {held['resplits']} re-splits; held-out means"
    if held["unfitted"]:
        how += f"; {held['unfitted']} re-splits fitted no temperature (no pair of their half ranked wrong)"
    verdicts = "\n".join(
        f"- **{v['verdict']}**: {v['claim']} (better in {v['better_count']} of {v['compared']} re-splits)"
        for v in held["verdicts"]
    )
    return f"{text}\n\nCalibrations ({how}):\n{markdown_table(['calibration', *metrics], rows)}\n\n{verdicts}"


def _fit(prefs: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Fit T on every pair and judge every calibration on re-splits (``--fit``)."""
    from calibkit.lm.preferences import fit_preference_temperature, preference_report, preference_resplits

    try:
        temperature = fit_preference_temperature(prefs.margins)
    except ValueError as exc:  # every pair ranked right: no temperature, said, never a silent 0
        return {"temperature": None, "refused": str(exc).removeprefix("`margins`: ")}
    after = preference_report(prefs, temperature=temperature, n_bins=args.n_bins)["pooled"]
    out: dict[str, Any] = {"temperature": temperature, "pooled": after}
    if args.resplits:
        held = preference_resplits(prefs, resplits=args.resplits, n_bins=args.n_bins, seed=args.seed)
        means = {
            m: {k: None if np.isnan(v).all() else float(np.nanmean(v)) for k, v in metrics.items()}
            for m, metrics in held["values"].items()
        }
        verdicts = [
            {**v, "better_count": round(v["better"] * v["compared"]) if v["compared"] else 0} for v in held["verdicts"]
        ]
        out["resplits"] = {
            "resplits": held["resplits"], "means": means, "verdicts": verdicts, "unfitted": held["unfitted"],
            "temperatures": held["temperatures"],
        }  # fmt: skip
    return out


def run(args: argparse.Namespace) -> int:
    """Run ``calibkit preferences --scores FILE``.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``calibkit preferences``.

    Returns
    -------
    int
        The exit status, 0 (bad input raises a one-line ``ValueError``, which :func:`calibkit.cli.main`
        prints as exit status 2).
    """
    from calibkit.lm.preferences import preference_report, read_preferences

    check_options(args)
    prefs = read_preferences(args.scores, drop_missing=args.drop_missing)
    report = preference_report(prefs, n_bins=args.n_bins, bootstrap=args.bootstrap, seed=args.seed)
    count = len(report["subsets"])
    source = f"{args.scores} ({report['pairs']:,} pairs, {count} subset{'s' * (count != 1)}; T = 1)"
    table = format_preferences_table(report)
    out: dict[str, Any] = {"source": source, **report}
    if args.fit:
        out["fit"] = _fit(prefs, args)
        table += "\n\n" + format_fit(out["fit"])
    text = json.dumps(json_ready(out), indent=2)
    print(text if args.json else f"calibkit preferences: {source}\n{table}")
    if args.output:
        folder = writable_folder(args.output)
        (folder / "report.json").write_text(text + "\n")
        (folder / "table.md").write_text(f"# calibkit preferences: {source}\n\n{table}\n")
        page = _html(folder, source, table, prefs, out, args)
        if not args.json:
            print(f"report: {page}")
    return 0


def answer(out: dict[str, Any]) -> Any:
    """Write the page's sentence: the direction of the preferences' miscalibration, ECE, and what the temperature does.

    Parameters
    ----------
    out : dict
        :func:`run`'s JSON (the report, and ``fit`` with ``--fit``).

    Returns
    -------
    Markup
        "The reward model's preferences are over-confident: ECE 0.120 [0.101, 0.139] over 2,985
        pairs; temperature 2.3 lowers it in 19 of 20 re-splits."
    """
    import html

    from calibkit.plots import pages

    pooled = out["pooled"]
    ci = pooled.get("intervals", {})
    way = pages.direction(pooled["confidence_gap"], ci.get("confidence_gap"), ece=pooled["ece"])
    way = "of unknown direction" if way == "Calibration" else way[0].lower() + way[1:]
    text = f"ECE {pooled['ece']:.3f}"
    if "ece" in ci and not any(np.isnan(ci["ece"])):
        text += f" [{ci['ece'][0]:.3f}, {ci['ece'][1]:.3f}]"
    text += f" over {pooled['pairs']:,} pairs"
    fit = out.get("fit")
    if fit and fit["temperature"] is None:
        text += "; no temperature fitted (every pair ranked right or tied)"
    elif fit:
        verdict = next((v for v in fit.get("resplits", {}).get("verdicts", []) if v["method"] == "temperature"), None)
        text += f"; temperature {fit['temperature']:.3g}"
        if verdict and verdict["compared"]:
            text += f" lowers it in {verdict['better_count']} of {verdict['compared']} re-splits"
        else:
            text += f" gives ECE {fit['pooled']['ece']:.3f} on the pairs it was fitted on"
    return pages.Markup(f"<b>The reward model's preferences are {html.escape(way)}</b>: {html.escape(text)}.")


def _html(folder: Path, source: str, table: str, prefs: Any, out: dict[str, Any], args: argparse.Namespace) -> Path:
    """Write ``report.html``: the answer first, the reliability of the preferences (at T = 1 and fitted), the tables."""
    from calibkit.metrics.preferences import top_label_reading
    from calibkit.plots import ReliabilityDiagram, pages
    from calibkit.plots.figures import new_figure, reliability_csv

    fit = out.get("fit") or {}
    panels = [("T = 1", 1.0)]
    if fit.get("temperature"):
        panels.append((f"T = {fit['temperature']:.3g} (fitted)", fit["temperature"]))
    fig = new_figure(figsize=(3.8 * len(panels), 3.8))
    drawn = []
    for ax, (name, t) in zip(fig.subplots(1, len(panels), squeeze=False).ravel(), panels):
        conf, right = top_label_reading(prefs.margins, t)
        labels = right.astype(np.int64)
        drawn.append((name, ReliabilityDiagram.from_predictions(conf, labels, n_bins=args.n_bins, ax=ax)))
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("confidence in the preferred answer")
        ax.set_ylabel("share where it is the chosen one")
    fig.tight_layout()
    figure = folder / "reliability.png"
    fig.savefig(figure, dpi=100)
    numbers = reliability_csv(folder / "reliability.csv", drawn)
    pooled = out["pooled"]
    ci = pooled.get("intervals", {})
    headline = [(m, pooled[m], ci.get(m)) for m in PREFERENCE_HEADLINE]
    facts = [source, f"{out['ties']:,} ties", f"{out['dropped']:,} dropped"]
    alt = "Reliability of the reward model's preferences: the share of pairs whose preferred answer is the chosen one"
    sections = [
        pages.Section("Reliability of the preferences", [pages.figure(
            figure, alt + " against the confidence sigmoid(|margin| / T)", "pooled over the subsets; each pair read "
            "in the orientation the model prefers", data=numbers)]),
        pages.Section("Every number", pages.markdown_to_html(table), "Pooled and per subset, at T = 1 unless said."),
    ]  # fmt: skip
    page = folder / "report.html"
    text = pages.report_page(
        "calibkit report: reward-model preferences", pages.summary(answer(out), facts, headline), sections,
        files=["table.md", "report.json", "reliability.csv"],
    )  # fmt: skip
    page.write_text(text, encoding="utf-8")
    return page
