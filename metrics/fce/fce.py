# Copyright 2025 The calibkit authors. Licensed under the Apache License, Version 2.0.
"""FCE as an `evaluate` metric (calibkit)."""

import evaluate

import calibkit
from calibkit.evaluate_modules import ARGS_DOC, bibtex
from calibkit.evaluate_modules.metric import CalibrationMetric
from calibkit.metrics.settings import UNSET, CalibrationSettings

_CITATION = bibtex("bihani2023")

_DESCRIPTION = """\
Fuzzy calibration error (Bihani & Rayz 2023, eq 4-6): the top-label confidence belongs to
overlapping trapezoid bins (corners t0 -/+ w/4 and t1 -/+ w/4, from the authors' code) instead of
one crisp bin; with G_m the total membership of bin m and acc_m, conf_m its membership-weighted
accuracy and confidence, FCE = sum_m G_m |acc_m - conf_m| / sum_m G_m. Less sensitive than ECE to
the skew of the confidences. Computed by calibkit's functional core (`calibkit.fce`).
"""

_KWARGS_DESCRIPTION = (
    ARGS_DOC
    + """\
    fce_bins (`int`, defaults to 15): fuzzy bins over [0, 1].
    fce_variant (`str`, defaults to `"paper"`): `"paper"`, the paper's eq 4-6; `"authors"`, FCE as
        the authors' published code computes it (memberships rounded to 3 decimals, confidence
        averaged over the correct predictions only), which reproduces their published numbers.
    n_bins, variant (deprecated): the old names of `fce_bins` and `fce_variant`, accepted with a
        `FutureWarning` until the next release.
Returns:
    fce (`float`): fuzzy calibration error, in [0, 1]; 0 is perfectly calibrated.
Examples:
    >>> metric = evaluate.load("fce")
    >>> predictions = [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]]
    >>> results = metric.compute(predictions=predictions, references=[0, 1, 1, 1])
    >>> round(results['fce'], 4)
    0.3
    >>> results = metric.compute(predictions=predictions, references=[0, 1, 1, 1], fce_variant="authors")
    >>> round(results['fce'], 4)
    0.15

    Token classification, logits and labels padded with -100 as `Trainer` gives them:

    >>> metric = evaluate.load("fce", "token")
    >>> logits = [[[2.0, -1.0], [0.5, 0.1], [-100.0, -100.0]], [[-1.0, 1.5], [0.2, 0.3], [1.0, 0.0]]]
    >>> results = metric.compute(predictions=logits, references=[[0, 1, -100], [1, 1, 0]], from_logits=True)
    >>> round(results['fce'], 4)
    0.2458
"""
)

_LIMITATIONS = """\
By default confidence is averaged over all predictions (the paper's eq 5, SPEC.md). The authors'
code averages it over the correct predictions only and rounds memberships to 3 decimals, so their
published numbers need `fce_variant="authors"`, which reproduces their `fuzzy_eval.csv` (AG News, 4
training sizes x 15 values of M). In that variant accuracy minus confidence is >= 0 in every bin:
nothing cancels, and a perfectly calibrated model does not score 0. Either way FCE is a binned
estimate that depends on `fce_bins`. What calibkit reproduces from each seed paper, and what it
cannot: calibkit's README, "Reproducing the papers" (tests in `tests/papers/`).
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Fce(CalibrationMetric):
    def _compute(
        self,
        predictions,
        references,
        fce_bins: int = UNSET.fce_bins,  # told apart from a value passed (old names)
        fce_variant: str = UNSET.fce_variant,  # told apart from a value passed (old names)
        from_logits: bool = UNSET.from_logits,
        ignore_index: int = UNSET.ignore_index,
        n_bins: int | None = None,
        variant: str | None = None,
        settings: CalibrationSettings | None = None,
    ) -> dict:
        keywords = {
            "fce_bins": fce_bins,
            "fce_variant": fce_variant,
            "from_logits": from_logits,
            "ignore_index": ignore_index,
            "n_bins": n_bins,  # deprecated names: calibkit.fce warns and resolves them
            "variant": variant,
        }
        return self._run(calibkit.fce, predictions, references, settings=settings, **keywords)
