"""Evaluate a fixed tiny BERT with the CalibrationCallback; run alone or under torchrun (gloo, CPU).

    python ddp_evaluate.py OUT.json
    python -m torch.distributed.run --nproc_per_node 2 ddp_evaluate.py OUT.json

Rank 0 writes the evaluation metrics and the world size to OUT.json. 45 samples with a batch
size of 4 per process: the distributed sampler pads the last batch, so the gather has to drop
duplicates for the numbers to match a single process.
"""

import json
import sys
import warnings

import numpy as np
import torch
from datasets import Dataset
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

from calibkit.callbacks import CalibrationCallback


def main(out: str) -> None:
    torch.manual_seed(0)
    model = BertForSequenceClassification(
        BertConfig(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=37,
            num_labels=3,
        )
    )
    with torch.no_grad():  # logits of a trained model's scale
        model.classifier.weight.mul_(60)
    rng = np.random.default_rng(1)
    ids = rng.integers(5, 64, (45, 8))
    data = Dataset.from_dict({"input_ids": ids.tolist(), "labels": rng.integers(0, 3, 45).tolist()})
    args = TrainingArguments(
        output_dir="/tmp/calibkit-ddp", per_device_eval_batch_size=4, report_to=[], use_cpu=True, disable_tqdm=True
    )
    trainer = Trainer(model=model, args=args, eval_dataset=data)
    CalibrationCallback(metrics="all", fit=(), theta=2).attach(trainer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        metrics = trainer.evaluate()
    if trainer.is_world_process_zero():
        with open(out, "w") as f:
            json.dump({"world_size": trainer.args.world_size, "metrics": metrics}, f)


if __name__ == "__main__":
    main(sys.argv[1])
