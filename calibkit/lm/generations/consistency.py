"""Consistency of sampled answers: LM-Polygraph's black-box scores, for every question at once.

From a question's ``k`` sampled answers and their ``k x k`` similarities (:mod:`calibkit.lm.generations.similarity`:
exact, Jaccard, ROUGE-L or an NLI model's), the scores of LM-Polygraph 0.7.0's black-box family
(Fadeeva et al. 2023; Vashurin et al., TACL 2025), each an *uncertainty* there (higher = less
confident), computed here on batched ``(Q, k, k)`` matrices (eigendecompositions by
``numpy.linalg.eigh`` over the batch) and equal to LM-Polygraph's estimators to 1e-9 (tested):

- ``lexsim_rouge_l``, ``lexsim_jaccard`` (``LexicalSimilarity``, Fomicheva et al. 2020): ``U = -mean_{i<j} s_ij``
  with ``s`` ROUGE-L or Jaccard;
- ``num_sem_sets`` (``NumSemSets``, Lin et al. 2023): ``U`` the number of connected components of
  the graph linking ``i`` and ``j`` when ``entail > contra`` both ways (one matrix: ``s > 1/2``);
- ``eigv`` (``EigValLaplacian``, Lin et al. 2023): ``U = sum_m max(0, 1 - lambda_m)`` over the
  eigenvalues of the normalised Laplacian ``L = I - D^-1/2 W D^-1/2``, ``W = (s + s^T) / 2``;
- ``deg`` (``DegMat``): ``U = trace(k - D) / k^2 = 1 - sum_ij W_ij / k^2``;
- ``ecc`` (``Eccentricity``): ``U = sqrt(sum_m ||v_m - mean(v_m)||^2)`` over the eigenvectors
  ``v_m`` of ``L`` with eigenvalue below 0.9;
- ``kle`` (``KernelLanguageEntropy``, Nikitin et al. 2024): the von Neumann entropy of the heat
  kernel ``expm(-t L_W)`` (``t = 0.3``; ``L_W = diag(W 1) - W`` with ``W = E + E^T + (2 - E - E^T -
  C - C^T) / 2``, which is ``s + s^T`` when the contradiction is ``1 - s``), its diagonal
  normalised and divided by ``k``, scaled by ``log k``.

**As confidences.** calibkit's sources are confidences in [0, 1] (calibration metrics need them),
so each uncertainty becomes one by a decreasing map (:func:`consistency_confidences`), which keeps
its ranking (AURC, PRR, ROC-AUC are LM-Polygraph's exactly):

- LexSim: ``-U``, the mean pairwise similarity;
- NumSemSets and EigV: ``1 / U``, one over the (continuous) number of meanings, which
  ``U >= 1`` keeps in ``[1/k, 1]``, as ``exp(-SE)`` of the semantic entropy is;
- Deg: ``1 - U``, the mean similarity, self-pairs included;
- Ecc: ``1 / (1 + U^2)``; with the exact similarity ``U^2`` is the number of groups less one,
  so this too is one over the number of meanings;
- KLE: ``exp(-U log k) = k^-U``, one over the kernel's effective number of meanings.

These numbers are ordered like probabilities of being right, but nothing makes them one: their
ECE measures that distance, and the report's recalibrations (Platt, isotonic, on half of the
questions) are what turns them into probabilities. No score is ranking-only here.

A question with one sample has no pair to compare: every consistency score is undefined there.
:func:`consistency_scores` refuses it (``single="raise"``) or gives NaN for it (``single="nan"``,
what :func:`~calibkit.lm.generations.read_agreement` does, with a warning that counts them; the
report then counts those answers as without a confidence).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from calibkit.lm.generations.similarity import check_similarity, jaccard_matrices, rouge_l_matrices, similarity_matrices
from calibkit.lm.sources import names

__all__ = [
    "CONSISTENCY",
    "DECIMALS",
    "ECC_THRESHOLD",
    "KLE_T",
    "SINGLE",
    "consistency_confidences",
    "consistency_scores",
    "consistency_uncertainties",
    "graph_uncertainties",
    "lexical_similarity",
]

KLE_T = 0.3
"""The heat kernel's time ``t`` of KLE (LM-Polygraph's default, from Nikitin et al. 2024)."""

ECC_THRESHOLD = 0.9
"""The eigenvalues below which Ecc keeps the Laplacian's eigenvectors (LM-Polygraph's ``thres``)."""

DECIMALS = 12
"""The confidences are rounded to this many decimals: the eigendecompositions' rounding errors (1e-15) would
otherwise order answers whose scores are equal (two questions of the same number of meanings), and
the ranking metrics (AURC) would read that noise."""

SINGLE = ("raise", "nan")
"""What a question with one sample gets: a ``ValueError``, or NaN scores."""

_MAPS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "lexsim_rouge_l": lambda u, k: -u,
    "lexsim_jaccard": lambda u, k: -u,
    "num_sem_sets": lambda u, k: 1.0 / u,
    "eigv": lambda u, k: 1.0 / u,
    "deg": lambda u, k: 1.0 - u,
    "ecc": lambda u, k: 1.0 / (1.0 + u**2),
    "kle": lambda u, k: np.exp(-u * np.log(k)),
}  # each uncertainty's decreasing map to a confidence in [0, 1] (the module's docstring)

CONSISTENCY = tuple(name for name in names("samples") if name in _MAPS)
"""The consistency sources, in the registry's order (:data:`calibkit.lm.sources.REGISTRY`)."""

