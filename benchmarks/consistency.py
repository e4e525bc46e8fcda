"""Speed of the consistency scores of sampled answers, against LM-Polygraph 0.7.0's estimators on the same input.

    python benchmarks/consistency.py                          # 1,000 questions x 10 samples, 3 rounds
    python benchmarks/consistency.py --questions 200 --repeats 1 --no-lm-polygraph

The input: ``questions`` questions of ``samples`` free-text answers each, 1 to 25 words drawn from a
vocabulary of 300 (a few meanings a question, so that answers repeat and overlap as sampled ones
do), from a fixed seed. calibkit's contender is one call of
``calibkit.lm.generations.consistency.consistency_uncertainties``, which gives every score (LexSim
over ROUGE-L and Jaccard, NumSemSets, EigV, Deg, Ecc, KLE) over each built-in similarity of the
graph scores (``jaccard``, ``exact``, ``rouge_l``), with and without stemming (ROUGE-L's Porter
stemmer: nltk). LM-Polygraph's: its estimators on the same texts, as its Jaccard configuration computes them
(``LexicalSimilarity("rougeL")``, which stems; ``EigValLaplacian``, ``DegMat``, ``Eccentricity``
with ``similarity_score="Jaccard_score"``; ``NumSemSets`` and ``KernelLanguageEntropy`` read NLI
matrices only, so they are given the Jaccard matrix as ``semantic_matrix_entail`` and ``1 -`` it
as ``semantic_matrix_contra``, calibkit's convention for one matrix). Printed: each median time
(the budget: under 5 s for every score on 2 cores), the ratio, and the largest difference of the
values between the two.

LM-Polygraph is imported as tests/data/lm_polygraph/make_consistency.py does (``pip install
--no-deps lm-polygraph==0.7.0``; its estimator modules without the package's ``__init__``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "data" / "lm_polygraph"))
from _common import interleaved_times  # noqa: E402


def answers(questions: int, samples: int, seed: int = 0) -> list[list[str]]:
    """Free-text answers: each question has 3 meanings (word lists), each sample one of them, words dropped or added."""
    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{i}" for i in range(300)] + ["The", "answer", "is", "Paris.", "running", "runs"])
    out = []
    for _ in range(questions):
        meanings = [rng.choice(vocabulary, rng.integers(1, 20)) for _ in range(3)]
        question = []
        for _ in range(samples):
            words = list(meanings[rng.integers(0, 3)])
            keep = [w for w in words if rng.uniform() > 0.15] + list(rng.choice(vocabulary, rng.integers(0, 6)))
            question.append(" ".join(keep))
        out.append(question)
    return out


def lm_polygraph_scores(texts: list[list[str]]) -> dict[str, np.ndarray]:
    """LM-Polygraph's estimators on the texts (the module's docstring says which and how)."""
    from make_consistency import estimators

    est = estimators()
    jaccard = {"similarity_score": "Jaccard_score"}
    stats = {"sample_texts": texts}
    matrix = np.stack([est["eig_val_laplacian"].compute_sim_score(t, "entail", "Jaccard_score") for t in texts])
    nli = {**stats, "semantic_matrix_entail": matrix, "semantic_matrix_contra": 1 - matrix}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "lexsim_rouge_l": est["lexical_similarity"].LexicalSimilarity("rougeL")(stats),
            "eigv": est["eig_val_laplacian"].EigValLaplacian(**jaccard)(stats),
            "deg": est["deg_mat"].DegMat(**jaccard)(stats),
            "ecc": est["eccentricity"].Eccentricity(**jaccard)(stats),
            "num_sem_sets": est["num_sem_sets"].NumSemSets()(nli),
            "kle": np.asarray(est["kernel_language_entropy"].KernelLanguageEntropy()(nli)),
        }


def main(argv: list[str] | None = None) -> None:
    """Time the contenders and print the table."""
    from calibkit.lm.generations.consistency import consistency_uncertainties

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-lm-polygraph", action="store_true", help="time calibkit alone")
    args = parser.parse_args(argv)
    texts = answers(args.questions, args.samples)
    consistency_uncertainties(texts[:2])  # imports outside the rounds
    contenders = {
        f"calibkit, {s}{' (stemmed ROUGE-L)' * stem}": (
            lambda s=s, stem=stem: consistency_uncertainties(texts, similarity=s, stem=stem)
        )
        for s in ("jaccard", "exact", "rouge_l")
        for stem in (False, True)
    }
    if not args.no_lm_polygraph:
        lm_polygraph_scores(texts[:2])
        contenders["LM-Polygraph 0.7.0 (Jaccard; stemmed ROUGE-L)"] = lambda: lm_polygraph_scores(texts)
    times = interleaved_times(contenders, args.repeats)
    print(f"{args.questions} questions x {args.samples} samples, every consistency score; median of {args.repeats}")
    base = statistics.median(times[next(iter(times))])
    for name, values in times.items():
        t = statistics.median(values)
        print(f"  {name:48s} {t:8.3f} s   {t / base:6.1f} x calibkit's jaccard")
    if not args.no_lm_polygraph:
        ours = consistency_uncertainties(texts, similarity="jaccard", stem=True)
        theirs = lm_polygraph_scores(texts)
        worst = max(float(np.max(np.abs(ours[n] - theirs[n]))) for n in theirs)
        print(f"  largest difference of the values (same texts, {', '.join(theirs)}): {worst:.2e}")


if __name__ == "__main__":
    main()
