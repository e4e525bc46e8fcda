"""Rows labelled ``ignore_index`` are never read: every calibrator, in every rule, fits the same
parameters with and without them, wherever they sit and whatever their logits hold."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibkit.calibrators import make_calibrator
from calibkit.calibrators.registry import NAMES
from calibkit.calibrators.temperature import RD_TS_RULES
from tests.calibrators.test_fitting import overconfident

CASES = [(name, {}) for name in NAMES if name != "rd-ts"] + [("rd-ts", {"rule": rule}) for rule in RD_TS_RULES]


def flat(block) -> list[float]:
    """Every number of a calibration block, in order (the fitted parameters)."""
    if isinstance(block, dict):
        return [v for key in sorted(block) for v in flat(block[key])]
    if isinstance(block, (list, tuple)):
        return [v for item in block for v in flat(item)]
    if isinstance(block, (bool, str)) or block is None:
        return []
    return [float(block)]


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{k.get('rule', '')}".rstrip("-") for n, k in CASES])
@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 1000), share=st.sampled_from([0.2, 0.4, 0.7]), pad=st.sampled_from([-100.0, 30.0, 0.0]))
def test_ignored_rows_change_no_fitted_parameter(name, kwargs, seed, share, pad):
    z, y = overconfident(seed=seed, n=3000, k=5, temperature=1.5)
    rng = np.random.default_rng(seed)
    extra = int(len(y) * share / (1 - share))
    at = np.sort(rng.choice(len(y) + extra, extra, replace=False))  # padding rows spread among the rest
    keep = np.ones(len(y) + extra, dtype=bool)
    keep[at] = False
    z_pad = np.empty((len(y) + extra, 5))
    z_pad[keep] = z
    z_pad[~keep] = pad if pad != 30.0 else rng.normal(size=(extra, 5)) * pad  # Trainer's -100, wild, flat
    y_pad = np.full(len(y) + extra, -100)
    y_pad[keep] = y
    plain = flat(make_calibrator(name, **kwargs).fit(z, y).calibration_block())
    padded = flat(make_calibrator(name, **kwargs).fit(z_pad, y_pad).calibration_block())
    assert len(plain) == len(padded) > 0
    np.testing.assert_allclose(padded, plain, rtol=1e-7, atol=1e-10)


def test_a_bad_label_is_named_with_its_position():
    z, y = overconfident(seed=1, n=40, k=4)
    y[17] = 4
    with pytest.raises(ValueError, match=r"got 4 at position 17$"):
        make_calibrator("ts").fit(z, y)
    with pytest.raises(ValueError, match=r"got 4 at position \(3, 2\)$"):
        make_calibrator("ts").fit(z.reshape(8, 5, 4), y.reshape(8, 5))
