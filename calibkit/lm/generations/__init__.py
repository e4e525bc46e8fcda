"""Confidence of generated answers: calibration for language models that answer in free text.

When a model answers in its own words, its confidence is not a softmax over choices but one of:

- **given**: any numeric column of the answers' file (a tool's score: LM-Polygraph, uqlm, a judge),
  in [0, 1], used as it is;
- **verbalized**: the number the model states ("Confidence: 80%"), parsed from the answer's text
  (:func:`parse_confidence` documents the accepted forms; answers that state
  none are counted, never dropped silently);
- **white-box** scores computed with a causal LM (:func:`whitebox_confidence`): the
  answer's sequence probability, its geometric mean over tokens, and P(True) with LM-Polygraph's
  prompt;
- **agreement** of several sampled answers (:func:`read_agreement`): the majority answer's share
  of the samples, and ``exp(-SE)`` of the semantic entropy over the groups of answers that agree;
  and their **consistency** (:mod:`calibkit.lm.generations.consistency`: LM-Polygraph's LexSim,
  NumSemSets, EigV, Deg, Ecc and KLE as confidences, over a similarity of
  :mod:`calibkit.lm.generations.similarity`: exact, Jaccard, ROUGE-L or an NLI model's).

Every source calibkit computes has one name, kind and description in :mod:`calibkit.lm.sources`.

Each source is judged as a binary classifier of "the answer is right" (calibkit's 1-D binary
convention, class 1 = right): ECE, ACE, Brier, NLL, AURC and the selective accuracy, per task and
pooled, with bootstrap intervals by question (:func:`generations_report`); and its recalibration
(Platt, isotonic, histogram binning on the score) is fitted on half of the questions and judged
on the other half over re-splits, with verdicts (:func:`recalibration_resplits`). Each source
also gets an abstention threshold with a guarantee (Learn then Test: "answer above 0.62: 71%
answered, error <= 10% with 90% confidence", :func:`abstention_summary`), checked on held-out
questions over re-splits (:func:`abstention_resplits`).

Readers (:func:`read_generations`): lm-evaluation-harness ``--log_samples`` of ``generate_until``
tasks, and calibkit's generations format (JSON Lines, CSV or Parquet: ``id``, ``answer``,
``correct``, optionally ``task`` and ``question``, and any number of confidence columns).
"""

from calibkit.lm.generations.abstention import abstention_resplits, abstention_summary
from calibkit.lm.generations.agreement import (
    AGREEMENT_SOURCES,
    agreement_scores,
    answer_agreement,
    group_answers,
    normalize_answer,
    read_agreement,
)
from calibkit.lm.generations.data import Generations
from calibkit.lm.generations.readers import kind_of, read_generations
from calibkit.lm.generations.recalibrate import SCORE_MAPS, apply_score_map, fit_score_map
from calibkit.lm.generations.report import generations_report, recalibration_resplits, source_metrics
from calibkit.lm.generations.verbalized import parse_confidence, verbalized_confidence
from calibkit.lm.generations.whitebox import PTRUE_PROMPT, WHITEBOX, whitebox_confidence

__all__ = [
    "AGREEMENT_SOURCES",
    "PTRUE_PROMPT",
    "SCORE_MAPS",
    "WHITEBOX",
    "Generations",
    "abstention_resplits",
    "abstention_summary",
    "agreement_scores",
    "answer_agreement",
    "apply_score_map",
    "fit_score_map",
    "generations_report",
    "group_answers",
    "kind_of",
    "normalize_answer",
    "parse_confidence",
    "read_agreement",
    "read_generations",
    "recalibration_resplits",
    "source_metrics",
    "verbalized_confidence",
    "whitebox_confidence",
]