_KERNEL_EPS = 1e-12  # LM-Polygraph's normalize_kernel adds it to the diagonal's square roots
_ZERO_EIGENVALUE = 1e-8  # the von Neumann entropy leaves out eigenvalues this small, as LM-Polygraph does


def lexical_similarity(similarity: np.ndarray) -> np.ndarray:
    """Return LexSim's uncertainty: minus the mean similarity over the pairs ``i < j``.

    Parameters
    ----------
    similarity : ndarray, shape (Q, k, k)
        ``k >= 2``.

    Returns
    -------
    ndarray of float64, shape (Q,)

    Examples
    --------
    >>> lexical_similarity(np.array([[[1, 0.5, 0], [0.5, 1, 1], [0, 1, 1.0]]])).tolist()
    [-0.5]
    """
    k = similarity.shape[-1]
    i, j = np.triu_indices(k, 1)
    return -similarity[:, i, j].mean(axis=1)


def _components(linked: np.ndarray) -> np.ndarray:
    """Count the connected components of each boolean ``(k, k)`` graph of a batch (symmetric links)."""
    k = linked.shape[-1]
    reach = (linked | np.eye(k, dtype=bool)).astype(np.float64)
    for _ in range(max(1, int(np.ceil(np.log2(max(k, 2)))))):  # paths of length up to 2^r: the closure
        reach = ((reach @ reach) > 0).astype(np.float64)
    earlier = np.tril(np.ones((k, k), dtype=bool), -1)  # j < i
    return (~((reach > 0) & earlier).any(axis=-1)).sum(axis=-1).astype(np.float64)  # each component's first answer


