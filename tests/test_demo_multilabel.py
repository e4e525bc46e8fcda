"""The multi-label demo's comparison, verdicts and figures on synthetic over-confident logits (fast);
the end-to-end run on the real MiniLM is in tests/test_demo_slow.py."""

import matplotlib.image
import numpy as np
import pytest

import calibkit
from calibkit.demos.multilabel import METHODS, METRICS, _page, claims, compare, resplit_table, write_figures
from tests.test_pages import check_page


def over_confident(n, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 4)) * 3 + np.array([-2.0, -1.0, 0.0, -3.0])  # types of different frequency
    y = (rng.random(z.shape) < 1 / (1 + np.exp(-z / 2.5))).astype(np.float32)  # true temperature 2.5
    return z, y


def test_compare_fits_every_method_and_scores_it_as_the_multilabel_report():
    (z_val, y_val), (z_test, y_test) = over_confident(1500, 0), over_confident(1500, 1)
    one_split, resplit = compare(z_val, y_val, z_test, y_test, resplits=8, seed=3)
    assert list(one_split) == list(METHODS) and resplit.metrics == list(METRICS)
    plain = calibkit.multilabel_report(1 / (1 + np.exp(-z_test)), y_test, metrics=["ece", "brier", "nll"])
    assert one_split["uncalibrated"]["ece"] == pytest.approx(plain["macro"]["ece"], rel=1e-12)
    assert one_split["uncalibrated"]["ece_micro"] == pytest.approx(plain["micro"]["ece"], rel=1e-12)
    assert one_split["uncalibrated"]["cece"] == pytest.approx(plain["cece"], rel=1e-12)
    from calibkit.calibrators import MultiLabelScaling

    ts = MultiLabelScaling("temperature").fit(z_val, y_val)
    fitted = calibkit.multilabel_report(ts.predict_proba(z_test), y_test, metrics=["nll"])
    assert one_split["ts"]["nll"] == pytest.approx(fitted["macro"]["nll"], rel=1e-12)
    assert resplit.summary("ts", "ece")["n"] == 8 and resplit.per_class["ts"].shape == (8, 4)
    verdicts = {c["claim"]: c["verdict"] for c in claims(resplit)}
    assert verdicts["TS lowers the macro ECE of the fine-tuned model"] == "holds"  # T = 2.5 was planted
    assert set(verdicts.values()) <= {"holds", "does not hold", "inconclusive", "not tested"}
    assert resplit_table(resplit).count("\n| ") == len(METRICS)


def test_a_method_that_cannot_fit_is_reported_not_tested(tmp_path):
    (z_val, y_val), (z_test, y_test) = over_confident(600, 2), over_confident(600, 3)
    y_val[:, 1], y_test[:, 1] = (z_val[:, 1] < -1), (z_test[:, 1] < -1)  # type 1: its logits rank it backwards
    one_split, resplit = compare(z_val, y_val, z_test, y_test, resplits=3)
    assert "positive scale for label 1" in one_split["platt"]["error"]
    verdicts = {c["claim"]: c for c in claims(resplit)}
    assert verdicts["a temperature per type gives a lower macro ECE than one"]["verdict"] == "not tested"
    paths = write_figures(["a", "b", "c", "d"], z_val, y_val, z_test, y_test, "ts", tmp_path)
    for path in paths.values():
        image = matplotlib.image.imread(path)
        assert image[..., :3].std() > 0.05
    page = _page("title", one_split, resplit, claims(resplit), paths)
    assert page.count("data:image/png;base64,") == 2 and '<td class="verdict untested">' in page
    check_page(page)  # the one page design: the answer first, nothing empty, nothing fetched
