"""The comparison's HTML page: the answer first, then reliability, verdicts, metrics, classes, regions, sets.

:func:`comparison_page` builds ``index.html`` of :func:`calibkit.verdicts.reporting.write_report`
(a predictions file, a model on a dataset, the token and sequence demos) with the one page design
of :mod:`calibkit.plots.pages`. Its summary's sentence (:func:`answer`) is computed from the
comparison's numbers and says only what applies: a predictions file has no calibrators, so it has
no sentence about them; a comparison with re-splits says in how many of them the best calibrator
lowers the ECE.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.metrics.registry import REPORT_FAMILIES, headline
from calibkit.metrics.statistics import largest_classes
from calibkit.plots import pages
from calibkit.plots.figures import MIN_PANEL_SUPPORT
from calibkit.plots.pages import Markup, Section
from calibkit.verdicts.claims import HOLD_SHARE, MIN_RESPLITS, what_this_means
from calibkit.verdicts.comparison import HIGHER_IS_BETTER, METHOD_LABELS, SIGNED, Comparison
from calibkit.verdicts.held import conformal_note

__all__ = ["FAMILIES", "answer", "comparison_page", "metric_tables"]

FAMILIES = REPORT_FAMILIES
"""The metric families, each a group of rows (``calibkit.metrics.registry.REPORT_FAMILIES``)."""

METHOD_NAMES = {
    "ts": "temperature scaling", "wts": "weighted temperature scaling",
    "rd-ts": "region-dependent temperature scaling", "vs": "vector scaling", "ms": "matrix scaling",
    "ir": "isotonic regression", "hb": "histogram binning", "dirichlet": "Dirichlet calibration",
    "beta": "beta calibration", "venn-abers": "Venn-Abers",
}  # fmt: skip

ROWS_FOR_FEW = 3
"""Up to this many methods, the metrics are the rows (a narrow table beside its figure); beyond,
the methods are, one table per metric family, so that no table is wider than the page."""


def _name(method: str) -> str:
    label = METHOD_LABELS.get(method, method)
    long = METHOD_NAMES.get(method, label)
    return f"{long} ({label})" if long != label else label


def _interval(comparison: Comparison, method: str, metric: str) -> tuple[float, float] | None:
    return comparison.intervals.get(method, {}).get(metric)


def _fmt(value: float, interval: Any, digits: int = 3) -> str:
    text = f"{value:.{digits}f}"
    if interval is not None and not any(math.isnan(e) for e in interval):
        text += f" [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"
    return text


def _direction(comparison: Comparison) -> str:
    """Over- or under-confident, from ESCE's sign (< 0: over-confident), its interval where there is one."""
    row = comparison.rows["uncalibrated"]
    esce = row.get("esce", math.nan)
    return pages.direction(esce, _interval(comparison, "uncalibrated", "esce"), ece=row.get("ece"))


def _worst_class(comparison: Comparison) -> str:
    support = comparison.statistics["uncalibrated"].label_counts()
    ece = np.asarray(comparison.per_class["uncalibrated"], dtype=np.float64)
    big = (support >= MIN_PANEL_SUPPORT) & np.isfinite(ece)
    pool = big if big.sum() >= 2 else (support > 0) & np.isfinite(ece)
    if pool.sum() < 2:
        return ""
    worst = int(np.flatnonzero(pool)[np.argmax(ece[pool])])
    return f", worst class '{comparison.class_names[worst]}' ({ece[worst]:.2f})"


def _fix(comparison: Comparison, resplits: Any) -> str:
    """Say what the best calibrator does to the ECE: over the re-splits where there are, else on the split."""
    calibrated = [m for m in comparison.rows if m != "uncalibrated"]
    if not calibrated:
        return ""
    if resplits is not None and "uncalibrated" in resplits.methods:
        fitted = [m for m in resplits.methods if m != "uncalibrated"]
        fitted = [m for m in fitted if resplits.summary(m, "ece")["n"] >= min(resplits.resplits, MIN_RESPLITS)]
        if fitted:
            best = min(fitted, key=lambda m: resplits.summary(m, "ece")["mean"])
            p = resplits.paired(best, "uncalibrated", "ece")
            better = int(round(p["better"] * p["n"]))
            verb = "lowers" if p["better"] >= 0.5 else "lowers it only"
            mean = resplits.summary(best, "ece")["mean"]
            return f"; {_name(best)} {verb} it in {better} of {p['n']} re-splits (mean ECE {mean:.3f})"
    best = comparison.best
    if best == "uncalibrated":
        return "; no calibrator could be fitted"
    ece = comparison.rows[best].get("ece", math.nan)
    before = comparison.rows["uncalibrated"].get("ece", math.nan)
    verb = "lowers it to" if ece < before else "leaves it at"
    return (
        f"; the best calibrator by {comparison.select.upper()}, {_name(best)}, {verb} "
        f"{_fmt(ece, _interval(comparison, best, 'ece'))} on the test rows"
    )


