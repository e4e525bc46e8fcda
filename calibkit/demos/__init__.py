"""``calibkit demo``: a real model fine-tuned offline and every calibrator judged, one module a task.

- :mod:`~calibkit.demos.token` (``--task token``, the default): MiniLM on Twitter NER;
- :mod:`~calibkit.demos.sequence` (``--task sequence``): MiniLM on imbalanced BBC News;
- :mod:`~calibkit.demos.multilabel` (``--task multilabel``): a multi-label head on the tweets'
  entity types;
- :mod:`~calibkit.demos.llm` (``--task llm``): SmolLM2-135M-Instruct's next tokens on BBC News,
  temperature scaling judged over re-splits.
- :mod:`~calibkit.demos.rewards` (``--task rewards``): MiniLM trained as a reward model by TRL's
  ``RewardTrainer`` on BIG-bench pairs, its preferences judged and calibrated by the pairwise
  temperature, the calibrated model reloaded without calibkit (:mod:`~calibkit.demos.rewards_page`
  writes its Markdown and page).

:mod:`~calibkit.demos.classifier` is the pipeline the two classifier tasks share (fine-tune with
the callback, compare every calibrator, re-split, write the report and the best calibrated model);
:mod:`~calibkit.demos.data` loads the pip-shipped model and data. The names below are those of the
former ``calibkit.demo`` module, which now resolves here.
"""

from calibkit.demos import sequence, token
from calibkit.demos.classifier import TASKS, class_weights, run_demo, weighted_loss
from calibkit.demos.data import (
    BBC_CLASS_COUNTS,
    SPLIT,
    first_subtoken_labels,
    load_bbc_news,
    load_twitter_ner,
    model_path,
    split_indices,
)
from calibkit.demos.multilabel import run_multilabel_demo
from calibkit.demos.sequence import SEQUENCE_SPLIT

TOKEN_RECIPE = token.RECIPE
SEQUENCE_RECIPE = sequence.RECIPE

__all__ = [
    "BBC_CLASS_COUNTS",
    "SEQUENCE_RECIPE",
    "SEQUENCE_SPLIT",
    "SPLIT",
    "TASKS",
    "TOKEN_RECIPE",
    "class_weights",
    "first_subtoken_labels",
    "load_bbc_news",
    "load_twitter_ner",
    "model_path",
    "run_demo",
    "run_multilabel_demo",
    "split_indices",
    "weighted_loss",
]
