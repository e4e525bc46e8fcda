"""Every Python block of README.md runs as written.

Each block runs in a fresh process, in a temporary folder, after a preamble that defines the
names the README leaves to the reader (``probs``, ``labels``, ``model``, ``loader``, ...) with
small random data and a tiny BERT built from a config; nothing is downloaded (the Hub is offline,
``push_to_hub`` records its call instead).
"""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)

PREAMBLE = textwrap.dedent(
    """
    import numpy as np, torch
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from datasets import Dataset
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedModel, TrainingArguments

    rng = np.random.default_rng(0)
    K, N = 5, 400
    logits = rng.normal(size=(N, K)) * 2
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    labels = rng.integers(0, K, N)
    batches = [(probs[i : i + 100], labels[i : i + 100]) for i in range(0, N, 100)]
    val_logits, val_labels, test_logits = logits[:200], labels[:200], logits[200:]
    fig, ax = plt.subplots()

    config = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=37, max_position_embeddings=32, num_labels=K)
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    val_multi_hot = (rng.random((200, K)) < 1 / (1 + np.exp(-val_logits / 2))).astype(np.float32)
    multi_label_model = BertForSequenceClassification(
        BertConfig(**{**config.to_dict(), "problem_type": "multi_label_classification"})
    )
    ids = torch.from_numpy(rng.integers(5, 64, (32, 12)))
    loader = [{"input_ids": ids[i : i + 8], "attention_mask": torch.ones_like(ids[i : i + 8]),
               "labels": torch.from_numpy(labels[i : i + 8])} for i in range(0, 32, 8)]
    rows = {"input_ids": ids.tolist(), "attention_mask": [[1] * 12] * 32, "labels": labels[:32].tolist()}
    train = val = Dataset.from_dict(rows)
    args = TrainingArguments(output_dir="out", num_train_epochs=1, per_device_train_batch_size=8,
                             eval_strategy="epoch", save_strategy="no", report_to=[], use_cpu=True)
    my_metrics = lambda eval_pred: {}
    pushed = []
    PreTrainedModel.push_to_hub = lambda self, repo_id, **kwargs: pushed.append(repo_id)  # offline

    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + __import__("os").path.abspath("rendezvous"),
                            rank=0, world_size=1)

    import os, pyarrow as pa, pyarrow.parquet as pq
    os.makedirs("s3-or-local/preds", exist_ok=True)
    for i in range(2):
        part = slice(200 * i, 200 * (i + 1))
        pq.write_table(pa.table({"probs": list(probs[part]), "labels": labels[part]}), f"s3-or-local/preds/{i}.parquet")
    """
)

DASK = textwrap.dedent(
    """
    import dask.array as da, dask.dataframe as dd
    probs, labels = da.from_array(probs, chunks=(100, K)), da.from_array(labels, chunks=100)
    frame = dd.read_parquet("s3-or-local/preds/*.parquet")
    """
)


def offline_env(tmp_path):
    """The environment of a documentation block's process: the Hub offline, caches under ``tmp_path``."""
    return {
        **os.environ,
        "HF_HOME": str(tmp_path / "hf"),
        "HF_MODULES_CACHE": str(tmp_path / "hf" / "modules"),
        "HF_HUB_OFFLINE": "1",
        "HF_EVALUATE_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }


def test_the_readme_has_its_python_blocks():
    assert len(BLOCKS) >= 1  # the rest of the Python lives in the guide: tests/test_docs_code.py


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs_as_written(index, tmp_path):
    block = BLOCKS[index]
    script = PREAMBLE + (DASK if "calibkit.io.dask" in block else "") + "\n# ---- README block ----\n" + block
    env = offline_env(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, f"README block {index + 1}:\n{block}\n{proc.stderr[-3000:]}"
