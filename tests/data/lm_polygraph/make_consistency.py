"""LM-Polygraph 0.7.0's consistency estimators on fixed inputs: the reference that tests/test_consistency.py reads.

Run from the repository root with lm-polygraph==0.7.0 installed ``--no-deps`` (its wheel pulls spaCy,
fschat, bitsandbytes, COMET, ...): ``.ci/run`` does, then runs ``python tests/data/lm_polygraph/make_consistency.py
--check``, which recomputes every number and fails when it differs from the stored file.

    pip install --no-deps lm-polygraph==0.7.0
    python tests/data/lm_polygraph/make_consistency.py          # writes consistency.json beside this file
    python tests/data/lm_polygraph/make_consistency.py --check  # recomputes and compares

The estimator modules are imported as they are, without ``lm_polygraph/__init__.py`` (which
imports the models, the OpenAI client, diskcache, ...): the parent packages are empty stand-ins
whose ``__path__`` is the installed folder. What the six modules import is then all in calibkit's
test environment: numpy, scipy, torch (``num_sem_sets``: ``torch.nn``), rouge_score, nltk and
absl-py (``lexical_similarity``; lm-eval's dependencies), PIL and transformers
(``lm_polygraph.utils.common``). Nothing of LM-Polygraph is edited or copied.

The inputs: short answers of a few words (some stemmable, some with punctuation, some empty), 2 to
10 a question, and NLI-like matrices (entailment, neutral and contradiction probabilities drawn from
a Dirichlet, and one-hot ones as KLE's paper has), all from fixed seeds.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
import types
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
OUTPUT = HERE / "consistency.json"
SAMPLES = (2, 3, 5, 10)  # answers a question, a batch of questions for each
WORDS = (
    "Paris", "paris.", "the capital of France", "Lyon", "running", "runs", "ran quickly", "4", "four",
    "four legs", "It is four.", "", "...", "an apple", "apples", "The answer is 42", "42", "forty-two",
)  # fmt: skip
MODULES = (
    "lexical_similarity",
    "num_sem_sets",
    "eig_val_laplacian",
    "deg_mat",
    "eccentricity",
    "kernel_language_entropy",
)


def estimators() -> dict[str, types.ModuleType]:
    """Import LM-Polygraph's six estimator modules without its package's ``__init__``."""
    loaded = sys.modules.get("lm_polygraph")
    if loaded is not None and loaded.__spec__ is None:  # the stand-in of an earlier call
        return {m: importlib.import_module(f"lm_polygraph.estimators.{m}") for m in MODULES}
    spec = importlib.util.find_spec("lm_polygraph")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("lm-polygraph is not installed: pip install --no-deps lm-polygraph==0.7.0")
    root = Path(spec.submodule_search_locations[0])
    for name, folder in (("lm_polygraph", root), ("lm_polygraph.utils", root / "utils"),
                         ("lm_polygraph.estimators", root / "estimators")):  # fmt: skip
        if name not in sys.modules:
            stand_in = types.ModuleType(name)
            stand_in.__path__ = [str(folder)]
            sys.modules[name] = stand_in
    return {m: importlib.import_module(f"lm_polygraph.estimators.{m}") for m in MODULES}


def inputs(seed: int = 0, questions: int = 8) -> dict[str, list]:
    """The fixed texts and matrices: ``questions`` questions for each number of samples in :data:`SAMPLES`."""
    rng = np.random.default_rng(seed)
    texts, entail, contra, onehot_entail, onehot_contra = [], [], [], [], []
    for k in SAMPLES:
        texts.append([[str(w) for w in rng.choice(WORDS, k)] for _ in range(questions)])
        probs = rng.dirichlet([2.0, 1.0, 1.0], size=(questions, k, k))  # entailment, neutral, contradiction
        entail.append(probs[..., 0].tolist())
        contra.append(probs[..., 2].tolist())
        label = rng.integers(0, 3, size=(questions, k, k))
        label[:, np.arange(k), np.arange(k)] = 0  # an answer entails itself (else a degree can be 0)
        onehot_entail.append((label == 0).astype(float).tolist())
        onehot_contra.append((label == 2).astype(float).tolist())
    return {"texts": texts, "entail": entail, "contra": contra, "onehot_entail": onehot_entail,
            "onehot_contra": onehot_contra}  # fmt: skip


def outputs(data: dict[str, list]) -> dict[str, list]:
    """LM-Polygraph's estimators on :func:`inputs`, one list a batch (number of samples)."""
    est = estimators()
    jaccard = {"similarity_score": "Jaccard_score"}
    out: dict[str, list] = {}

    def put(name: str, value: np.ndarray) -> None:
        out.setdefault(name, []).append(np.asarray(value, dtype=np.float64).tolist())

    for b, texts in enumerate(data["texts"]):
        stats = {"sample_texts": texts}
        put("LexicalSimilarity_rougeL", est["lexical_similarity"].LexicalSimilarity("rougeL")(stats))
        matrices = [est["eig_val_laplacian"].compute_sim_score(t, "entail", "Jaccard_score") for t in texts]
        put("Jaccard_matrix", matrices)  # common.py's Jaccard similarity, which its estimators read
        put("EigValLaplacian_Jaccard_score", est["eig_val_laplacian"].EigValLaplacian(**jaccard)(stats))
        put("DegMat_Jaccard_score", est["deg_mat"].DegMat(**jaccard)(stats))
        put("Eccentricity_Jaccard_score", est["eccentricity"].Eccentricity(**jaccard)(stats))
        for prefix in ("", "onehot_"):
            stats = {"sample_texts": texts, "semantic_matrix_entail": np.array(data[f"{prefix}entail"][b]),
                     "semantic_matrix_contra": np.array(data[f"{prefix}contra"][b])}  # fmt: skip
            put(f"{prefix}NumSemSets", est["num_sem_sets"].NumSemSets()(stats))
            put(f"{prefix}KernelLanguageEntropy", est["kernel_language_entropy"].KernelLanguageEntropy()(stats))
            for affinity in ("entail", "contra"):
                put(
                    f"{prefix}EigValLaplacian_{affinity}",
                    est["eig_val_laplacian"].EigValLaplacian(affinity=affinity)(stats),
                )
                put(f"{prefix}DegMat_{affinity}", est["deg_mat"].DegMat(affinity=affinity)(stats))
                put(f"{prefix}Eccentricity_{affinity}", est["eccentricity"].Eccentricity(affinity=affinity)(stats))
    return out


