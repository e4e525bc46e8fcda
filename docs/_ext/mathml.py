"""Render the docs' maths as MathML at build time (latex2mathml): no MathJax, no network.

Browsers render MathML Core natively (Chromium since 109, Firefox, Safari), so the built site
shows its formulas offline, which a MathJax page loaded from a CDN would not.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from latex2mathml.converter import convert
from sphinx.util.math import get_node_equation_number


def _mathml(latex: str, display: str) -> str:
    # latex2mathml raises on what it cannot read: the build fails and names the formula.
    try:
        return convert(latex.strip(), display=display)
    except Exception as exc:  # noqa: BLE001 - any parser error becomes a build error with the formula
        raise ValueError(f"latex2mathml cannot convert {latex!r}: {exc}") from exc


def visit_math(self: Any, node: nodes.math) -> None:
    self.body.append(self.starttag(node, "span", "", CLASS="math"))
    self.body.append(_mathml(node.astext(), "inline") + "</span>")
    raise nodes.SkipNode


def visit_displaymath(self: Any, node: nodes.math_block) -> None:
    self.body.append(self.starttag(node, "div", CLASS="math"))
    if node["number"]:
        self.body.append(f'<span class="eqno">({get_node_equation_number(self, node)})</span>')
    for part in (p for p in node.astext().split("\n\n") if p.strip()):
        self.body.append(_mathml(part, "block"))
    self.body.append("</div>\n")
    raise nodes.SkipNode


def setup(app: Any) -> dict[str, Any]:
    app.add_html_math_renderer("mathml", (visit_math, None), (visit_displaymath, None))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