def answer(comparison: Comparison, resplits: Any = None) -> Markup:
    """Write the page's one-sentence answer: direction, ECE with its interval, worst class, the fix.

    Parameters
    ----------
    comparison : Comparison
        From :func:`~calibkit.verdicts.comparison.compare_calibrators`.
    resplits : Resplits, optional
        When given, the fix is read over the re-splits (in how many the best calibrator lowers ECE).

    Returns
    -------
    Markup
        E.g. "**Over-confident**: ECE 0.146 [0.139, 0.152], worst class 'discussion' (0.42);
        temperature scaling (TS) lowers it in 20 of 20 re-splits (mean ECE 0.031)." Every number
        is the comparison's; a comparison without calibrators (a predictions file) says nothing of them.
    """
    ece = comparison.rows["uncalibrated"].get("ece", math.nan)
    text = f"ECE {_fmt(ece, _interval(comparison, 'uncalibrated', 'ece'))}{_worst_class(comparison)}"
    text += _fix(comparison, resplits)
    return Markup(f"<b>{html.escape(_direction(comparison))}</b>: {html.escape(text, quote=False)}.")


def _best(comparison: Comparison, metric: str) -> str | None:
    values = {k: row[metric] for k, row in comparison.rows.items() if not math.isnan(row.get(metric, math.nan))}
    if metric in SIGNED:
        values = {k: abs(v) for k, v in values.items()}
    if len(values) < 2:
        return None
    return (max if metric in HIGHER_IS_BETTER else min)(values, key=values.get)


def _cell(comparison: Comparison, method: str, metric: str) -> Any:
    value = pages.number(float(comparison.rows[method][metric]), _interval(comparison, method, metric))
    return (value, pages.BEST) if _best(comparison, metric) == method else value


def metric_tables(comparison: Comparison) -> list[str]:
    """Render the comparison's metrics as tables that fit the page.

    Up to :data:`ROWS_FOR_FEW` methods, one table: the metrics as rows, grouped by family
    (:data:`FAMILIES`), a column per method. Beyond, one table per family: a row per method. Each
    metric's name links to its guide entry; the best value of each metric is bold.

    Parameters
    ----------
    comparison : Comparison

    Returns
    -------
    list of str
    """
    present = {m for row in comparison.rows.values() for m in row}
    families = [(title, [m for m in metrics if m in present]) for title, metrics in FAMILIES]
    known = {m for _, metrics in FAMILIES for m in metrics}
    families.append(("Other", sorted(present - known)))
    families = [(title, metrics) for title, metrics in families if metrics]
    methods = list(comparison.rows)
    out = []
    if len(methods) <= ROWS_FOR_FEW:  # small tables side by side, a family each, the metrics as rows
        for i, (title, metrics) in enumerate(families):
            head = ["metric", *(METHOD_LABELS[m] for m in methods)]
            rows = [[pages.metric_link(m), *(_cell(comparison, k, m) for k in methods)] for m in metrics]
            out.append(pages.html_table(head, rows, caption=title, table_id="table" if i == 0 else None))
        return [pages.side_by_side(*out, kind="tables")]
    for i, (title, metrics) in enumerate(families):
        head = ["method", *(pages.metric_link(m) for m in metrics)]
        rows = [[METHOD_LABELS[k], *(_cell(comparison, k, m) for m in metrics)] for k in methods]
        out.append(pages.html_table(head, rows, caption=title, table_id="table" if i == 0 else None))
    return out


def _resplit_cell(resplits: Any, method: str, metric: str) -> Markup:
    from calibkit.verdicts.resplits import _marks

    s = resplits.summary(method, metric)
    if not s["n"]:
        return Markup('<span class="v">not fitted</span>')
    marks = _marks(resplits, method, metric)
    spread = f" ± {s['std']:.4f}" if not math.isnan(s["std"]) else ""
    interval = f'<span class="ci">[{s["low"]:.4f}, {s["high"]:.4f}]</span>'
    return Markup(f'<span class="v">{s["mean"]:.4f}{spread}{marks}</span>{interval}')


def resplit_tables(resplits: Any) -> list[str]:
    """Render the re-splits' table one metric family at a time: a row per method, ``mean ± std`` and its interval.

    Parameters
    ----------
    resplits : Resplits
        From :func:`calibkit.verdicts.resplits.resplit_comparison`.

    Returns
    -------
    list of str
    """
    known = {m for _, metrics in FAMILIES for m in metrics}
    families = [(t, [m for m in ms if m in resplits.metrics]) for t, ms in FAMILIES]
    families.append(("Other", [m for m in resplits.metrics if m not in known]))
    out = []
    for i, (title, metrics) in enumerate((t, ms) for t, ms in families if ms):
        head = ["method", *(pages.metric_link(m) for m in metrics)]
        rows = [[METHOD_LABELS[k], *(_resplit_cell(resplits, k, m) for m in metrics)] for k in resplits.methods]
        out.append(pages.html_table(head, rows, caption=title, table_id="resplit-table" if i == 0 else None))
    return out


