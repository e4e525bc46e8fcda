"""The built documentation site in a real headless Chromium, offline (slow: needs the built site
and the system's chromium, which .ci/run provides).

Served by a local HTTP server, as a reader's browser would get it: every page loads without a
script error or a missing resource, every internal link and anchor resolves, every image
decodes, and the search page finds ``cece``.
"""

import functools
import http.server
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.browser import chromium, render

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "docs" / "_build" / "html"
# Counted in the page itself once it has loaded (synchronously, so the DOM dump carries the counts).
IMAGE_CHECK = """<script>
window.addEventListener("load", () => {
  // "load" fires once every image has loaded or failed; a broken one has no natural size.
  const images = Array.from(document.images);
  document.body.dataset.images = images.length;
  document.body.dataset.imagesDecoded = images.filter((image) => image.complete && image.naturalWidth > 0).length;
});
</script>"""


class _Links(HTMLParser):
    """The hrefs/srcs and the ids (anchors) of one rendered page."""

    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if attrs.get(key):
                self.ids.add(attrs[key])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        if tag in ("img", "script") and attrs.get("src"):
            self.links.append(attrs["src"])
        if tag == "link" and attrs.get("href") and attrs.get("rel") in ("stylesheet", "preload"):
            self.links.append(attrs["href"])


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A copy of the built site with the image check in every page, on a local HTTP server."""
    if chromium() is None:
        pytest.fail("no chromium: .ci/run installs Debian's chromium before the slow tests")
    if not (SITE / "index.html").exists():  # built by .ci/run just before; build it when run alone
        command = [sys.executable, "-m", "sphinx", "-W", "-n", "--keep-going", "-q", "-b", "html", "docs", str(SITE)]
        subprocess.run(command, cwd=ROOT, check=True)
    copy = tmp_path_factory.mktemp("site") / "html"
    shutil.copytree(SITE, copy)
    for page in copy.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        page.write_text(text.replace("</body>", IMAGE_CHECK + "</body>", 1), encoding="utf-8")
    handler = functools.partial(_QuietHandler, directory=str(copy))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield copy, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_every_page_loads_links_resolve_images_decode(served):
    copy, base = served
    # _static holds the theme's assets (one is a Jinja macro file named .html), not pages.
    pages = sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*.html"))
    pages = [p for p in pages if not p.startswith(("_static/", "_sources/"))]
    assert len(pages) > 100  # guide, gallery, one page per public name
    rendered = {}
    problems = []
    with ThreadPoolExecutor(max_workers=2) as pool:  # one browser per core
        doms = dict(zip(pages, pool.map(lambda page: render(base + page), pages)))
    for page in pages:
        dom, log = doms[page]
        if "data-images=" not in dom:  # two browsers on a busy machine: give a slow page one more load, alone
            dom, log = doms[page] = render(base + page)
        errors = [line for line in log.splitlines() if "Uncaught" in line or "Failed to load resource" in line]
        problems += [f"{page}: {line}" for line in errors]
        found = re.search(r'data-images="(\d+)" data-images-decoded="(\d+)"', dom)
        if found is None:
            problems.append(f"{page}: the load handler did not run")
        elif found.group(1) != found.group(2):
            problems.append(f"{page}: {found.group(2)} of {found.group(1)} images decoded")
        parser = _Links()
        parser.feed(dom)
        rendered[page] = parser
    for page, parser in rendered.items():
        for link in parser.links:
            parts = urllib.parse.urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:")):
                continue  # external (the build is offline; none is followed)
            target = (Path(page).parent / urllib.parse.unquote(parts.path)).as_posix() if parts.path else page
            target = Path(target).as_posix()
            resolved = (copy / target).resolve()
            if resolved.is_dir():
                resolved = resolved / "index.html"
            if not resolved.exists():
                problems.append(f"{page}: link {link} -> missing {target}")
                continue
            if parts.fragment and resolved.suffix == ".html":
                key = resolved.relative_to(copy.resolve()).as_posix()
                if key in rendered and urllib.parse.unquote(parts.fragment) not in rendered[key].ids:
                    problems.append(f"{page}: anchor {link} not on {key}")
    assert not problems, "\n".join(problems[:40])


def test_search_finds_cece(served):
    _, base = served
    dom, log = render(base + "search.html?q=cece")
    assert "Uncaught" not in log, log[-2000:]
    results = re.findall(r'href="([^"]*calibkit\.cece\.html[^"]*)"', dom)
    assert results, "no search result links to calibkit.cece"
