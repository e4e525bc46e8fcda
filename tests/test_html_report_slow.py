"""Every kind of HTML report in a real headless Chromium at 1280 x 900, as a reader first sees it (slow:
needs the system's chromium, which .ci/run installs).

Each page: the summary and the first figure on the first screen, nothing wider than the window (no
horizontal scroll), every image decoded, no section without content, and the structure of
tests/test_pages.py's ``check_page``. The first screen of each is saved under
``build/page-screenshots/`` (a build artefact; docs/_static/report_first_screen.png is the
predictions file's, shown on the command-line guide page).
"""

from pathlib import Path

import numpy as np
import pytest

from calibkit.cli import main
from tests.browser import chromium, figures_loaded, measure, rendered_dom, screenshot
from tests.test_cli_report import save_tiny
from tests.test_pages import check_page

SCREENSHOTS = Path(__file__).resolve().parents[1] / "build" / "page-screenshots"
WIDTH, HEIGHT = 1280, 900


def seen_as_a_reader(page: Path, name: str) -> dict:
    """Check ``page`` as the module docstring says; save its first screen as ``name``.png."""
    if chromium() is None:
        pytest.fail("no chromium: .ci/run installs Debian's chromium before the slow tests")
    check_page(page.read_text(encoding="utf-8"))
    assert page.stat().st_size < 2_000_000, f"{name}: too large to mail"
    seen = measure(page, WIDTH, HEIGHT)
    screen = seen["innerHeight"]
    assert seen["scrollWidth"] <= WIDTH, f"{name}: the page scrolls sideways ({seen['scrollWidth']} px)"
    assert seen["summary"]["bottom"] <= screen, f"{name}: the summary is not on the first screen"
    first = seen["firstImage"]
    assert first is not None, f"{name}: no figure"
    visible = min(first["bottom"], screen) - first["top"]
    assert visible >= 0.5 * (first["bottom"] - first["top"]), f"{name}: the first figure is not on the first screen"
    assert seen["naturalWidths"] and all(w > 0 for w in seen["naturalWidths"]), f"{name}: an image did not decode"
    assert not seen["emptySections"], f"{name}: empty sections {seen['emptySections']}"
    screenshot(page, SCREENSHOTS / f"{name}.png", WIDTH, HEIGHT)
    return seen


@pytest.mark.slow
def test_the_page_of_a_predictions_file(tmp_path, capsys):
    from datasets import Dataset

    rng = np.random.default_rng(4)
    logits = rng.normal(size=(3000, 5)) * 3
    labels = (logits / 2 + rng.gumbel(size=logits.shape)).argmax(axis=1)  # over-confident logits
    path = tmp_path / "preds.parquet"
    Dataset.from_dict({"logits": logits.tolist(), "labels": labels}).to_parquet(path)
    out = tmp_path / "out"
    assert main(["report", "--predictions", str(path), "--bootstrap", "100", "--output", str(out)]) == 0
    page = out / "index.html"
    seen = seen_as_a_reader(page, "predictions_file")
    assert seen["firstImage"]["bottom"] <= seen["innerHeight"]  # the whole binned diagram on the first screen
    text = page.read_text()
    assert "Over-confident" in text and "calibrator" not in text.split("<nav")[0].lower()
    assert "Conformal" not in text


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
    assert 'id="verdicts"' in dom and "WTS gives a lower CECE than TS" in dom  # the verdicts, as a table
    assert 'id="resplit-table"' in dom and 'id="conformal"' in dom and 'id="classes"' in dom
    seen_as_a_reader(out / "index.html", f"model_{task}")


@pytest.mark.slow
def test_the_page_of_multiple_choice_logs(tmp_path, capsys):
    import json

    from tests.test_multiple_choice import tempered_questions

    data = tempered_questions(n=300)
    tasks = np.where(np.arange(300) % 2, "arc", "hellaswag")
    rows = [
        {"task": str(t), "choice_logprobs": [v * 2 for v in row if not np.isnan(v)], "gold": int(g)}  # sharpened
        for t, row, g in zip(tasks, data.loglik.tolist(), data.gold)
    ]
    file = tmp_path / "preds.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "o"
    assert main(["choices", "--predictions", str(file), "--calibrate", "--resplits", "4", "--output", str(out)]) == 0
    seen_as_a_reader(out / "index.html", "multiple_choice")
    assert "worst task '" in (out / "index.html").read_text()