def main(argv: list[str] | None = None) -> int:
    """Write (or, with ``--check``, recompute and compare) tests/data/lm_polygraph/consistency.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="recompute and compare with the stored file")
    args = parser.parse_args(argv)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # np.linalg.eig's complex parts dropped by LM-Polygraph's astype
        data = inputs()
        result = {"lm_polygraph": "0.7.0", "samples": list(SAMPLES), "inputs": data, "outputs": outputs(data)}
    if args.check:
        stored = json.loads(OUTPUT.read_text())
        if stored["inputs"] != result["inputs"]:
            print(f"{OUTPUT}: the inputs differ from the script's: rerun it without --check", file=sys.stderr)
            return 1
        for name, batches in result["outputs"].items():
            for got, kept in zip(batches, stored["outputs"][name]):
                if not np.allclose(np.array(got, dtype=float), np.array(kept, dtype=float), rtol=0, atol=1e-12,
                                   equal_nan=True):  # fmt: skip
                    print(f"{OUTPUT}: LM-Polygraph's {name} differs from the stored numbers", file=sys.stderr)
                    return 1
        print(f"{OUTPUT}: LM-Polygraph's {len(result['outputs'])} outputs equal the stored ones")
        return 0
    OUTPUT.write_text(json.dumps(result) + "\n")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
