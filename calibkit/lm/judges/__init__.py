"""LLM judges checked against people: calibration on a human-labelled slice, corrected pass rates.

The judge's calibration against people, and pass rates corrected for the judge's errors
(Rogan-Gladen, prediction-powered inference).
Judged samples (:class:`Judged`) and the human labels of some of them (:class:`HumanLabels`).
"""

from calibkit.lm.judges.data import HumanLabels, Judged

__all__ = ["HumanLabels", "Judged"]
