"""``fce(..., variant="authors")``: the fuzzy-binning authors' FCE, through every door (issue 19).

The published numbers themselves are checked in ``tests/papers/test_fuzzy_binning.py``; here the
variant is checked against a loop-for-loop transcription of the authors' code
(``tests/metrics/reference.py::fce_authors``) on random data of every input kind, and the
option is checked to reach the report, the accumulator, the bootstrap and the validation.
"""

import numpy as np
import pytest

import calibkit
from calibkit.metrics import CalibrationAccumulator
from calibkit.metrics.bootstrap import bootstrap_intervals
from tests.conftest import make_data
from tests.metrics import reference as ref
from tests.metrics.test_reference import CASES, close

P = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0.5, 0.25, 0.25]])
Y = np.array([0, 1, 2, 1])


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("kind,n,k,from_logits,n_bins", CASES)
def test_fce_authors_matches_transcription_of_their_code(seed, kind, n, k, from_logits, n_bins):
    probs, labels = make_data(seed, kind, n, k, from_logits)
    rows, binary = ref.rows_of(probs, labels, from_logits=from_logits)
    pairs = ref.top_pairs(rows, binary)
    got = calibkit.fce(probs, labels, fce_bins=n_bins, from_logits=from_logits, fce_variant="authors")
    assert close(got, ref.fce_authors(pairs, n_bins), tol=1e-12)
    report = calibkit.calibration_report(
        probs, labels, metrics=["fce"], fce_bins=n_bins, from_logits=from_logits, fce_variant="authors"
    )
    assert report["fce"] == got


@pytest.mark.parametrize("step", [4000, 8000])
def test_fce_authors_rounds_memberships_as_python_round_on_a_decimal_grid(step):
    """Confidences k / step: many memberships such as 0.5825 (a little above, in binary) land on a
    rounding tie once multiplied by 1000; their ``round(mu, 3)`` decides on the exact value, and
    their corners differ from the paper formula's in the last bits. Every rounded membership must
    be theirs: the per-bin sums match the transcription of their code, not just the FCE."""
    conf = np.arange(step // 4, step + 1) / step
    probs = np.column_stack([conf, *[(1 - conf) / 3] * 3])
    labels = np.where(np.random.default_rng(step).random(len(conf)) < conf, 0, 1)
    pairs = ref.top_pairs(*ref.rows_of(probs, labels))
    for m in (3, 7, 10, 15):
        sums = CalibrationAccumulator(["fce"], fce_bins=m).update(probs, labels).statistics.fuzzy
        theirs = [[round(ref.authors_membership(c, b, m), 3) for b in range(m)] for c, _ in pairs]
        np.testing.assert_allclose(sums[:, 3], np.sum(theirs, axis=0), rtol=1e-14, atol=0)
        got = calibkit.fce(probs, labels, fce_bins=m, fce_variant="authors")
        assert close(got, ref.fce_authors(pairs, m), tol=1e-12), m


def test_fce_default_is_the_paper_formula():
    probs, labels = make_data(4, "multiclass", 300, 4)
    pairs = ref.top_pairs(*ref.rows_of(probs, labels))
    assert calibkit.fce(probs, labels) == calibkit.fce(probs, labels, fce_variant="paper")
    assert close(calibkit.fce(probs, labels), ref.fce(pairs, 15), tol=1e-12)
    assert calibkit.calibration_report(probs, labels, metrics="fce")["fce"] == calibkit.fce(probs, labels)
    # the two differ: the authors' confidence term counts the correct predictions only
    assert abs(calibkit.fce(probs, labels, fce_variant="authors") - calibkit.fce(probs, labels)) > 0.01


def test_fce_authors_has_no_cancellation_within_a_bin():
    """With the confidence of the correct predictions only, ``A_m - C_m = sum mu a (1 - c) >= 0``:
    a perfectly calibrated model still gets about accuracy x mean(1 - c) (here 0.21, paper's 0)."""
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.full(4, 0.5), size=200_000)
    labels = (rng.random(len(probs))[:, None] > np.cumsum(probs, axis=1)).sum(axis=1).clip(max=3)
    paper = calibkit.fce(probs, labels)
    authors = calibkit.fce(probs, labels, fce_variant="authors")
    correct = probs.argmax(1) == labels
    assert paper < 0.005
    assert authors == pytest.approx(np.mean(correct * (1 - probs.max(1))), abs=0.005)


def test_fce_authors_streams_and_merges_like_the_one_shot():
    probs, labels = make_data(5, "multiclass", 1000, 5)
    whole = calibkit.fce(probs, labels, fce_bins=9, fce_variant="authors")
    a = CalibrationAccumulator(["fce"], fce_bins=9, fce_variant="authors").update(probs[:313], labels[:313])
    b = CalibrationAccumulator(["fce"], fce_bins=9, fce_variant="authors").update(probs[313:], labels[313:])
    assert a.merge(b).compute()["fce"] == pytest.approx(whole, abs=1e-14)
    paper = CalibrationAccumulator(["fce"], fce_bins=9).update(probs, labels)
    with pytest.raises(ValueError, match=r"different settings: \['fce_variant'\]"):
        paper.merge(b)


def test_fce_authors_bootstrap_interval():
    probs, labels = make_data(6, "multiclass", 2000, 4)
    point = calibkit.fce(probs, labels, fce_variant="authors")
    kw = {"metrics": ("fce",), "bootstrap": 200, "seed": 1}
    low, high = bootstrap_intervals(probs, labels, fce_variant="authors", **kw)["intervals"]["fce"]
    assert low < point < high
    paper_low, paper_high = bootstrap_intervals(probs, labels, **kw)["intervals"]["fce"]
    assert paper_low < calibkit.fce(probs, labels) < paper_high
    assert (low, high) != (paper_low, paper_high)


@pytest.mark.parametrize("value", ["Authors", "author", "", None, 1, ("paper",)])
def test_fce_variant_is_validated_naming_the_argument(value):
    for door in (
        lambda: calibkit.fce(P, Y, fce_variant=value),
        lambda: calibkit.calibration_report(P, Y, fce_variant=value),
        lambda: CalibrationAccumulator(fce_variant=value),
        lambda: bootstrap_intervals(P, Y, bootstrap=5, fce_variant=value),
    ):
        with pytest.raises(ValueError, match=r"`fce_variant` must be one of \['paper', 'authors'\]"):
            door()
