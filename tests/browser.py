"""Render a page in a real headless Chromium (Debian's `chromium`) and return its DOM after load."""

import html
import json
import re
import shutil
import subprocess
from pathlib import Path


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def render(url: str) -> tuple[str, str]:
    """(DOM once loaded and its scripts run, the browser's console log) of ``url``, offline."""
    proc = subprocess.run(
        [
            chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000", "--dump-dom", url,
        ],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, proc.stderr


def rendered_dom(page: Path) -> str:
    """The DOM of the file ``page`` once loaded and its scripts run (``--dump-dom``), offline."""
    return render(page.resolve().as_uri())[0]


def figures_loaded(dom: str) -> tuple[int, int]:
    """(figures on the page, figures that decoded), as the page's own load handler counted them."""
    total = re.search(r'data-figures="(\d+)"', dom)
    loaded = re.search(r'data-figures-loaded="(\d+)"', dom)
    assert total and loaded, "the page's load handler did not run"
    return int(total.group(1)), int(loaded.group(1))


# What a reader sees at a window of a given size, measured by the browser once every image has
# loaded: how wide the document is, where the summary and the first figure are, whether each image
# decoded. Added to a copy of the page (the page itself stays as written).
_MEASURE = (
    "<script>window.addEventListener('load',function(){setTimeout(function(){"
    "var r=function(e){if(!e)return null;var b=e.getBoundingClientRect();return {top:b.top,bottom:b.bottom};};"
    "var imgs=Array.from(document.images);document.body.dataset.measured=JSON.stringify({"
    "scrollWidth:document.documentElement.scrollWidth,innerWidth:window.innerWidth,innerHeight:window.innerHeight,"
    "summary:r(document.getElementById('summary')),firstImage:r(imgs[0]),"
    "naturalWidths:imgs.map(function(i){return i.naturalWidth}),"
    "emptySections:Array.from(document.querySelectorAll('main section')).filter(function(s){"
    "return Array.from(s.children).filter(function(c){return c.tagName!=='H2'&&!c.classList.contains('note')"
    "&&c.getBoundingClientRect().height>0}).length===0}).map(function(s){return s.id})});},0);});</script>"
)


def measure(page: Path, width: int = 1280, height: int = 900) -> dict:
    """What a reader sees of ``page`` in a ``width`` x ``height`` window (see ``_MEASURE``), offline."""
    copy = page.with_name(page.stem + ".measured.html")
    copy.write_text(page.read_text(encoding="utf-8").replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
    try:
        proc = subprocess.run(
            [
                chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--hide-scrollbars", f"--window-size={width},{height}", "--virtual-time-budget=10000", "--dump-dom",
                copy.resolve().as_uri(),
            ],
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
    finally:
        copy.unlink()
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'data-measured="([^"]+)"', proc.stdout)
    assert found, "the measuring script did not run"
    return json.loads(html.unescape(found.group(1)))


def screenshot(page: Path, out: Path, width: int = 1280, height: int = 900) -> Path:
    """Save what a ``width`` x ``height`` window shows of ``page`` (its first screen) as the PNG ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [
            chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
            f"--window-size={width},{height}", "--virtual-time-budget=10000", f"--screenshot={out.resolve()}",
            page.resolve().as_uri(),
        ],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and out.exists(), proc.stderr[-2000:]
    return out
