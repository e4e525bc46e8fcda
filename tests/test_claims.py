"""The verdict machinery on claims whose truth is planted: one that must hold, one that must not,
one whose precondition fails, one with too few re-splits; and the measurements on synthetic
logits whose miscalibration is known by construction."""

import numpy as np
import pytest

from calibkit.verdicts.claims import CATALOGUE, MIN_COUNTED_BINS, verdicts, what_this_means
from calibkit.verdicts.resplits import resplit_comparison
from tests.test_resplits import fake


def planted(values, measurements=None, errors=None):
    """A Resplits of given columns (tests/test_resplits.py's), with measurements and planted failures."""
    errors = errors or {}
    return fake(
        values, measurements=measurements or {}, errors=errors, error_messages={m: "planted failure" for m in errors}
    )


def by_claim(resplits):
    return {c["claim"]: c for c in verdicts(resplits)}


def test_a_claim_that_must_hold_one_that_must_not_and_one_whose_precondition_fails():
    counted = {f"rbece_counted_bins:{m}": np.full(20, 3.0) for m in ("uncalibrated", "ts", "wts", "rd-ts")}
    out = by_claim(
        planted(
            {
                "uncalibrated": {"ece": [0.02] * 20, "nll": [0.3] * 20, "rbece": [0.1] * 20, "cece": [0.3] * 20},
                "ts": {"ece": [0.01] * 20, "cece": [0.2] * 20, "rbece": [0.05] * 20},
                "wts": {"ece": [0.05] * 20, "nll": [0.4] * 20, "cece": [0.1] * 20},
                "rd-ts": {"rbece": [0.01] * 20},
            },
            measurements=counted,
        )
    )
    assert out["WTS gives a lower CECE than TS"]["verdict"] == "holds"
    worse = out["WTS is better calibrated than the uncalibrated model on the overall metrics (ECE)"]
    assert worse["verdict"] == "does not hold" and worse["resplits"] == 20  # the paper's §5, failing here
    region = out["RD-TS gives a lower RBECE than TS"]
    assert region["verdict"] == "cannot be tested here" and "only 3 RBECE bin(s)" in region["numbers"]
    assert str(MIN_COUNTED_BINS) in region["numbers"]


def test_worst_class_and_a_claim_that_a_method_is_worse():
    r = 20
    per_class = {
        "uncalibrated": np.tile([0.05, 0.30], (r, 1)),
        "ts": np.tile([0.02, 0.20], (r, 1)),
        "wts": np.tile([0.08, 0.10], (r, 1)),  # a better worst class, a worse majority class
        "hb": np.tile([0.02, 0.02], (r, 1)),
    }
    values = {
        "uncalibrated": {"ece": [0.06] * r, "sce": [0.2] * r},
        "ts": {"ece": [0.03] * r},
        "wts": {"ece": [0.05] * r},
        "hb": {"ece": [0.01] * r, "sce": [0.1] * r},  # planted: HB better on ECE, against the paper
    }
    resplits = fake(values, per_class=per_class)
    out = by_claim(resplits)
    worst = out["WTS lowers the ECE of the worst-calibrated class against TS (at the majority classes' cost)"]
    assert worst["verdict"] == "holds"
    hidden = out["the worst-calibrated class's ECE is larger than the overall ECE (the overall figure hides it)"]
    assert hidden["verdict"] == "holds" and "0.3000" in hidden["numbers"]
    assert out["histogram binning has a higher ECE than the uncalibrated model"]["verdict"] == "does not hold"
    assert out["histogram binning gives a lower SCE than the uncalibrated model"]["verdict"] == "holds"
    meaning = what_this_means(resplits, verdicts(resplits))
    assert "for the worst-calibrated class, HB" in meaning or "for the worst-calibrated class, Histogram" in meaning


def test_too_few_resplits_with_a_value_cannot_decide():
    out = by_claim(
        planted(
            {"uncalibrated": {"cece": [0.3] * 3}, "ts": {"cece": [0.2] * 3}, "wts": {"cece": [0.1, np.nan, np.nan]}},
            errors={"wts": 2},
        )
    )
    claim = out["WTS gives a lower CECE than TS"]
    assert claim["verdict"] == "cannot be tested here"
    assert "values on only 1 of 3 re-splits" in claim["numbers"] and "planted failure" in claim["numbers"]