def class_table(comparison: Comparison) -> str:
    """Render each class's ECE under each method, the classes of largest support first, beyond 20 folded.

    Parameters
    ----------
    comparison : Comparison

    Returns
    -------
    str
    """
    support = comparison.statistics["uncalibrated"].label_counts()
    methods = list(comparison.rows)
    order = largest_classes(support, limit=len(support))
    if len(order) > 1 and len(support) <= 20:
        order = sorted(order, key=lambda c: (-support[c], c))
    rows = []
    for c in order:
        cells = []
        for m in methods:
            ci = comparison.class_intervals.get(m)
            cells.append(pages.number(float(comparison.per_class[m][c]), None if ci is None else (ci[0][c], ci[1][c])))
        rows.append([str(comparison.class_names[c]), int(support[c]), *cells])
    head = ["class", "n", *(pages.metric_link("subset_ece", f"ECE {METHOD_LABELS[m]}") for m in methods)]
    return pages.collapsed_table(head, rows, keep=20, what="classes (smaller support)", table_id="classes")


def conformal_html(comparison: Comparison) -> str:
    """Render the conformal sets' coverage and mean size per method and score (empty without sets).

    Parameters
    ----------
    comparison : Comparison

    Returns
    -------
    str
    """
    if not comparison.sets:
        return ""
    scores = list(next(iter(comparison.sets.values())))
    head = ["method"]
    for s in scores:
        head += [
            pages.metric_link("coverage", f"{s.upper()} coverage"),
            pages.metric_link("set_size", f"{s.upper()} set size"),
        ]
    smallest = {s: np.nanmin([c[s]["set_size"] for c in comparison.sets.values()] + [np.inf]) for s in scores}
    rows = []
    for method, cells in comparison.sets.items():
        row: list[Any] = [METHOD_LABELS[method]]
        for s in scores:
            size = pages.number(cells[s]["set_size"], missing="n/a")
            row += [
                pages.number(cells[s]["coverage"], missing="n/a"),
                (size, pages.BEST) if cells[s]["set_size"] == smallest[s] else size,
            ]
        rows.append(row)
    return pages.html_table(head, rows, table_id="conformal")


def _figure(paths: dict[str, Path], name: str, alt: str, caption: str = "", wide: bool = False) -> str:
    if name not in paths:
        return ""
    return pages.figure(paths[name], alt, caption, data=paths.get(f"{name}_data"), wide=wide)


def _facts(comparison: Comparison, resplits: Any, source: str) -> list[str]:
    k = len(comparison.class_names)
    calibrated = [m for m in comparison.rows if m != "uncalibrated"]
    facts = [source] if source else []
    facts.append(f"{comparison.n_test:,} test predictions, {k} classes")
    if calibrated:
        plural = "s" * (len(calibrated) != 1)
        facts.append(f"{len(calibrated)} calibrator{plural} fitted on {comparison.n_val:,} validation predictions")
    if resplits is not None:
        facts.append(f"{resplits.resplits} re-splits")
    if comparison.intervals:
        facts.append("[ ]: 95% bootstrap intervals")
    return facts


def _headline(comparison: Comparison) -> list[tuple[Any, ...]]:
    row = comparison.rows["uncalibrated"]
    out = [(m, row[m], _interval(comparison, "uncalibrated", m)) for m in headline(row)]
    best = comparison.best
    if best != "uncalibrated" and "ece" in comparison.rows[best]:
        out.append(
            (
                "ece",
                comparison.rows[best]["ece"],
                _interval(comparison, best, "ece"),
                f"ece after {METHOD_LABELS[best]}",
            )
        )
    return out


def _verdicts(claims: list[dict[str, Any]]) -> str:
    """Render the verdicts as a table; fold the claims not tested here (and why) below it."""
    tested = [c for c in claims if c["verdict"] in ("holds", "does not hold", "inconclusive")]
    other = [c for c in claims if c not in tested]
    table = pages.verdict_table(tested) if tested else ""
    if not other:
        return table
    folded = pages.verdict_table(other, table_id=None if tested else "verdicts")
    return f"{table}<details><summary>{len(other)} claims not tested here, and why</summary>{folded}</details>"


