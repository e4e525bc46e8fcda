"""One self-contained HTML page (no network), one design for every report: the answer first.

Every report that writes HTML (a predictions file, a model on a dataset, the demos, the
multiple-choice logs, the generations, multi-label) builds its page with :func:`report_page`:

- a summary first (:func:`summary`): the one-sentence answer the reader came for, what was
  evaluated and on how many rows, and the headline numbers with their intervals
  (``calibkit.metrics.registry.headline``). The answer names the direction from ESCE's sign
  (:func:`direction`); where every bin leans the same way, ESCE is ECE with a sign, so the
  headline leaves ESCE out (the next headline metric takes its place) and the answer says the
  direction in words: "Over-confident in every bin". Where the bins lean both ways, ESCE stays;
- an in-page table of contents, then the :class:`Section` objects in order, each a heading, a
  short note and its blocks; :func:`side_by_side` puts a figure next to the table it illustrates;
  a section with no block is left out (no heading over nothing);
- tables from :func:`html_table` (numbers right-aligned in tabular figures, an interval on one
  line below its value in a smaller font, :func:`number`), none wider than the page at 1280 px:
  many metrics of many rows are a table per metric family, a row per method or source, a group of
  rows (:func:`group_row`) per task where there are several; a long one collapsed behind its first
  rows (:func:`collapsed_table`), verdicts as a table with a coloured mark each
  (:func:`verdict_table`), every metric name linked to its entry in the metric guide
  (:func:`metric_link`);
- figures embedded as data URIs (:func:`figure`), each with its alt text and a link to the
  numbers behind it (a CSV written beside it, also embedded, so the page alone carries them).

The style holds a dark theme (``prefers-color-scheme``) and a print layout (``@media print``:
no table of contents, the collapsed rows opened). Nothing is fetched: no font, script or style
from a network. :func:`html_page`, :func:`markdown_to_html` and :func:`markdown_to_html_table`
are the older helpers (a page of sections from Markdown), kept for pages not yet moved.
"""

from __future__ import annotations

import base64
import html
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from calibkit.metrics.registry import leans_one_way

__all__ = [
    "DOCS_URL",
    "METRIC_ANCHORS",
    "Markup",
    "Section",
    "answer_line",
    "collapsed_table",
    "direction",
    "embedded_figure",
    "figure",
    "html_page",
    "html_table",
    "markdown_to_html",
    "markdown_to_html_table",
    "metric_link",
    "number",
    "report_page",
    "side_by_side",
    "summary",
    "verdict_table",
]

DOCS_URL = "https://calibkit.readthedocs.io/en/latest/"
"""Where the pages link a metric's name to: the documentation site's root (its guide page
``guide/choosing_a_metric.html``, whose sections under "The metrics" are the metrics' entries).
A page opened offline still reads; only the link needs the network."""

METRIC_GUIDE = "guide/choosing_a_metric.html"

_CLASSES = "per-class-ece-cece-msece-wsece-ece-variance"
_CORP = "score-decomposition-miscalibration-discrimination-uncertainty"
_AURC = "aurc-selective-accuracy-and-the-risk-coverage-curve"
_SETS = "coverage-and-size-of-prediction-sets"
_REJECTION = "rejection-metrics-prr-roc-auc-pr-auc-augrc-risk-and-coverage"

