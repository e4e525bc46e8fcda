"""Language models on multiple-choice benchmarks: calibration read from the evaluation logs.

lm-evaluation-harness scores each choice of a question by the log-likelihood of its continuation
and predicts the best; that score is a classifier's logit over the choices, so the softmax over
the choices is the model's confidence. The score is an explicit choice, named in every output,
since the harness reports three accuracies from three scores:

- ``score="loglik"`` (default): the summed log-likelihood, as the harness's ``acc``;
- ``score="chars"``: log-likelihood divided by the choice's length in characters (``acc_norm``);
- ``score="bytes"``: divided by its length in UTF-8 bytes (``acc_bytes``);
- ``score="tokens"``: divided by its length in tokens (lighteval's ``acc_norm_token``; where the
  log holds the tokens: lighteval's details, or ``choice_tokens`` in calibkit's own format).

Questions may have different numbers of choices (ARC has 3 to 5): the probabilities of a
question are its softmax over its own choices, padded with zeros, which leaves every top-label
metric (ECE, MCE, ACE is not one, RBECE, FCE, ECD, ESCE, overconfidence), Brier (the padding adds
0) and NLL as they are. Metrics over answer positions (per-class ECE, CECE, MSECE, WSECE, ECE
variance, SCE, ACE) are given only where every question has the same number of choices (a
model's preference for position A is a known bias); elsewhere they are None, and
``"positions"`` says why.

Readers (:func:`read_choices`):

- lm-evaluation-harness ``--log_samples``: ``samples_{task}_{date}.jsonl`` (one sample per line,
  every value written as a string; ``filtered_resps`` holds ``[loglik, is_greedy]`` per choice,
  twice as many with ``acc_mutual_info``, the second half unconditional). The gold index is
  derived from ``target`` (an index, a list of one index, or the text of one continuation
  without the task's ``target_delimiter``, read from the run's ``results_*.json``, default
  ``" "``) and checked against the sample's own ``acc`` (and ``acc_norm``, ``acc_bytes``); where
  ``target`` is not the gold (``multiple_input`` tasks such as Winogrande) the gold follows
  from ``acc`` when that leaves one choice. A sample whose gold cannot be derived is refused with its ``doc_id``.
- calibkit's own format, for any other tool: JSON Lines or Parquet with ``task`` (optional),
  ``choice_logprobs`` (a list per question), ``gold`` (an index) and optionally ``choice_chars``,
  ``choice_bytes`` and ``choice_tokens`` (lengths, for the normalised scores).
"""

from calibkit.lm.multiple_choice.data import (
    SCORES,
    ChoiceData,
    check_question,
    check_score,
    choice_logits,
    choice_probabilities,
)
from calibkit.lm.multiple_choice.readers import is_choice_location, read_choices
from calibkit.lm.multiple_choice.report import (
    POSITION_METRICS,
    TS_METRICS,
    at_chance,
    chance_notes,
    choice_temperature_scaling,
    format_choice_table,
    format_ts_table,
    multiple_choice_report,
)

__all__ = [
    "POSITION_METRICS",
    "SCORES",
    "TS_METRICS",
    "ChoiceData",
    "at_chance",
    "chance_notes",
    "check_question",
    "check_score",
    "choice_logits",
    "choice_probabilities",
    "choice_temperature_scaling",
    "format_choice_table",
    "format_ts_table",
    "is_choice_location",
    "multiple_choice_report",
    "read_choices",
]
