"""LLM judges checked against people: calibration on a human-labelled slice, corrected pass rates.

Judged samples (:class:`Judged`) and the human labels of some of them (:class:`HumanLabels`), read
by :func:`read_judged` (a dispatcher by file kind: the plain table, and the tools' logs that
:func:`register_judged_reader` adds) and :func:`read_labels`; :func:`judge_report` checks the
judge against people (agreement, kappa, TPR/FPR, its confidence's calibration and cross-fitted
recalibration) and corrects its pass rate (PPI++, Rogan-Gladen), per task and pooled;
:func:`compare_runs` compares two models' pass rates on one judge. The statistics are
:mod:`calibkit.metrics.judges`'.
"""

from calibkit.lm.judges.data import HumanLabels, Judged
from calibkit.lm.judges.inspect_logs import read_inspect_judged  # registers the Inspect logs' reader
from calibkit.lm.judges.lighteval import read_lighteval_judged  # registers the lighteval details' reader
from calibkit.lm.judges.readers import (
    JUDGED_READERS,
    JudgedReader,
    match_labels,
    read_judged,
    read_labels,
    register_judged_reader,
)
from calibkit.lm.judges.report import answer_sentence, compare_runs, judge_report

__all__ = [
    "JUDGED_READERS",
    "HumanLabels",
    "Judged",
    "JudgedReader",
    "answer_sentence",
    "compare_runs",
    "judge_report",
    "match_labels",
    "read_inspect_judged",
    "read_judged",
    "read_labels",
    "read_lighteval_judged",
    "register_judged_reader",
]
