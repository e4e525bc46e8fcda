"""The saved head's table (modeling_calibkit_heads.HEADS) against the registry, and checkpoints of the old layout.

A calibrator is three things: its fitting class, its registry entry and its head class. These
tests fail when the three disagree (a method with no head, a head with no fitting class, an
affine fit whose head cannot be folded), and when a calibration block written by an older
calibkit no longer gives the logits it gave.
"""

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from calibkit.calibrators import MultiLabelIsotonic, MultiLabelScaling, make_calibrator
from calibkit.calibrators import registry as calibrator_registry
from calibkit.calibrators.modeling_calibkit import (
    AFFINE_METHODS,
    CAUSAL_LM_METHODS,
    HEADS,
    METHODS,
    CalibrationHead,
    model_card,
)
from calibkit.calibrators.multilabel import MULTILABEL_METHODS

OLD_LAYOUT = Path(__file__).parents[1] / "data" / "heads_4e32ce0.json"
MULTILABEL_HEADS = {"multilabel", "multilabel-ir"}
REWARD_HEADS = {"reward-ts"}  # a reward model's one output / T: fitted by PreferenceTemperature, not the registry


def fitted(method, k=3, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 2, (120, k))
    y = np.argmax(z + rng.gumbel(size=z.shape), axis=1)
    return make_calibrator(method).fit(z, y)


def test_every_registered_calibrator_has_a_head_and_every_head_a_calibrator():
    assert set(HEADS) == set(calibrator_registry.NAMES) | MULTILABEL_HEADS | REWARD_HEADS
    assert METHODS == tuple(HEADS)
    for name, head in HEADS.items():
        assert head.method == name
        assert head.title and head.formula, name


@pytest.mark.parametrize("entry", calibrator_registry.REGISTRY, ids=lambda e: e.name)
def test_the_fitting_class_writes_the_block_its_head_reads(entry):
    assert entry.cls.method == entry.name
    calibrator = fitted(entry.name)
    block = json.loads(json.dumps(calibrator.calibration_block()))  # as config.json holds it
    assert block["method"] == entry.name
    head = CalibrationHead(block, 3)
    z = torch.tensor(np.random.default_rng(1).normal(0, 2, (8, 3)))
    np.testing.assert_allclose(
        torch.softmax(head(z), -1).numpy(), calibrator.predict_proba(z.numpy()), rtol=1e-9, atol=1e-12
    )


@pytest.mark.parametrize("entry", calibrator_registry.REGISTRY, ids=lambda e: e.name)
def test_an_affine_fit_has_an_affine_head_whose_map_is_its_forward(entry):
    head = CalibrationHead(fitted(entry.name).calibration_block(), 3)
    affine = head.affine_map()
    assert (affine is not None) == entry.affine == (entry.name in AFFINE_METHODS)
    if affine is not None:
        z = torch.tensor(np.random.default_rng(2).normal(0, 2, (8, 3)))
        np.testing.assert_allclose((z @ affine[0].T + affine[1]).numpy(), head(z).numpy(), rtol=1e-12)


def test_the_multilabel_calibrators_and_their_heads():
    assert {e.mode for e in calibrator_registry.MULTILABEL} == {*MULTILABEL_METHODS, "isotonic"}
    rng = np.random.default_rng(3)
    z = rng.normal(0, 2, (100, 3))
    y = (rng.random(z.shape) < 1 / (1 + np.exp(-z))).astype(int)
    written = {MultiLabelScaling(mode).fit(z, y).calibration_block()["method"] for mode in MULTILABEL_METHODS}
    written.add(MultiLabelIsotonic().fit(z, y).calibration_block()["method"])
    assert written == MULTILABEL_HEADS
    assert "multilabel" in AFFINE_METHODS and "multilabel-ir" not in AFFINE_METHODS


def test_every_registered_calibrator_cites_its_paper():
    # the registry reads the paper from the head, which the model card cites too
    for entry in calibrator_registry.REGISTRY:
        assert re.fullmatch(r"[A-Z][\w-]+ (et al\.|& [A-Z][\w-]+) (19|20)\d\d", entry.paper), (entry.name, entry.paper)


def test_aliases_name_registered_methods_and_no_alias_is_a_method():
    assert calibrator_registry.ALIASES == {"temperature": "ts", "rdts": "rd-ts"}
    for alias, name in calibrator_registry.ALIASES.items():
        assert alias not in calibrator_registry.NAMES
        assert type(make_calibrator(alias.upper())) is calibrator_registry.entry(name).cls
    assert calibrator_registry.MULTILABEL_ALIASES == {
        "ts": "temperature",
        "wts": "weighted_temperature",
        "label_ts": "label_temperature",
        "ir": "isotonic",
    }


def test_a_causal_lm_takes_the_temperature_heads_only():
    assert CAUSAL_LM_METHODS == ("ts", "wts")


@pytest.mark.parametrize("method", METHODS)
def test_the_model_card_names_the_map_by_its_head(method):
    class Config:  # what model_card reads of a CalibratedConfig
        calibration = {"method": method}
        base_config = {"model_type": "bert"}
        task = "sequence-classification"

    head = HEADS[method]
    card = model_card(Config())
    assert head.title in card and f"`{head.formula}`" in card
    assert (f"({head.paper})" in card) == bool(head.paper)


def test_an_unknown_or_unhashable_method_is_refused():
    for method in ("platt", ["ts"], None):
        with pytest.raises(ValueError, match="unknown method"):
            CalibrationHead({"method": method}, 3)


def old_layout_cases():
    return json.loads(OLD_LAYOUT.read_text())["cases"]


@pytest.mark.parametrize("case", old_layout_cases(), ids=lambda c: f"{c['block']['method']}-{len(c['logits'][0])}")
def test_a_block_saved_by_4e32ce0_gives_the_logits_it_gave(case):
    # tests/data/heads_4e32ce0.json: blocks written by calibkit at 4e32ce0 (before the head table)
    # and what that commit's CalibrationHead returned for them, NaN rows included.
    k = len(case["logits"][0])
    head = CalibrationHead(case["block"], k)
    got = head(torch.tensor(case["logits"], dtype=torch.float64)).numpy()
    # To float64 round-off, not to the bit: the matrix heads' products go through the CPU's BLAS, whose
    # order of summation differs between processors (an Intel Xeon gives 1 ulp off an AMD EPYC's bits).
    np.testing.assert_allclose(got, np.array(case["calibrated"], dtype=np.float64), rtol=1e-15, atol=1e-15)


def test_every_method_of_the_old_layout_still_loads():
    assert {c["block"]["method"] for c in old_layout_cases()} <= set(METHODS)  # a head removed strands checkpoints
