"""`index.html` of `calibkit report --model ... --output` in a real headless Chromium (slow: needs
the system's chromium, which .ci/run installs): every figure decodes, the tables and verdicts are there."""

import pytest

from calibkit.cli import main
from tests.browser import chromium, figures_loaded, rendered_dom
from tests.test_cli_report import save_tiny


@pytest.mark.slow
@pytest.mark.parametrize("task", ["sequence", "token"])
def test_model_report_page_renders_in_chromium(tmp_path, capsys, task):
    if chromium() is None:
        pytest.fail("no chromium: .ci/run installs Debian's chromium before the slow tests")
    model, data = save_tiny(tmp_path, task)
    out = tmp_path / "out"
    argv = ["compare", "--model", model, "--dataset", data, "--task", task, "--theta", "5", "--resplits", "5"]
    assert main([*map(str, argv), "--output", str(out)]) == 0
    dom = rendered_dom(out / "index.html")
    total, loaded = figures_loaded(dom)
    assert total == loaded == 5  # with the smooth reliability diagram
    assert dom.count("<table>") == 4  # re-splits, one split, per class, conformal sets
    assert 'id="verdicts"' in dom or "id='verdicts'" in dom
    assert "WTS gives a lower CECE than TS" in dom
