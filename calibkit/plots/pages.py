"""One self-contained HTML page (no network): the page, its sections from Markdown, its figures.

:func:`html_page` wraps sections in a page with its style and a check of its figures;
:func:`markdown_to_html` and :func:`markdown_to_html_table` turn the Markdown the reports print
(paragraphs, items, pipe tables from :func:`calibkit.plots.tables.markdown_table`) into sections;
:func:`embedded_figure` puts a PNG in the page as a data URI. The comparison's page
(:func:`calibkit.verdicts.reporting.html_report`), the command line's, the language-model reports'
and the demos' pages are all built with them.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

__all__ = ["embedded_figure", "html_page", "markdown_to_html", "markdown_to_html_table"]


def html_page(title: str, sections: list[str]) -> str:
    """Wrap HTML sections in one self-contained page (no network), with its style and figure check.

    Parameters
    ----------
    title : str
    sections : list of str
        HTML fragments, in order.

    Returns
    -------
    str
    """
    style = (
        "body{font-family:sans-serif;margin:2em;max-width:110em}table{border-collapse:collapse;font-size:0.8em}"
        "td,th{border:1px solid #ccc;padding:0.2em 0.5em;text-align:right}td:first-child,th:first-child"
        "{text-align:left}img{max-width:100%}li.holds b{color:#1a7f37}li.does-not-hold b{color:#b42318}"
        "li.inconclusive b{color:#8a6d00}figure{margin:1em 0}"
    )
    # The page states on <body> how many of its figures decoded, so a headless browser's DOM dump
    # (the test of this page) can tell a broken image from a loaded one without any network.
    check = (
        "<script>window.addEventListener('load',function(){var i=Array.from(document.images);"
        "document.body.dataset.figures=i.length;document.body.dataset.figuresLoaded="
        "i.filter(function(x){return x.complete&&x.naturalWidth>0}).length;});</script>"
    )
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{style}</style>{check}</head><body><h1>{html.escape(title)}</h1>{''.join(sections)}</body></html>\n"
    )


def markdown_to_html_table(markdown: str) -> str:
    """Convert a pipe table to an HTML table; ``**x**`` becomes bold.

    The table as :func:`calibkit.plots.tables.markdown_table` writes it.

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
        return f"<{tag}>{text}</{tag}>"

    head = "".join(cell(c, "th") for c in rows[0])
    body = "".join("<tr>" + "".join(cell(c, "td") for c in row) + "</tr>" for row in rows[2:])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


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
