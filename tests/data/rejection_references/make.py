"""Write (or check) the reference libraries' rejection metrics on fixed inputs: rejection_references.json.

LM-Polygraph 0.7.0 (``PredictionRejectionArea``, its 1,000-shuffle random baseline
``get_random_scores``, ``RiskCoverageCurveAUC``, ``ROCAUC``, ``PRAUC``) and torch-uncertainty 0.13.0
(``AUGRC``, ``RiskAtxCov``, ``CovAtxRisk``) need packages calibkit's test extras do not install
(LM-Polygraph's wheel pulls spaCy, fschat, bitsandbytes, COMET; torch-uncertainty's package imports
torchvision): both are installed with ``pip install --no-deps`` by ``.ci/run``'s slow stage, and
their metric modules are loaded here from their files, without their packages' ``__init__``.
``tests/metrics/test_rejection.py`` compares calibkit with the stored numbers on every run, and its
slow test reruns this script's computation and checks that the stored file is current.

torch-uncertainty computes in the dtype of its inputs and of ``torch.arange(...) / n`` (the default
dtype): float64 inputs and ``torch.set_default_dtype(torch.float64)`` here, so every number is float64.

Run: ``python tests/data/rejection_references/make.py`` (writes), ``--check`` (compares, exit 1 on a difference).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
import warnings
from importlib.metadata import distribution
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
OUTPUT = HERE / "rejection_references.json"
SHUFFLES = 1000  # LM-Polygraph's get_random_scores: 1,000 shuffles, np.random.seed(42)


def _load(package: str, name: str, relative: str) -> types.ModuleType:
    """Load one module file of an installed distribution without running its package's ``__init__``."""
    path = Path(distribution(package).locate_file(relative))
    parent = name.rpartition(".")[0]
    if parent and parent not in sys.modules:
        holder = types.ModuleType(parent)
        holder.__path__ = [str(path.parent)]
        sys.modules[parent] = holder
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def inputs() -> dict[str, dict[str, list[float]]]:
    """The fixed inputs: continuous quality (a ROUGE-like score), 0/1 correctness, a small case."""
    rng = np.random.default_rng(66)
    c = rng.random(300)
    rouge = np.clip(0.6 * c + 0.5 * rng.random(300) - 0.1, 0.0, 1.0)
    c2 = rng.beta(2.0, 1.0, 500)
    right = (rng.random(500) < c2).astype(np.float64)
    c3 = rng.random(9)
    right3 = np.array([1, 0, 1, 1, 0, 1, 0, 1, 1], dtype=np.float64)
    return {
        "continuous": {"confidence": c.tolist(), "quality": rouge.tolist()},
        "binary": {"confidence": c2.tolist(), "quality": right.tolist()},
        "small": {"confidence": c3.tolist(), "quality": right3.tolist()},
    }


def compute() -> dict:
    """Every reference number on :func:`inputs`."""
    import torch

    ue = _load("lm-polygraph", "lm_polygraph_ue.ue_metric", "lm_polygraph/ue_metrics/ue_metric.py")
    pra = _load("lm-polygraph", "lm_polygraph_ue.pred_rej_area", "lm_polygraph/ue_metrics/pred_rej_area.py")
    rcc = _load("lm-polygraph", "lm_polygraph_ue.risk_cov_curve", "lm_polygraph/ue_metrics/risk_cov_curve.py")
    roc = _load("lm-polygraph", "lm_polygraph_ue.roc_auc", "lm_polygraph/ue_metrics/roc_auc.py")
    pr = _load("lm-polygraph", "lm_polygraph_ue.pr_auc", "lm_polygraph/ue_metrics/pr_auc.py")
    tu = _load("torch-uncertainty", "tu_risk_coverage", "torch_uncertainty/metrics/classification/risk_coverage.py")
    torch.set_default_dtype(torch.float64)
    out: dict = {"inputs": inputs(), "lm_polygraph": {}, "torch_uncertainty": {}}
    for case, data in out["inputs"].items():
        c, q = np.array(data["confidence"]), np.array(data["quality"])
        uncertainty = -c  # LM-Polygraph's estimator: higher is more uncertain
        lmp: dict = {}
        for share in (1.0, 0.5):
            metric = pra.PredictionRejectionArea(max_rejection=share)
            value, oracle = metric(uncertainty, q), metric(-q, q)
            random = ue.get_random_scores(metric, q)
            # the same shuffles again, for their spread (get_random_scores returns the mean only)
            np.random.seed(42)
            ranks, draws = np.arange(len(q)), []
            for _ in range(SHUFFLES):
                np.random.shuffle(ranks)
                draws.append(metric(ranks, q))
            lmp[str(share)] = {
                "area": float(value),
                "oracle": float(oracle),
                "random_shuffled": float(random),
                "random_shuffled_again": float(np.mean(draws)),
                "random_shuffles_sd": float(np.std(draws, ddof=1)),
                "prr": float(ue.normalize_metric(value, oracle, random)),
                "normalized_quality_mean": float(ue.normalize(q).mean()),
            }
        lmp["rcc_auc"] = float(rcc.RiskCoverageCurveAUC()(uncertainty, q))
        wrong = (q < 0.5).astype(int)
        lmp["roc_auc"] = float(roc.ROCAUC()(list(uncertainty), list(wrong)))
        lmp["pr_auc"] = float(pr.PRAUC()(list(uncertainty), list(wrong)))
        out["lm_polygraph"][case] = lmp
        out["torch_uncertainty"][case] = _torch_uncertainty(tu, torch, c, q)
    return out


def _torch_uncertainty(tu: types.ModuleType, torch: types.ModuleType, c: np.ndarray, q: np.ndarray) -> dict:
    """AUGRC, risk at 80% coverage and coverage at 10% risk: on the losses ``1 - q`` as its states hold them."""
    scores, losses = torch.tensor(c), torch.tensor(1.0 - q)
    got = {}
    warnings.simplefilter("ignore", UserWarning)  # compute() before update(): the states are set directly
    for key, metric in (("augrc", tu.AUGRC()), ("risk_at_coverage", tu.RiskAtxCov(0.8)),
                        ("coverage_at_risk", tu.CovAtxRisk(0.1))):  # fmt: skip
        metric.scores.append(scores)  # what update() stores: the top-class confidence and the error
        metric.errors.append(losses)
        got[key] = float(metric.compute().reshape(-1)[0])
    if set(np.unique(q)) <= {0.0, 1.0}:  # 0/1 correctness: through update() as well, probabilities [c, 0]
        probs = torch.tensor(np.stack([c, np.zeros_like(c)], axis=1))
        metric = tu.AUGRC()
        metric.update(probs, torch.tensor((q == 0).astype(np.int64)))
        got["augrc_update"] = float(metric.compute().reshape(-1)[0])
    return got


def main() -> int:
    """Write the file, or with ``--check`` compare it with a fresh computation."""
    fresh = compute()
    if "--check" in sys.argv[1:]:
        stored = json.loads(OUTPUT.read_text())
        same = stored == json.loads(json.dumps(fresh))
        print("rejection_references.json is current" if same else "rejection_references.json differs: rerun make.py")
        return 0 if same else 1
    OUTPUT.write_text(json.dumps(fresh, indent=1) + "\n")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
