"""Convert the fuzzy-binning authors' published predictions into the test data, once.

Bihani & Rayz (2023) publish, in https://github.com/bihani-g/fce, the per-run inputs and outputs
of their paper demo (``paper_demo/results/``): for AG News fine-tuned on 100, 1,000, 5,000 and
10,000 samples, the 7,600 test logits, labels and predicted labels as pickled lists of torch
tensors, and ``fuzzy_eval.csv``, their ECE, FCE and OF for M = 1..15. ``tests/papers`` checks
calibkit's ``fce(..., variant="authors")`` against that CSV. Pickles can run code when loaded,
so the tests never read them: this script reads them once, with an unpickler that accepts only
the three globals a pickled tensor list needs (and loads each tensor's storage with
``torch.load(weights_only=True)``), and writes plain ``.npz`` files (``allow_pickle=False``
reads them) next to a verbatim copy of the CSV, under ``tests/data/fce_authors/``.

Each ``agnews<size>.npz`` holds ``logits`` (N, 4) float32, as published; ``probs`` (N, 4)
float32, ``torch.softmax(logits[i], 0)`` row by row exactly as their ``binning.py`` computes
the probabilities its metrics read; ``labels`` and ``predicted`` (N,) int8. The IMDB and
20 Newsgroups predictions are not converted: they are Git LFS files absent from the mirror
this was made from (their CSV rows are kept, and listed as not checked in the tests).

Usage (a clone of the authors' repository, bare or not)::

    git clone https://github.com/bihani-g/fce /tmp/fce
    python benchmarks/fce_authors_data.py /tmp/fce
"""

from __future__ import annotations

import argparse
import collections
import io
import pickle
import subprocess
from pathlib import Path

import numpy as np
import torch
import torch._utils

SOURCE = "https://github.com/bihani-g/fce"
COMMIT = "10f95e085da609d82e9eb754d6e8c43b647912c6"  # HEAD, 2024-01-17; the results date from 0c905b6 (2023-04-30)
SIZES = (100, 1000, 5000, 10000)
OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "fce_authors"


def _storage_from_bytes(data: bytes):
    # What torch.storage._load_from_bytes does, without running arbitrary pickled code.
    return torch.load(io.BytesIO(data), weights_only=True)


class _TensorListUnpickler(pickle.Unpickler):
    """Accepts a pickled list of CPU tensors and nothing else."""

    ALLOWED = {
        ("torch._utils", "_rebuild_tensor_v2"): torch._utils._rebuild_tensor_v2,
        ("torch.storage", "_load_from_bytes"): _storage_from_bytes,
        ("collections", "OrderedDict"): collections.OrderedDict,
    }

    def find_class(self, module: str, name: str):
        try:
            return self.ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"refusing the global {module}.{name}") from None


def _git_show(repo: Path, path: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), "show", f"{COMMIT}:{path}"], check=True, capture_output=True).stdout


def _tensors(repo: Path, name: str) -> list[torch.Tensor]:
    tensors = _TensorListUnpickler(io.BytesIO(_git_show(repo, f"paper_demo/results/{name}.pickle"))).load()
    if not isinstance(tensors, list) or not all(isinstance(t, torch.Tensor) for t in tensors):
        raise ValueError(f"{name}.pickle is not a list of tensors")
    return tensors


def convert(repo: Path, out: Path = OUT) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for size in SIZES:
        logits = _tensors(repo, f"predict_probsagnews{size}")
        labels = _tensors(repo, f"labelsagnews{size}")
        predicted = _tensors(repo, f"predicted_labelsagnews{size}")
        probs = np.array([torch.softmax(z, 0).numpy() for z in logits])  # their binning.py, row by row
        arrays = {
            "logits": torch.stack(logits).numpy(),
            "probs": probs,
            "labels": np.array([int(y) for y in labels], dtype=np.int8),
            "predicted": np.array([int(y) for y in predicted], dtype=np.int8),
        }
        assert arrays["logits"].dtype == probs.dtype == np.float32 and probs.shape == (len(labels), 4)
        path = out / f"agnews{size}.npz"
        np.savez_compressed(path, **arrays)
        written.append(path)
    csv = out / "fuzzy_eval.csv"
    csv.write_bytes(_git_show(repo, "paper_demo/results/fuzzy_eval.csv"))
    written.append(csv)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", type=Path, help=f"a git clone of {SOURCE} (holding commit {COMMIT[:7]})")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    for path in convert(args.repo, args.out):
        print(path, path.stat().st_size)


if __name__ == "__main__":
    main()