def test_every_catalogue_entry_gets_a_verdict_and_untestable_ones_say_why():
    out = verdicts(planted({"uncalibrated": {"ece": [0.1] * 20}}))
    assert [c["claim"] for c in out] == [c.claim for c in CATALOGUE]
    untestable = [c for c in out if c["verdict"] == "not testable with this data"]
    assert len(untestable) >= 3 and all(c["numbers"] for c in untestable)
    missing = next(c for c in out if c["claim"] == "WTS gives a lower CECE than TS")
    assert missing["verdict"] == "cannot be tested here" and "not compared" in missing["numbers"]


def over_confident(n, k, seed, temperature=2.5):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 3
    p = np.exp(z / temperature)
    p /= p.sum(1, keepdims=True)
    y = (p.cumsum(1) > rng.random((n, 1))).argmax(1)  # labels drawn from softmax(z / T): z is over-confident
    return z, y


def test_measurements_on_planted_over_confidence():
    z, y = over_confident(6000, 4, 0)
    rs = resplit_comparison(z[:3000], y[:3000], z[3000:], y[3000:], resplits=10, methods=("uncalibrated", "ts", "wts"))
    assert np.all(rs.measurements["ecd_sign"] == 1.0)  # sharpened: ECD > 0; flattened: ECD < 0
    assert np.all(rs.measurements["useless_but_calibrated"] == 1.0)  # the class-frequency predictor: ECE ~ 0
    assert np.isfinite(rs.measurements["ece_minus_fce_bin_sensitivity"]).all()
    assert np.all(rs.measurements["rbece_counted_bins:ts"] >= 1)
    out = by_claim(rs)
    assert out["ECD is positive for an over-confident model and negative for an under-confident one (the "
               "TS-calibrated logits sharpened by 2 and flattened by 2)"]["verdict"] == "holds"  # fmt: skip
    assert out["TS keeps the accuracy of the uncalibrated model"]["verdict"] == "holds"
    meaning = what_this_means(rs, verdicts(rs))
    assert meaning.startswith("For overall calibration pick ") and "worst-calibrated class" in meaning


def test_small_evaluation_parts_cannot_test_the_region_claims():
    z, y = over_confident(400, 3, 1)
    rs = resplit_comparison(z[:200], y[:200], z[200:], y[200:], resplits=5, methods=("uncalibrated", "ts", "rd-ts"))
    claim = by_claim(rs)["RD-TS gives a lower RBECE than TS"]
    assert claim["verdict"] == "cannot be tested here" and "RBECE bin(s)" in claim["numbers"]


@pytest.mark.parametrize("claim", [c for c in CATALOGUE if c.test != "untestable"], ids=lambda c: c.claim[:40])
def test_every_testable_claim_names_what_it_reads(claim):
    assert claim.method or claim.measurement
    assert claim.metric or claim.measurement or claim.test in ("keeps_accuracy", "worst_class")


def test_lowest_needs_another_method_and_no_rbece_means_no_region_pick():
    out = by_claim(fake({"rd-ts": {"rbece": [0.1] * 20, "ece": [0.1] * 20}}))
    assert out["RD-TS gives the lowest RBECE of all the calibrators compared"]["numbers"] == "no other method compared"
    resplits = fake({"uncalibrated": {"ece": [0.1] * 20}, "ts": {"ece": [0.05] * 20}})
    assert "no pick for the regions of certainty" in what_this_means(resplits, verdicts(resplits))


def test_a_tie_with_the_best_other_method_counts_as_lowest():
    """The rule, as the Claim docstring states it: RD-TS ties the best other method -> it shares the lowest."""
    name = "RD-TS gives the lowest RBECE of all the calibrators compared"
    tied = by_claim(fake({"rd-ts": {"rbece": [0.1] * 20}, "ts": {"rbece": [0.1] * 20}, "wts": {"rbece": [0.2] * 20}}))
    assert tied[name]["verdict"] == "holds" and tied[name]["numbers"].startswith("RD-TS has the lowest rbece in 100%")
    above = by_claim(fake({"rd-ts": {"rbece": [0.1 + 1e-12] * 20}, "ts": {"rbece": [0.1] * 20}}))
    assert above[name]["verdict"] == "does not hold"