METRIC_ANCHORS = {
    "ece": "ece-and-mce", "mce": "ece-and-mce", "ece_l2": "l2-ece-and-its-debiased-estimate",
    "ece_l2_debiased": "l2-ece-and-its-debiased-estimate", "ace": "ace", "sce": "sce",
    "subset_ece": _CLASSES, "cece": _CLASSES, "msece": _CLASSES, "wsece": _CLASSES, "ece_variance": _CLASSES,
    "rbece": "rbece", "fce": "fce", "smece": "smooth-ece", "smooth_ece": "smooth-ece",
    "overconfidence": "overconfidence", "ecd": "ecd", "esce": "esce", "brier": "brier-score-and-nll",
    "nll": "brier-score-and-nll", "brier_miscalibration": _CORP, "brier_discrimination": _CORP,
    "brier_uncertainty": _CORP, "aurc": _AURC, "selective_accuracy": _AURC, "coverage": _SETS, "set_size": _SETS,
    "accuracy": "accuracy", "macro_f1": "macro-f1", "ece_micro": "ece-and-mce", "ece_macro": "ece-and-mce",
    "miscalibration": _CORP, "discrimination": _CORP, "uncertainty": _CORP,
    "prr": _REJECTION, "prr_at": _REJECTION, "roc_auc": _REJECTION, "pr_auc": _REJECTION, "augrc": _REJECTION,
    "risk_at_coverage": _REJECTION, "coverage_at_risk": _REJECTION,
}  # fmt: skip
"""Metric name (as the reports print it) -> its section's anchor in ``docs/guide/choosing_a_metric.rst``."""

BEST = "best"
"""The class of a table cell holding the best value of its column (drawn bold)."""

_VERDICT_CLASS = {"holds": "holds", "does not hold": "does-not-hold", "inconclusive": "inconclusive"}

_STYLE = """
:root{color-scheme:light dark;--fg:#1f2328;--bg:#fff;--muted:#59636e;--line:#d1d9e0;--panel:#f6f8fa;
--good:#1a7f37;--bad:#cf222e;--warn:#9a6700;--none:#8c959f;--link:#0969da}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--bg:#0d1117;--muted:#9198a1;--line:#3d444d;
--panel:#151b23;--good:#3fb950;--bad:#f85149;--warn:#d29922;--none:#6e7681;--link:#4493f8}}
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg);
margin:0 auto;padding:.8rem 1.5rem 2rem;max-width:1260px}
p,.facts,figcaption{overflow-wrap:anywhere}
a{color:var(--link)}
h1{font-size:1.3rem;margin:.2rem 0 .5rem;line-height:1.3}
h2{font-size:1.12rem;margin:1.1rem 0 .4rem;padding-bottom:.15rem;border-bottom:1px solid var(--line)}
h3{font-size:1rem;margin:.8rem 0 .3rem}
p{margin:.3rem 0 .6rem;max-width:75rem}
.summary{border:1px solid var(--line);border-radius:8px;background:var(--panel);padding:.55rem 1rem .6rem}
.answer{font-size:1.08rem;margin:.1rem 0 .4rem}
.answer b{font-weight:650}
.facts{color:var(--muted);margin:.1rem 0 .4rem;font-size:.9rem}
.headline{display:flex;flex-wrap:wrap;gap:.3rem 1.6rem;margin:0;padding:0;list-style:none}
.headline li{display:flex;flex-direction:column}
.headline .k{font-size:.8rem;color:var(--muted)}
.headline .v{font-size:1.15rem;font-variant-numeric:tabular-nums}
.headline .ci{font-size:.78rem;color:var(--muted);font-variant-numeric:tabular-nums;white-space:nowrap}
nav.toc{margin:.6rem 0 0;font-size:.88rem}
nav.toc ol{display:flex;flex-wrap:wrap;gap:.2rem 1.2rem;margin:0;padding:0;list-style:none}
.row{display:flex;flex-wrap:wrap;gap:1rem 1.5rem;align-items:flex-start}
.row>*{min-width:0;max-width:100%}
.row.pair>figure{flex:1 1 0;min-width:300px}
.row.tables{gap:.2rem 2rem}
figure{margin:.2rem 0;flex:0 1 auto;max-width:100%}
figure.wide{flex-basis:100%}
figure img{display:block;max-width:100%;height:auto;background:#fff;border-radius:4px}
figcaption{font-size:.82rem;color:var(--muted)}
.table{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:.84rem;font-variant-numeric:tabular-nums;margin:.2rem 0 .5rem}
th,td{border-bottom:1px solid var(--line);padding:.2rem .5rem;text-align:left;vertical-align:top}
th{text-align:right}td.n{text-align:right}
th{background:var(--panel);font-weight:600}
td:first-child,th:first-child{text-align:left}
td.text,th.text{text-align:left}
td.n{white-space:nowrap}
td .ci{display:block;font-size:.78em;color:var(--muted);white-space:nowrap}
td.best .v{font-weight:700}
tr.group th{text-align:left;background:transparent;color:var(--muted);font-weight:600;padding-top:.5rem}
caption{text-align:left;font-weight:600;padding:.2rem 0}
details{margin:.2rem 0 .6rem}
summary{cursor:pointer;color:var(--link)}
.mark{display:inline-block;width:.75em;height:.75em;border-radius:50%;margin-right:.35em;background:var(--none)}
.holds .mark{background:var(--good)}
.does-not-hold .mark{background:var(--bad)}
.inconclusive .mark{background:var(--warn)}
td.verdict{white-space:nowrap;text-align:left}
.note{color:var(--muted);font-size:.88rem}
@media print{body{max-width:none;padding:0;font-size:10.5pt;color:#000;background:#fff}
nav.toc{display:none}a{color:inherit;text-decoration:none}.summary{background:#fff}
figure,table,.summary{break-inside:avoid}h2{break-after:avoid}figure{max-width:48%}
td .ci,.note,.facts,figcaption{color:#444}}
"""

