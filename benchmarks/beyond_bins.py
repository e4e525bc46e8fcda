"""Speed and agreement of calibkit's score decomposition, split-conformal sets and beta, Venn-Abers and
Dirichlet calibrators against the reference libraries their tests compare with, on the same arrays.

    python benchmarks/beyond_bins.py              # the sizes below, medians of 5 rounds
    python benchmarks/beyond_bins.py --quick      # every size 10x smaller, 3 rounds
    python benchmarks/beyond_bins.py --only conformal venn-abers --repeats 3

Cases (synthetic, over-confident logits ``z = 2 * normal``, labels drawn from ``softmax(z / 2)``):

* ``score_decomposition(probs, labels, score=...)`` top label (N x 10 probabilities; Brier and
  log) against model-diagnostics 1.5.0 ``decompose`` of the top-label confidence against
  correctness, the call of tests/metrics/test_decomposition.py; the reference's time includes
  taking the top label (argmax, confidence, correctness), as calibkit's does. N = 10k, 1M.
  Difference: the largest of the four parts' (miscalibration, discrimination, uncertainty, score).
* ``SplitConformal(score=..., inputs="probs")`` fit + ``predict_sets`` (LAC and APS, level 0.9)
  against MAPIE 1.6 ``SplitConformalClassifier(prefit=True)`` conformalize + ``predict_set``, fed
  the same probabilities by a prefit classifier whose ``predict_proba`` returns given rows, with
  uniform draws of 0 (the non-randomised APS scores), as tests/calibrators/test_conformal.py.
  n_cal = 10k, n_test = 100k, K = 10 and 100. Difference: the number of test sets that differ.
* ``BetaCalibration`` (binary, fit on N rows, predict N fresh rows) against netcal 1.4
  ``BetaCalibration(method="mle")`` at its default tolerances, given softmax probabilities; N = 10k,
  100k. Difference: largest of the class-1 probabilities, against netcal as timed and (in brackets)
  against netcal run to convergence as tests/calibrators/test_beyond.py does (untimed).
* ``VennAbersCalibration`` (binary, fit on N rows, predict 10k) against ``venn_abers.VennAbers``
  given ``head_probabilities`` of the same logits; N = 10k, 100k. The reference is skipped at the
  sizes above one where a single call took more than ``--cap`` seconds (60). Difference: largest of
  the probabilities and of the (p0, p1) intervals.
* ``DirichletCalibration`` (K = 10, N = 10k, predict N fresh rows): no runnable reference
  (``dirichletcal`` needs jax, not installable here), so it is timed against calibkit's own
  ``MatrixScaling`` on the same logits, for scale; no difference is printed (different maps).

Calibkit's calls take the logits (or probabilities where the reference does) and every reference is
given its inputs precomputed. ``--threads 1`` limits torch's intra-op threads and the BLAS and
OpenMP pools (threadpoolctl) to one: on a loaded machine (here 2 cores shared, load 5-7) two
threads cost ~10 ms per small torch op (the calibrators' predictions run a torch head; Dirichlet
fits in torch) and BLAS's second thread made the beta fit at 100k 3x slower, so the default and
``--threads 1`` bracket the figures; the references run under the same limits. Contenders run
round-robin within each round; the ratio is the median of the per-round ratios reference / calibkit
("x faster"), as the machine's speed drifts. Warm-up calls (numba compilation, imports) run before
the rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.special import softmax

sys.path.insert(0, str(Path(__file__).parent))
from _common import interleaved_times  # noqa: E402

CASES = ("decomposition", "conformal", "beta", "venn-abers", "dirichlet")


def problem(seed: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Logits ``2 * normal`` (n, k) and labels drawn from softmax(z / 2): over-confident."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 2
    y = (softmax(z / 2, axis=1).cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return z, y


def row(case: str, times: dict[str, list[float]], ours: str, theirs: str, difference: str) -> None:
    """One Markdown row: both medians, the median per-round ratio theirs / ours, the difference."""
    ratio = statistics.median(t / o for t, o in zip(times[theirs], times[ours]))
    print(
        f"| {case} | {statistics.median(times[ours]):.4f} | {statistics.median(times[theirs]):.4f} "
        f"| {ratio:.2f}x | {difference} |",
        flush=True,
    )


# -- score decomposition ------------------------------------------------------------------------
def run_decomposition(n: int, repeats: int) -> None:
    import model_diagnostics.scoring as md

    import calibkit

    z, y = problem(n, n, 10)
    probs = softmax(z, axis=1)

    def reference(score: str) -> dict[str, float]:
        top = probs.argmax(axis=1)
        conf = probs[np.arange(n), top]
        correct = (top == y).astype(np.float64)
        fn = md.SquaredError() if score == "brier" else md.LogLoss()
        frame = md.decompose(y_obs=correct, y_pred=conf, scoring_function=fn)
        return {k: float(frame[k][0]) for k in ("miscalibration", "discrimination", "uncertainty", "score")}

    for score in ("brier", "log"):
        calibkit.score_decomposition(probs[:1000], y[:1000], score=score)  # compile outside the rounds
        ours = calibkit.score_decomposition(probs, y, score=score)["top_label"]
        theirs = reference(score)
        difference = max(abs(float(ours[k]) - v) for k, v in theirs.items())
        times = interleaved_times(
            {
                "calibkit": lambda score=score: calibkit.score_decomposition(probs, y, score=score),
                "reference": lambda score=score: reference(score),
            },
            repeats,
        )
        row(f"score_decomposition {score}, N = {n:,} x 10", times, "calibkit", "reference", f"{difference:.1e}")


# -- split conformal ----------------------------------------------------------------------------
def run_conformal(n_cal: int, n_test: int, k: int, repeats: int) -> None:
    from mapie.classification import SplitConformalClassifier
    from sklearn.base import BaseEstimator, ClassifierMixin

    from calibkit.calibrators import SplitConformal

    class GivenRows(ClassifierMixin, BaseEstimator):
        """A fitted classifier whose predict_proba returns the given rows: X holds row indices."""

        def __init__(self, probs=None):
            self.probs = probs

        def fit(self, X, y):
            return self

        def predict_proba(self, X):
            return self.probs[np.asarray(X)[:, 0].astype(int)]

        def predict(self, X):
            return self.predict_proba(X).argmax(axis=1)

    class NoDraws(np.random.RandomState):
        """Uniform draws of 0: MAPIE's APS calibration scores without randomisation, as calibkit's."""

        def uniform(self, low=0.0, high=1.0, size=None):
            return np.zeros(size)

    z, y = problem(k, n_cal + n_test, k)
    probs = softmax(z, axis=1)
    cal, test = np.arange(n_cal), np.arange(n_cal, n_cal + n_test)
    p_cal, y_cal, p_test = probs[cal], y[cal], probs[test]
    estimator = GivenRows(probs)
    estimator.classes_, estimator.n_features_in_ = np.arange(k), 1

    def mapie(score: str) -> np.ndarray:
        m = SplitConformalClassifier(
            estimator=estimator, confidence_level=0.9, conformity_score=score, prefit=True, random_state=NoDraws(0)
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m.conformalize(cal[:, None], y_cal)
            return m.predict_set(test[:, None])[1][:, :, 0]

    def ours(score: str) -> np.ndarray:
        return SplitConformal(score=score, confidence_level=0.9, inputs="probs").fit(p_cal, y_cal).predict_sets(p_test)

    for score in ("lac", "aps"):
        ours(score)  # compile outside the rounds
        differing = int((ours(score) != mapie(score)).any(axis=1).sum())
        times = interleaved_times(
            {"calibkit": lambda score=score: ours(score), "reference": lambda score=score: mapie(score)}, repeats
        )
        row(
            f"SplitConformal {score}, n_cal = {n_cal:,}, n_test = {n_test:,}, K = {k}",
            times,
            "calibkit",
            "reference",
            f"{differing} of {n_test:,} sets differ",
        )


# -- beta ---------------------------------------------------------------------------------------
def run_beta(n: int, repeats: int) -> None:
    import functools

    import netcal.scaling as netcal_scaling
    from scipy.optimize import minimize

    from calibkit.calibrators.beyond import BetaCalibration

    z, y = problem(n, n, 2)
    test, _ = problem(n + 1, n, 2)
    s, s_test = softmax(z, axis=1)[:, 1], softmax(test, axis=1)[:, 1]

    def netcal() -> np.ndarray:
        reference = netcal_scaling.BetaCalibration(method="mle")
        reference.fit(s, y)
        return reference.transform(s_test)

    def ours() -> np.ndarray:
        return BetaCalibration().fit(z, y).predict_proba(test)[:, 1]

    got = ours()
    difference = np.abs(got - netcal()).max()
    module = sys.modules["netcal.scaling.AbstractLogisticRegression"]
    default = module.minimize  # converged as the tests run it, then put back
    options = {"ftol": 1e-16, "gtol": 1e-11, "maxiter": 10_000}
    module.minimize = functools.partial(minimize, method="L-BFGS-B", options=options)
    try:
        converged = np.abs(got - netcal()).max()
    finally:
        module.minimize = default
    times = interleaved_times({"calibkit": ours, "reference": netcal}, repeats)
    row(
        f"BetaCalibration fit + predict, N = {n:,}",
        times,
        "calibkit",
        "reference",
        f"{difference:.1e} (converged: {converged:.1e})",
    )


# -- Venn-Abers ---------------------------------------------------------------------------------
def run_venn_abers(n: int, n_test: int, repeats: int, cap: float) -> bool:
    """One size; False when the reference's single call took longer than ``cap`` seconds."""
    from venn_abers import VennAbers

    from calibkit.calibrators.beyond import VennAbersCalibration, head_probabilities

    z, y = problem(n, n, 2)
    test, _ = problem(n + 1, n_test, 2)
    p_cal, p_test = head_probabilities(z), head_probabilities(test)

    def reference():
        return VennAbers().fit(p_cal, y).predict_proba(p_test)

    def ours():
        return VennAbersCalibration().fit(z, y).predict_proba(test)

    ours()  # compile outside the rounds
    start = time.perf_counter()
    expected, p0p1 = reference()
    once = time.perf_counter() - start
    case = f"VennAbersCalibration fit + predict, N = {n:,}, test {n_test:,}"
    if once > cap:
        print(f"| {case} | | {once:.1f} (one call) | | reference above {cap:.0f} s: not repeated |", flush=True)
        return False
    va = VennAbersCalibration().fit(z, y)
    low, high = va.predict_interval(test)
    difference = max(
        np.abs(va.predict_proba(test) - expected).max(),
        np.abs(low[:, 1] - p0p1[:, 0]).max(),
        np.abs(high[:, 1] - p0p1[:, 1]).max(),
    )
    times = interleaved_times({"calibkit": ours, "reference": reference}, repeats)
    row(case, times, "calibkit", "reference", f"{difference:.1e}")
    return True