def _laplacian(similarity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the symmetrised weights ``W`` and the normalised Laplacian ``I - D^-1/2 W D^-1/2`` of each question."""
    weights = (similarity + similarity.transpose(0, 2, 1)) / 2
    degree = weights.sum(axis=-1)
    if (degree <= 0).any():
        q, i = (int(x) for x in np.argwhere(degree <= 0)[0])
        raise ValueError(
            f"`similarity`: answer {i} of question {q} has similarity 0 to every answer, itself included: the graph "
            "scores divide by each answer's degree (give an answer similarity 1 to itself)"
        )
    scale = 1.0 / np.sqrt(degree)
    k = similarity.shape[-1]
    return weights, np.eye(k) - weights * scale[:, :, None] * scale[:, None, :]


def _kle(similarity: np.ndarray, contra: np.ndarray | None, t: float) -> np.ndarray:
    """KLE's scaled von Neumann entropy of the heat kernel of each question's graph."""
    k = similarity.shape[-1]
    entail = similarity + similarity.transpose(0, 2, 1)
    if contra is None:  # contradiction 1 - s: no neutral part
        weights = entail
    else:
        neutral = 2.0 - entail - contra - contra.transpose(0, 2, 1)
        weights = entail + 0.5 * neutral
    laplacian = np.eye(k) * weights.sum(axis=-2)[:, None, :] - weights
    values, vectors = np.linalg.eigh(laplacian)  # expm of a symmetric matrix through its eigenvectors
    kernel = (vectors * np.exp(-t * values)[:, None, :]) @ vectors.transpose(0, 2, 1)
    root = np.sqrt(np.diagonal(kernel, axis1=-2, axis2=-1)) + _KERNEL_EPS
    kernel = kernel / (root[:, :, None] * root[:, None, :]) / k
    eig = np.linalg.eigvalsh(kernel)
    kept = np.abs(eig) > _ZERO_EIGENVALUE
    entropy = -np.sum(np.where(kept, eig * np.log(np.where(kept, eig, 1.0)), 0.0), axis=-1)
    return entropy / np.log(k)


def graph_uncertainties(
    similarity: np.ndarray,
    contra: np.ndarray | None = None,
    *,
    kle_t: float = KLE_T,
    ecc_threshold: float = ECC_THRESHOLD,
) -> dict[str, np.ndarray]:
    """Return NumSemSets, EigV, Deg, Ecc and KLE, LM-Polygraph's uncertainties, for a batch of questions.

    Parameters
    ----------
    similarity : ndarray, shape (Q, k, k)
        In [0, 1], ``k >= 2``: ``similarity[q, i, j]`` of answer ``i`` to answer ``j``
        (LM-Polygraph's ``semantic_matrix_entail``, or its Jaccard matrix).
    contra : ndarray, shape (Q, k, k), optional
        Contradiction probabilities (``semantic_matrix_contra``), read by NumSemSets and KLE;
        default ``1 - similarity``.
    kle_t : float, default :data:`KLE_T`
    ecc_threshold : float, default :data:`ECC_THRESHOLD`

    Returns
    -------
    dict of str to ndarray of float64, shape (Q,)
        ``num_sem_sets``, ``eigv``, ``deg``, ``ecc``, ``kle`` (higher = less confident).

    Raises
    ------
    ValueError
        When an answer has similarity 0 to every answer, itself included (its degree is 0).

    Examples
    --------
    >>> s = np.array([[[1.0, 1, 0], [1, 1, 0], [0, 0, 1]]])  # two meanings among three answers
    >>> {name: round(float(u[0]), 4) for name, u in graph_uncertainties(s).items()}
    {'num_sem_sets': 2.0, 'eigv': 2.0, 'deg': 0.4444, 'ecc': 1.0, 'kle': 0.9077}
    """
    similarity = np.asarray(similarity, dtype=np.float64)
    other = 1.0 - similarity if contra is None else np.asarray(contra, dtype=np.float64)
    entails = similarity > other
    k = similarity.shape[-1]
    weights, laplacian = _laplacian(similarity)
    values, vectors = np.linalg.eigh(laplacian)
    centred = vectors - vectors.mean(axis=-2, keepdims=True)  # each eigenvector less its mean entry
    spread = np.sum(centred**2, axis=-2)
    return {
        "num_sem_sets": _components(entails & entails.transpose(0, 2, 1) & ~np.eye(k, dtype=bool)),
        "eigv": np.clip(1.0 - values, 0.0, None).sum(axis=-1),
        "deg": (k * k - weights.sum(axis=(-2, -1))) / k**2,
        "ecc": np.sqrt(np.sum(np.where(values < ecc_threshold, spread, 0.0), axis=-1)),
        "kle": _kle(similarity, contra, kle_t),
    }


def consistency_confidences(uncertainty: dict[str, np.ndarray], samples: np.ndarray) -> dict[str, np.ndarray]:
    """Turn the consistency uncertainties into confidences in [0, 1] (the module's decreasing maps).

    Parameters
    ----------
    uncertainty : dict of str to ndarray, shape (Q,)
        From :func:`consistency_uncertainties` (any of its keys).
    samples : ndarray of int, shape (Q,)
        Each question's number of samples ``k`` (KLE's ``k^-U``).

    Returns
    -------
    dict of str to ndarray of float64, shape (Q,)
        The same keys, rounded to :data:`DECIMALS` decimals; NaN stays NaN.

    Examples
    --------
    >>> u = {"eigv": np.array([1.0, 4.0]), "deg": np.array([0.0, 0.75])}
    >>> {n: c.tolist() for n, c in consistency_confidences(u, np.array([4, 4])).items()}
    {'eigv': [1.0, 0.25], 'deg': [1.0, 0.25]}
    """
    k = np.asarray(samples, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        mapped = {name: _MAPS[name](np.asarray(u, dtype=np.float64), k) for name, u in uncertainty.items()}
    return {name: np.round(np.clip(c, 0.0, 1.0), DECIMALS) for name, c in mapped.items()}


def consistency_uncertainties(
    samples: Sequence[Sequence[str]],
    *,
    similarity: str | Callable = "jaccard",
    stem: bool = False,
    single: str = "raise",
    kle_t: float = KLE_T,
    ecc_threshold: float = ECC_THRESHOLD,
) -> dict[str, np.ndarray]:
    """Return every consistency score of each question's sampled answers, as LM-Polygraph's uncertainties.

    Questions with the same number of samples are scored together, as one ``(Q, k, k)`` batch.

    Parameters
    ----------
    samples : sequence of sequences of str
        The sampled answers, one sequence a question.
    similarity : {"jaccard", "exact", "rouge_l"} or callable, default "jaccard"
        The similarity of the graph scores (NumSemSets, EigV, Deg, Ecc, KLE); a callable follows
        :mod:`calibkit.lm.generations.similarity`'s contract. LexSim reads ROUGE-L and Jaccard.
    stem : bool, default False
        ROUGE-L's Porter stemming (LM-Polygraph's LexSim stems; needs nltk).
    single : {"raise", "nan"}, default "raise"
        A question with one sample: refused, or NaN scores.
    kle_t, ecc_threshold : float
        KLE's heat-kernel time and Ecc's eigenvalue threshold.

    Returns
    -------
    dict of str to ndarray of float64, shape (Q,)
        ``lexsim_rouge_l``, ``lexsim_jaccard``, ``num_sem_sets``, ``eigv``, ``deg``, ``ecc``,
        ``kle`` (higher = less confident).

    Raises
    ------
    ValueError
        On a question without answers, an answer that is not a string, a question with one sample
        (``single="raise"``), an unknown ``single`` or ``similarity``, or a callable's bad result.

    Examples
    --------
    >>> u = consistency_uncertainties([["Paris", "paris", "Lyon"]], similarity="exact")
    >>> u["num_sem_sets"].tolist(), u["lexsim_jaccard"].round(3).tolist()
    ([2.0], [-0.333])
    """
    similarity = check_similarity(similarity)
    if single not in SINGLE:
        raise ValueError(f"`single` must be one of {list(SINGLE)}, got {single!r}")
    counts = _checked_counts(samples, single)
    out = {name: np.full(len(counts), np.nan) for name in _MAPS}
    for k in np.unique(counts[counts >= 2]):  # one batch for each number of samples
        rows = np.flatnonzero(counts == k)
        answers = [[str(a) for a in samples[i]] for i in rows]
        rouge = rouge_l_matrices(answers, stem=stem)
        jaccard = jaccard_matrices(answers)
        built = {"jaccard": jaccard, "rouge_l": rouge}.get(similarity) if isinstance(similarity, str) else None
        matrix, contra = (built, None) if built is not None else similarity_matrices(answers, similarity, stem=stem)
        scores = {"lexsim_rouge_l": lexical_similarity(rouge), "lexsim_jaccard": lexical_similarity(jaccard)}
        scores.update(graph_uncertainties(matrix, contra, kle_t=kle_t, ecc_threshold=ecc_threshold))
        for name in _MAPS:
            out[name][rows] = scores[name]
    return out


def consistency_scores(
    samples: Sequence[Sequence[str]],
    *,
    similarity: str | Callable = "jaccard",
    stem: bool = False,
    single: str = "raise",
) -> dict[str, np.ndarray]:
    """Return every consistency score of each question's sampled answers as a confidence in [0, 1].

    :func:`consistency_uncertainties` through :func:`consistency_confidences` (the module's maps).

    Parameters
    ----------
    samples : sequence of sequences of str
    similarity : {"jaccard", "exact", "rouge_l"} or callable, default "jaccard"
    stem : bool, default False
    single : {"raise", "nan"}, default "raise"

    Returns
    -------
    dict of str to ndarray of float64, shape (Q,)
        The registry's consistency sources (higher = more confident).

    Raises
    ------
    ValueError
        As :func:`consistency_uncertainties`.

    Examples
    --------
    >>> c = consistency_scores([["Paris", "paris", "Paris"], ["4", "five", "six"]], similarity="exact")
    >>> c["eigv"].round(3).tolist(), c["lexsim_jaccard"].round(3).tolist()
    ([1.0, 0.333], [1.0, 0.0])
    """
    uncertainty = consistency_uncertainties(samples, similarity=similarity, stem=stem, single=single)
    return consistency_confidences(uncertainty, np.asarray([len(a) for a in samples]))


def _checked_counts(samples: Sequence[Sequence[str]], single: str) -> np.ndarray:
    """Each question's number of samples, after the checks of what the scores cannot read."""
    counts = []
    for i, answers in enumerate(samples):
        if isinstance(answers, str) or len(answers) == 0:
            raise ValueError(f"`samples`: question {i} has no list of answers: {answers!r}")
        wrong = [a for a in answers if not isinstance(a, str)]
        if wrong:
            raise ValueError(f"`samples`: question {i} has an answer that is not a string: {wrong[0]!r}")
        counts.append(len(answers))
    counts_array = np.asarray(counts, dtype=np.int64)
    if single == "raise" and (counts_array == 1).any():
        ones = np.flatnonzero(counts_array == 1)
        raise ValueError(
            f"`samples`: question {int(ones[0])} has one sampled answer ({ones.size} of {len(counts)} questions do): "
            "the consistency scores compare answers in pairs and are undefined with one (`single`='nan' gives NaN)"
        )
    return counts_array