# The page states on <body> how many of its figures decoded, so a headless browser's DOM dump (the
# tests of the page) can tell a broken image from a loaded one without any network; before
# printing, the collapsed rows open, so that the printout holds every row.
_SCRIPT = (
    "window.addEventListener('load',function(){var i=Array.from(document.images);"
    "document.body.dataset.figures=i.length;document.body.dataset.figuresLoaded="
    "i.filter(function(x){return x.complete&&x.naturalWidth>0}).length;});"
    "window.addEventListener('beforeprint',function(){document.querySelectorAll('details')"
    ".forEach(function(d){d.open=true});});"
)


class Markup(str):
    """HTML that a table or a section puts in as it is (any other ``str`` is escaped)."""


def _html(value: Any) -> str:
    return value if isinstance(value, Markup) else html.escape(str(value))


def _id(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


def metric_link(name: str, text: str | None = None) -> Markup:
    """Link a metric's name to its entry in the documentation's metric guide (:data:`DOCS_URL`).

    Parameters
    ----------
    name : str
        The metric as the reports name it (``"ece"``, ``"cece"``, ``"brier_miscalibration"``, ...).
    text : str, optional
        The link's text (default: ``name``).

    Returns
    -------
    Markup
        ``<a>`` to ``DOCS_URL + "guide/choosing_a_metric.html#<anchor>"``; the text alone (escaped)
        for a name the guide has no entry for.
    """
    anchor = METRIC_ANCHORS.get(str(name).lower())
    label = html.escape(name if text is None else text)
    if anchor is None:
        return Markup(label)
    return Markup(f'<a class="metric" href="{DOCS_URL}{METRIC_GUIDE}#{anchor}">{label}</a>')


def number(
    value: Any, interval: Sequence[float] | None = None, *, digits: int = 4, missing: str = "–", extra: str = ""
) -> Markup:
    """Format a number for an HTML table: the value, and its interval on one line below it, smaller.

    Parameters
    ----------
    value : float, int or None
        A count is written as it is, a float with ``digits`` decimals, None or NaN as ``missing``.
    interval : (float, float), optional
        Written below the value as ``[low, high]`` unless an end is NaN.
    digits : int, default=4
    missing : str, default="–"
    extra : str, default=""
        Text after the value (a mark such as ``▲``).

    Returns
    -------
    Markup
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return Markup(f'<span class="v">{html.escape(missing)}</span>')
    if isinstance(value, (int,)) and not isinstance(value, bool):
        text = f"{value:,}"
    else:
        text = f"{float(value):.{digits}f}"
    out = f'<span class="v">{text}{html.escape(extra)}</span>'
    if interval is not None and not any(end is None or math.isnan(float(end)) for end in interval):
        out += f'<span class="ci">[{float(interval[0]):.{digits}f}, {float(interval[1]):.{digits}f}]</span>'
    return Markup(out)


def _row(cells: Sequence[Any], classes: Sequence[str] | None) -> str:
    out = []
    for j, value in enumerate(cells):
        kind = classes[j] if classes and j < len(classes) and classes[j] else ""
        if isinstance(value, tuple):  # (content, class): a cell of its own class (the best of a column)
            value, own = value
            kind = f"{kind} {own}".strip()
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if numeric or (isinstance(value, Markup) and 'class="v"' in value):
            kind = f"n {kind}".strip()
        out.append(f'<td class="{kind}">{_html(value)}</td>' if kind else f"<td>{_html(value)}</td>")
    return "<tr>" + "".join(out) + "</tr>"


def html_table(
    head: Sequence[Any],
    rows: Iterable[Sequence[Any] | Markup],
    *,
    classes: Sequence[str] | None = None,
    caption: str | None = None,
    table_id: str | None = None,
) -> str:
    """Render an HTML table; a ``str`` cell is escaped, a :class:`Markup` cell goes in as it is.

    Parameters
    ----------
    head : sequence of str or Markup
        The column titles.
    rows : iterable
        Each a sequence of cells (a cell may be ``(content, css_class)``, e.g. ``(number(x), BEST)``),
        or a :class:`Markup` row written as it is (a group's heading row).
    classes : sequence of str, optional
        A CSS class per column (``"text"`` for left-aligned text).
    caption : str, optional
    table_id : str, optional

    Returns
    -------
    str
        The table in a ``div.table`` (which scrolls alone should it ever be wider than the page).
    """
    heads = "".join(
        f'<th class="{classes[j]}">{_html(h)}</th>'
        if classes and j < len(classes) and classes[j]
        else f"<th>{_html(h)}</th>"
        for j, h in enumerate(head)
    )
    body = "".join(row if isinstance(row, Markup) else _row(row, classes) for row in rows)
    ident = f' id="{html.escape(table_id)}"' if table_id else ""
    title = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f'<div class="table"><table{ident}>{title}<thead><tr>{heads}</tr></thead><tbody>{body}</tbody></table></div>'


def group_row(title: str, columns: int) -> Markup:
    """Return a heading row spanning ``columns`` columns (a metric family in a table of metrics).

    Parameters
    ----------
    title : str
    columns : int

    Returns
    -------
    Markup
    """
    return Markup(f'<tr class="group"><th colspan="{columns}">{html.escape(title)}</th></tr>')


def collapsed_table(
    head: Sequence[Any], rows: Sequence[Sequence[Any]], *, keep: int = 20, what: str = "rows", **kwargs: Any
) -> str:
    """Render the first ``keep`` rows as a table and the rest in a collapsed ``<details>`` below it.

    Parameters
    ----------
    head, rows
        As :func:`html_table`; ``rows`` in the order to show (the largest classes first).
    keep : int, default=20
        Rows shown before the fold.
    what : str, default="rows"
        What a row is, for the fold's label (``"classes"``).
    **kwargs
        Passed to :func:`html_table`.

    Returns
    -------
    str
    """
    rows = list(rows)
    shown = html_table(head, rows[:keep], **kwargs)
    if len(rows) <= keep:
        return shown
    rest = html_table(head, rows[keep:], **{k: v for k, v in kwargs.items() if k != "table_id"})
    return f"{shown}<details><summary>{len(rows) - keep:,} more {html.escape(what)}</summary>{rest}</details>"


def verdict_table(claims: Sequence[dict[str, Any]], *, table_id: str | None = "verdicts") -> str:
    """Render verdicts as a table: a coloured mark and the verdict, the claim, its source, the numbers.

    Parameters
    ----------
    claims : sequence of dict
        Each with ``verdict`` and ``claim``; optional ``paper`` and ``numbers`` (as
        ``calibkit.verdicts.claims.verdicts`` returns them).
    table_id : str or None, default="verdicts"

    Returns
    -------
    str
        Green for "holds", red for "does not hold", amber for "inconclusive", grey otherwise.
    """
    papers = any(c.get("paper") for c in claims)
    head = ["verdict", "claim", *(["source"] if papers else []), "the numbers behind it"]
    rows = []
    for c in claims:
        kind = _VERDICT_CLASS.get(c["verdict"], "untested")
        mark = Markup(f'<span class="mark" aria-hidden="true"></span>{html.escape(c["verdict"])}')
        row = [
            (mark, kind),
            c["claim"],
            *([c.get("paper") or ""] if papers else []),
            c.get("numbers") or "",
        ]
        rows.append(row)
    return html_table(head, rows, classes=["verdict", "text", "text", "text"], table_id=table_id)


def direction(esce: float, interval: Sequence[float] | None = None, *, ece: float | None = None) -> str:
    """Name the direction of the miscalibration from ESCE's sign (< 0: over-confident).

    Parameters
    ----------
    esce : float
        The signed ESCE (:func:`calibkit.esce`).
    interval : (float, float), optional
        Its interval: a direction is named only when the interval excludes 0 (and ESCE is not 0
        to round-off, 1e-12).
    ece : float, optional
        The ECE: where ``|ESCE|`` equals it, every bin leans the same way
        (``calibkit.metrics.registry.leans_one_way``), and a named direction says so ("in every bin").

    Returns
    -------
    str
        "Over-confident", "Under-confident" (each with " in every bin" where every bin leans that
        way), "Neither over- nor under-confident on average", or "Calibration" when ESCE is not known.
    """
    if esce is None or math.isnan(esce):
        return "Calibration"
    low, high = interval if interval is not None and not any(math.isnan(e) for e in interval) else (esce, esce)
    every = " in every bin" if ece is not None and leans_one_way({"ece": ece, "esce": esce}) else ""
    if high < -1e-12:  # 0 to round-off (a confidence equal to the accuracy) names no direction
        return "Over-confident" + every
    if low > 1e-12:
        return "Under-confident" + every
    return "Neither over- nor under-confident on average"


def answer_line(
    esce: float, ece: float, *, esce_interval: Any = None, ece_interval: Any = None, then: str = ""
) -> Markup:
    """Write a page's one-sentence answer: the direction (bold), ECE with its interval, then the rest.

    Parameters
    ----------
    esce, ece : float
        The signed ESCE (for the direction) and the ECE.
    esce_interval, ece_interval : (float, float), optional
    then : str, default=""
        What follows the ECE (", worst task 'x' (0.21); ..."), computed by the report from its numbers.

    Returns
    -------
    Markup
    """
    text = f"ECE {ece:.3f}"
    if ece_interval is not None and not any(math.isnan(e) for e in ece_interval):
        text += f" [{ece_interval[0]:.3f}, {ece_interval[1]:.3f}]"
    head = html.escape(direction(esce, esce_interval, ece=ece))
    return Markup(f"<b>{head}</b>: {html.escape(text + then, quote=False)}.")


def _csv_link(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    kind = "text/csv" if path.suffix == ".csv" else "application/json"
    return (
        f'<a download="{html.escape(path.name)}" href="data:{kind};base64,{data}">numbers behind it '
        f"({html.escape(path.name)})</a>"
    )


def figure(path: str | Path, alt: str, caption: str = "", *, data: str | Path | None = None, wide: bool = False) -> str:
    """Return a ``<figure>``: the PNG at ``path`` as a data URI, its alt text, caption and numbers.

    Parameters
    ----------
    path : str or Path
        A PNG file (written beside the page; the page holds a copy).
    alt : str
        What the figure shows, for a reader who cannot see it.
    caption : str, default=""
        Shown below it (the file's name is added).
    data : str or Path, optional
        A CSV or JSON file of the numbers the figure draws (its per-bin numbers): linked below it,
        embedded too, so that the page alone carries them.
    wide : bool, default=False
        Let the figure take the page's width (a grid of panels).

    Returns
    -------
    str
    """
    path = Path(path)
    image = base64.b64encode(path.read_bytes()).decode("ascii")
    parts = [html.escape(caption)] if caption else []
    parts.append(html.escape(path.name))
    if data is not None:
        parts.append(_csv_link(Path(data)))
    kind = ' class="wide"' if wide else ""
    return (
        f'<figure{kind}><img alt="{html.escape(alt)}" src="data:image/png;base64,{image}">'
        f"<figcaption>{' · '.join(parts)}</figcaption></figure>"
    )


def side_by_side(*blocks: str, kind: str = "") -> str:
    """Put blocks (a table and the figure it illustrates) in one row that wraps on a narrow page.

    Parameters
    ----------
    *blocks : str
        HTML blocks; empty ones are dropped.
    kind : {"", "pair", "tables"}, default=""
        ``"pair"``: figures that share the row equally (the binned and the smooth diagram), each
        shrunk to fit; ``"tables"``: small tables side by side.

    Returns
    -------
    str
    """
    kept = [b if b.startswith(("<figure", "<div")) else f"<div>{b}</div>" for b in blocks if b]
    classes = f"row {kind}".strip()
    return f'<div class="{classes}">{"".join(kept)}</div>' if kept else ""


@dataclass
class Section:
    """One section of a report page: a heading the table of contents links to, a note, its blocks.

    Parameters
    ----------
    title : str
        The heading (and the entry in the table of contents).
    blocks : list of str
        HTML blocks, in order (tables, figures, :func:`side_by_side` rows); empty ones are dropped,
        and a section left with none is not on the page.
    note : str, default=""
        A sentence under the heading (plain text; escaped).
    ident : str, optional
        The anchor (default: from the title).
    """

    title: str
    blocks: list[str] = field(default_factory=list)
    note: str = ""
    ident: str | None = None

    def html(self) -> str:
        """Render the section (empty when it has no block).

        Returns
        -------
        str
        """
        blocks = [b for b in self.blocks if b and b.strip()]
        if not blocks:
            return ""
        note = f'<p class="note">{html.escape(self.note)}</p>' if self.note else ""
        ident = self.ident or _id(self.title)
        return f'<section id="{ident}"><h2>{html.escape(self.title)}</h2>{note}{"".join(blocks)}</section>'


def summary(answer: str | Markup, facts: Sequence[str] = (), headline: Sequence[tuple[str, Any, Any]] = ()) -> str:
    """Render the page's summary: the one-sentence answer, what was evaluated, the headline numbers.

    Parameters
    ----------
    answer : str or Markup
        One sentence computed from the report's numbers ("over-confident: ECE 0.146 [0.139, 0.152],
        ..."); a :class:`Markup` may bold its first words.
    facts : sequence of str
        What was evaluated and on how many rows (short phrases, joined with " · ").
    headline : sequence of (metric, value, interval or None[, text])
        The headline numbers; each metric's name (or ``text``) links to its guide entry.

    Returns
    -------
    str
    """
    items = "".join(
        f'<li><span class="k">{metric_link(entry[0], *entry[3:4])}</span>{number(entry[1], entry[2])}</li>'
        for entry in headline
    )
    facts_line = f'<p class="facts">{" · ".join(html.escape(f) for f in facts)}</p>' if facts else ""
    numbers = f'<ul class="headline">{items}</ul>' if items else ""
    return f'<section id="summary" class="summary"><p class="answer">{_html(answer)}</p>{facts_line}{numbers}</section>'


def report_page(title: str, head: str, sections: Sequence[Section], *, files: Sequence[str | Path] = ()) -> str:
    """Assemble a report page: the title, the summary, the table of contents and the sections.

    Parameters
    ----------
    title : str
        The page's title and heading.
    head : str
        The summary (:func:`summary`), first on the page.
    sections : sequence of Section
        In order; those without content are left out, of the page and of the table of contents.
    files : sequence of str or Path, optional
        Files written beside the page (tables, JSON), listed in a last section by name, each
        linked relatively.

    Returns
    -------
    str
        One self-contained HTML document (images inlined; no network).
    """
    sections = list(sections)
    if files:
        links = " · ".join(f'<a href="{html.escape(Path(f).name)}">{html.escape(Path(f).name)}</a>' for f in files)
        sections.append(Section("Files", [f"<p>{links}</p>"], "Written beside this page.", ident="files"))
    rendered = [(s, s.html()) for s in sections]
    rendered = [(s, text) for s, text in rendered if text]
    toc = "".join(f'<li><a href="#{s.ident or _id(s.title)}">{html.escape(s.title)}</a></li>' for s, _ in rendered)
    nav = f'<nav class="toc" aria-label="sections"><ol>{toc}</ol></nav>' if toc else ""
    return _document(
        title,
        f"<header><h1>{html.escape(title)}</h1>{head}{nav}</header><main>{''.join(t for _, t in rendered)}</main>",
    )


def _document(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width,initial-scale=1"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style><script>{_SCRIPT}</script></head><body>{body}</body></html>\n"
    )


def html_page(title: str, sections: list[str]) -> str:
    """Wrap HTML sections in one self-contained page (no network), with the reports' style and figure check.

    The older helper, for a page of sections in document order; a report's page is built with
    :func:`report_page`.

    Parameters
    ----------
    title : str
    sections : list of str
        HTML fragments, in order.

    Returns
    -------
    str
    """
    return _document(title, f"<h1>{html.escape(title)}</h1>{''.join(sections)}")


def markdown_to_html_table(markdown: str) -> str:
    """Convert a pipe table to an HTML table; ``**x**`` becomes bold, a metric's name a link to its guide entry.

    The table as :func:`calibkit.plots.tables.markdown_table` writes it; numbers right-aligned.

    Parameters
    ----------
    markdown : str
        A Markdown pipe table.

    Returns
    -------
    str
    """
    rows = [line.strip().strip("|").split(" | ") for line in markdown.splitlines() if line.startswith("|")]
    if len(rows) < 2:
        return ""

    def cell(text: str, tag: str) -> str:
        text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", html.escape(text.strip()))
        numeric = tag == "td" and re.fullmatch(r"(<b>)?([-+]?[\d.,]+%?)( \[.*\])?(</b>)?([ ▲▼†]*)", text)
        if numeric and numeric.group(3):  # an interval: on a line of its own below the value, as number() writes it
            bold, value, interval, end, marks = (g or "" for g in numeric.groups())
            text = f'<span class="v">{bold}{value}{end}{marks}</span><span class="ci">{interval.strip()}</span>'
        if numeric:
            return f'<{tag} class="n">{text}</{tag}>'
        return f"<{tag}>{text.replace('_', '_<wbr>')}</{tag}>"  # a long task name may break at "_"

    def title(text: str) -> str:  # a metric's name links to its guide entry; a long name may break at "_"
        name = html.escape(text.strip())
        broken = name.replace("_", "_<wbr>")
        link = metric_link(text.strip())
        return f"<th>{broken if link == name else link.replace(f'>{name}<', f'>{broken}<')}</th>"

    head = "".join(title(c) for c in rows[0])
    body = "".join("<tr>" + "".join(cell(c, "td") for c in row) + "</tr>" for row in rows[2:])
    return f'<div class="table"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def markdown_to_html(text: str) -> list[str]:
    """Convert Markdown as the reports write it (paragraphs, ``- `` items, pipe tables) to HTML sections.

    Parameters
    ----------
    text : str
        Blocks separated by blank lines; in a block, the lines starting with ``|`` are a table
        and the other non-blank lines one paragraph (``- `` and ``**`` dropped), before it.

    Returns
    -------
    list of str
        The sections, in order.
    """
    sections = []
    for block in text.split("\n\n"):
        rows = [line for line in block.splitlines() if line.startswith("|")]
        lines = [line for line in block.splitlines() if line.strip() and line not in rows]
        words = [html.escape(line.lstrip("- ").replace("**", "")) for line in lines]
        sections += [f"<p>{'<br>'.join(words)}</p>"] if words else []
        sections += [markdown_to_html_table("\n".join(rows))] if rows else []
    return sections


def embedded_figure(path: Path) -> str:
    """Return a ``<figure>`` holding the PNG at ``path`` as a data URI, captioned with its file name.

    Parameters
    ----------
    path : Path

    Returns
    -------
    str
    """
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return (
        f'<figure><img alt="{html.escape(Path(path).stem)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{html.escape(Path(path).name)}</figcaption></figure>"
    )