# -- Dirichlet ----------------------------------------------------------------------------------
def run_dirichlet(n: int, k: int, repeats: int) -> None:
    from calibkit.calibrators import MatrixScaling
    from calibkit.calibrators.beyond import DirichletCalibration

    z, y = problem(n, n, k)
    test, _ = problem(n + 1, n, k)
    contenders = {
        "calibkit": lambda: DirichletCalibration().fit(z, y).predict_proba(test),
        "matrix": lambda: MatrixScaling().fit(z, y).predict_proba(test),
    }
    for fn in contenders.values():
        fn()  # compile outside the rounds
    times = interleaved_times(contenders, repeats)
    row(
        f"DirichletCalibration fit + predict, N = {n:,}, K = {k} (reference column: calibkit MatrixScaling)",
        times,
        "calibkit",
        "matrix",
        "no runnable reference (dirichletcal)",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="every size 10x smaller, 3 rounds")
    parser.add_argument("--repeats", type=int, default=None, help="round-robin rounds (5; 3 with --quick)")
    parser.add_argument("--only", nargs="+", choices=CASES, default=list(CASES), help="cases to run")
    parser.add_argument("--cap", type=float, default=60.0, help="seconds above which Venn-Abers' reference stops")
    parser.add_argument("--threads", type=int, help="torch, BLAS and OpenMP threads (default: the libraries' own)")
    args = parser.parse_args()
    import torch

    if args.threads:
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(args.threads)
        threadpool_limits(args.threads)
    scale = 10 if args.quick else 1
    repeats = args.repeats or (3 if args.quick else 5)
    warnings.filterwarnings("ignore", category=FutureWarning)

    print(
        f"threads: {args.threads or 'default'} (torch {torch.get_num_threads()}), repeats: {repeats}; "
        "times in seconds, medians; ratio: median per-round reference / calibkit\n"
    )
    print("| case | calibkit s | reference s | reference / calibkit | largest difference |")
    print("|---|---|---|---|---|", flush=True)
    if "decomposition" in args.only:
        for n in (10_000, 1_000_000):
            run_decomposition(n // scale, repeats)
    if "conformal" in args.only:
        for k in (10, 100):
            run_conformal(10_000 // scale, 100_000 // scale, k, repeats)
    if "beta" in args.only:
        for n in (10_000, 100_000):
            run_beta(n // scale, repeats)
    if "venn-abers" in args.only:
        for n in (10_000, 100_000):
            if not run_venn_abers(n // scale, 10_000 // scale, repeats, args.cap):
                break
    if "dirichlet" in args.only:
        run_dirichlet(10_000 // scale, 10, repeats)


if __name__ == "__main__":
    main()