def _reliability(comparison: Comparison, paths: dict[str, Path]) -> Section:
    """Return the reliability section: the binned diagram (with bootstrap bands) beside the smooth one."""
    calibrated = [m for m in comparison.rows if m != "uncalibrated"]
    drawn = "the uncalibrated model" + (
        f" and the best calibrator ({METHOD_LABELS[comparison.best]})" if calibrated else ""
    )
    reliability = Section(
        "Reliability",
        [
            pages.side_by_side(
                _figure(
                    paths,
                    "reliability",
                    f"Binned reliability diagram of {drawn}: accuracy against confidence in "
                    f"{comparison.n_bins} bins with each bin's 95% bootstrap band, and the samples per bin",
                    "binned; shaded: each bin's 95% bootstrap band; below the diagonal: more confident than accurate",
                ),
                _figure(
                    paths,
                    "reliability_smooth",
                    f"Smooth reliability diagram of {drawn}: kernel-smoothed accuracy against confidence, no bins",
                    "smooth: no bins (smECE's kernel)",
                ),
                kind="pair",
            )
        ],
    )
    return reliability


def _class_and_region_sections(comparison: Comparison, paths: dict[str, Path]) -> list[Section]:
    """Return the classes' section (table beside its figure, then the panels) and the regions' section."""
    sections = []
    sections.append(
        Section(
            "Classes",
            [
                pages.side_by_side(
                    class_table(comparison),
                    _figure(
                        paths,
                        "class_ece_vs_support",
                        "Each class's ECE against its number of test samples (log scale)",
                        "ECE against support",
                    ),
                ),
                _figure(
                    paths,
                    "reliability_per_class",
                    "One reliability diagram per class (its samples only)",
                    "per class",
                    wide=True,
                ),
            ],  # fmt: skip
            "Each class's ECE on its own samples (subset ECE), the classes of largest support first.",
        )
    )
    sections.append(
        Section(
            "Regions of certainty",
            [
                _figure(
                    paths,
                    "regions",
                    f"|accuracy - confidence| in each of {comparison.rbece_bins} bins; RBECE counts "
                    f"the bins of more than {comparison.theta:g} samples",
                    "RBECE's regions",
                )
            ],  # fmt: skip
            "RBECE counts every populated region once, not only the crowded top bin.",
        )
    )
    return sections


def comparison_page(
    comparison: Comparison, title: str, paths: dict[str, Path], resplits: Any = None, source: str = ""
) -> str:
    """Build the comparison's page: summary, reliability, verdicts, metrics, classes, regions, conformal sets.

    Parameters
    ----------
    comparison : Comparison
        From :func:`~calibkit.verdicts.comparison.compare_calibrators`.
    title : str
        The page's title.
    paths : dict of str to Path
        The files written (figures, their ``*_data`` CSVs, tables, JSON).
    resplits : Resplits, optional
        Adds what this means, the verdicts and the table over the re-splits.
    source : str, default=""
        What was evaluated, for the summary.

    Returns
    -------
    str
        The HTML.
    """
    from calibkit.verdicts import resplits as rs

    calibrated = [m for m in comparison.rows if m != "uncalibrated"]
    sections = [_reliability(comparison, paths)]
    if resplits is not None:
        claims = rs.verdicts(resplits)
        meaning = Markup(f"<p id='what-this-means'>{html.escape(what_this_means(resplits, claims))}</p>")
        counts = {v: sum(c["verdict"] == v for c in claims) for v in ("holds", "does not hold", "inconclusive")}
        tally = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
        sections.append(Section("Verdicts on the papers' claims", [meaning, _verdicts(claims)],
                                f"{tally}. A verdict holds when the claimed direction is found in at least "
                                f"{HOLD_SHARE:.0%} of the re-splits.", ident="verdicts-section"))  # fmt: skip
        sections.append(Section(f"Over {resplits.resplits} re-splits", resplit_tables(resplits),
                                rs.resplit_note(resplits), ident="resplits"))  # fmt: skip
    notes = "".join(f" {METHOD_LABELS[m]} not fitted: {e}." for m, e in comparison.errors.items())
    where = (
        f"Calibrators fitted on {comparison.n_val:,} validation predictions, evaluated on "
        f"{comparison.n_test:,} test predictions."
        if calibrated
        else f"{comparison.n_test:,} predictions."
    )
    metrics_title = "One split: every metric" if resplits is not None else "Every metric"
    bold = " Bold: the best of each metric (closest to 0 for the signed ECD, ESCE)." if len(comparison.rows) > 1 else ""
    sections.append(Section(metrics_title, metric_tables(comparison), f"{where}{bold}{notes}", ident="metrics"))
    sections += _class_and_region_sections(comparison, paths)
    if comparison.sets:
        sections.append(Section("Conformal prediction sets", [conformal_html(comparison)], conformal_note(comparison)))
    files = [paths[k] for k in ("markdown", "csv", "json", "verdicts") if k in paths]
    return pages.report_page(title, pages.summary(answer(comparison, resplits), _facts(comparison, resplits, source),
                                                  _headline(comparison)), sections, files=files)  # fmt: skip