@pytest.mark.slow
def test_the_page_of_generations(tmp_path, capsys):
    from tests.test_generations import answers, write_jsonl

    file = write_jsonl(tmp_path / "gen.jsonl", answers(300))
    out = tmp_path / "o"
    assert main(["generations", "--answers", str(file), "--resplits", "3", "--output", str(out)]) == 0
    seen_as_a_reader(out / "report.html", "generations")
    assert "best calibrated source, '" in (out / "report.html").read_text()


@pytest.mark.slow
def test_the_page_of_the_multilabel_demo(tmp_path):
    from calibkit.demos.multilabel import _page, claims, compare, write_figures
    from tests.test_demo_multilabel import over_confident

    (z_val, y_val), (z_test, y_test) = over_confident(1500, 0), over_confident(1500, 1)
    one_split, resplit = compare(z_val, y_val, z_test, y_test, resplits=8, seed=3)
    names = ["person", "place", "organisation", "product"]
    paths = write_figures(names, z_val, y_val, z_test, y_test, "ts", tmp_path)
    page = tmp_path / "index.html"
    page.write_text(_page("calibkit demo: multi-label", one_split, resplit, claims(resplit), paths, names))
    seen_as_a_reader(page, "multilabel")


@pytest.mark.slow
def test_the_page_of_the_llm_demo(tmp_path):
    from calibkit.demos.llm import run_llm_demo
    from tests.conftest import tiny_tokenizer
    from tests.test_demo_llm import sentences, tiny_causal_lm

    tokenizer = tiny_tokenizer(tmp_path)
    model = tiny_causal_lm(tokenizer, sentences(12, seed=1))
    run_llm_demo(tmp_path / "out", documents=12, tokens=10, resplits=4, model=model, tokenizer=tokenizer,
                 texts=sentences(12))  # fmt: skip
    seen = seen_as_a_reader(tmp_path / "out" / "report.html", "llm_demo")
    assert seen["firstImage"]["bottom"] <= seen["innerHeight"]


@pytest.mark.slow
def test_the_page_of_shards(tmp_path, capsys):
    rng = np.random.default_rng(5)
    logits = rng.normal(size=(3000, 5)) * 3
    labels = (logits / 2 + rng.gumbel(size=logits.shape)).argmax(axis=1)  # over-confident logits
    shards = tmp_path / "shards"
    shards.mkdir()
    for i in range(3):
        np.savez(shards / f"part-{i}.npz", logits=logits[i::3], labels=labels[i::3])
    out = tmp_path / "out"
    assert main(["report", "--predictions", str(shards), "--quiet", "--output", str(out)]) == 0
    seen = seen_as_a_reader(out / "index.html", "shards")
    assert seen["firstImage"]["bottom"] <= seen["innerHeight"]  # the whole diagram on the first screen
    assert "Over-confident" in (out / "index.html").read_text()


@pytest.mark.slow
def test_the_page_of_a_multilabel_head(tmp_path, capsys):
    rng = np.random.default_rng(6)
    z = rng.normal(size=(2000, 12)) * 2
    y = (rng.random(z.shape) < 1 / (1 + np.exp(-z / 3))).astype(np.float32)  # sharpened logits
    np.savez(tmp_path / "ml.npz", logits=z, labels=y)
    out = tmp_path / "out"
    argv = ["multilabel", "--predictions", str(tmp_path / "ml.npz"), "--bootstrap", "50", "--output", str(out)]
    assert main(argv) == 0
    seen_as_a_reader(out / "report.html", "multilabel_cli")
    assert "worst label " in (out / "report.html").read_text()
