"""Render a page in a real headless Chromium (Debian's `chromium`) and return its DOM after load."""

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
