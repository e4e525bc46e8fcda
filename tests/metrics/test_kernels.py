"""The vectorised exp and log of the kernels are as accurate as libm (1 ulp), so swapping them
in for math.exp/math.log costs no exactness."""

import numpy as np

from calibkit.metrics import _kernels as K


def ulps(got, expected):
    return np.abs(got - expected) / np.spacing(np.abs(expected))


def test_exp_is_within_one_ulp_and_flushes_only_below_the_threshold():
    rng = np.random.default_rng(0)
    x = np.concatenate([-rng.uniform(0, s, 2_000_000) for s in (1e-6, 1, 30, 700)])
    x = np.concatenate([x, [0.0, -0.0, -1e-300, K._EXP_MIN, -0.5 * np.log(2)]])
    out = np.empty_like(x)
    K._exp_into(x, out, x.size)
    assert ulps(out, np.exp(x)).max() <= 1.0
    far = np.array([K._EXP_MIN - 1e-9, -745.0, -1e4, -1e308])
    K._exp_into(far, out, far.size)
    assert np.all(out[: far.size] == 0.0)


def test_log_is_within_one_ulp_including_subnormals_and_the_floor():
    rng = np.random.default_rng(1)
    x = np.concatenate(
        [
            rng.uniform(0, 1, 2_000_000),
            np.exp(-rng.uniform(0, 700, 2_000_000)),
            np.exp(-rng.uniform(0, 1e-6, 1_000_000)),  # near 1: log(1 + f) must not cancel
            [1.0, 0.5, np.sqrt(0.5), 5e-324, 1e-310, 2.2250738585072014e-308],
        ]
    )
    out = np.empty_like(x)
    K._log_into(x, out, x.size, 0.0)
    expected = np.log(x)
    nonzero = expected != 0
    assert ulps(out[nonzero], expected[nonzero]).max() <= 1.0
    assert np.all(out[~nonzero] == 0.0)
    K._log_into(np.array([0.0, 1e-20]), out, 2, 1e-12)
    assert out[0] == out[1] == np.log(1e-12)
