# Copyright 2025 The calibkit authors. Licensed under the Apache License, Version 2.0.
"""ACE as an `evaluate` metric (calibkit)."""

import evaluate

import calibkit
from calibkit.evaluate_modules import ARGS_DOC, bibtex
from calibkit.evaluate_modules.metric import CalibrationMetric
from calibkit.metrics.settings import UNSET, CalibrationSettings

_CITATION = bibtex("nixon2019")

_DESCRIPTION = """\
Adaptive calibration error (Nixon et al. 2019), class-conditional with equal-mass ranges: for
each class k the probabilities p_ik are sorted and cut into `ace_ranges` ranges holding the same
number of samples; ACE = 1/(K R) sum_k sum_r |acc_rk - conf_rk|, where acc_rk is the fraction of
samples of range r whose label is k and conf_rk their mean p_k. Exact: computed by calibkit's
one-shot functional core (`calibkit.ace`) on all the predictions held, ties resolved so the
result does not depend on the order of the samples.
"""

_KWARGS_DESCRIPTION = (
    ARGS_DOC
    + """\
    ace_ranges (`int`, defaults to 15): equal-mass ranges per class.
    n_ranges (deprecated): the old name of `ace_ranges`, accepted with a `FutureWarning` until the next release.
Returns:
    ace (`float`): adaptive calibration error, in [0, 1]; 0 is perfectly calibrated.
Examples:
    >>> metric = evaluate.load("ace")
    >>> predictions = [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]]
    >>> results = metric.compute(predictions=predictions, references=[0, 1, 1, 1])
    >>> round(results['ace'], 4)
    0.3

    Token classification, logits and labels padded with -100 as `Trainer` gives them:

    >>> metric = evaluate.load("ace", "token")
    >>> logits = [[[2.0, -1.0], [0.5, 0.1], [-100.0, -100.0]], [[-1.0, 1.5], [0.2, 0.3], [1.0, 0.0]]]
    >>> results = metric.compute(predictions=logits, references=[[0, 1, -100], [1, 1, 0]], from_logits=True)
    >>> round(results['ace'], 4)
    0.2932
"""
)

_LIMITATIONS = """\
Equal-mass ranges adapt to where the probabilities are, but a class column is dominated by
near-zero probabilities, so most ranges measure how well the model says "not this class". Needs at
least `ace_ranges` samples; slower than the binned metrics because it sorts.
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Ace(CalibrationMetric):
    def _compute(
        self,
        predictions,
        references,
        ace_ranges: int = UNSET.ace_ranges,  # told apart from a value passed (old names)
        from_logits: bool = UNSET.from_logits,
        ignore_index: int = UNSET.ignore_index,
        n_ranges: int | None = None,
        settings: CalibrationSettings | None = None,
    ) -> dict:
        keywords = {"ace_ranges": ace_ranges, "from_logits": from_logits, "ignore_index": ignore_index}
        keywords["n_ranges"] = n_ranges  # deprecated name: calibkit.ace warns and resolves it
        return self._run(calibkit.ace, predictions, references, settings=settings, **keywords)
