# Copyright 2025 The calibkit authors. Licensed under the Apache License, Version 2.0.
"""Coverage and size of conformal prediction sets as an `evaluate` metric (calibkit)."""

import evaluate

import calibkit
from calibkit.evaluate_modules import bibtex
from calibkit.evaluate_modules.metric import SetMetric
from calibkit.metrics.settings import DEFAULTS
from calibkit.metrics.validation import check_bool

_CITATION = bibtex("sadinle2019", "romano2020", "angelopoulos2021")

_DESCRIPTION = """\
Coverage and mean size of prediction sets, such as the split-conformal sets of
`calibkit.calibrators.SplitConformal` (LAC, Sadinle et al. 2019; APS, Romano et al. 2020; RAPS,
Angelopoulos et al. 2021). A conformal predictor answers with a set of classes C(x) promised to hold
the true label with probability at least 1 - alpha; on rows neither the model nor the sets were
fitted on, coverage = mean_i 1[y_i in C(x_i)] says whether the promise holds, and set_size =
mean_i |C(x_i)| how informative the sets are (the smaller at the same coverage, the better).
coverage_per_class is the coverage among the rows of each class, which the marginal guarantee does
not bound. Computed by calibkit's functional core (`calibkit.coverage`, `calibkit.set_size`).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `bool` vectors, or a numpy array or torch tensor of bool): per sample, the
        prediction set as a boolean mask over the K classes, shape `(N, K)`, True where the class is in
        the set, as `SplitConformal.predict_sets` returns it. Lists of class indices are refused, and so
        are 0/1 integers, which look the same (a `ValueError` naming `predictions`). Token
        configuration (`evaluate.load("conformal_sets", "token")`): per sequence, `(N, L, K)`, or lists
        of per-sequence `(L_i, K)` masks.
    references (`list` of `int`): the true class of each sample, `(N,)`. Token configuration: per
        sequence, `(N, L)` or lists of `L_i` labels, where `ignore_index` marks padding.
    per_class (`bool`, defaults to `False`): also return `coverage_per_class`.
    ignore_index (`int`, defaults to `-100`): label of the rows to skip, for the coverage and the size.
Returns:
    coverage (`float`): the share of rows whose set holds the true label, in [0, 1].
    set_size (`float`): the mean number of classes in a set, in [0, K].
    coverage_per_class (`list` of `float`): with `per_class=True`, each class's coverage (NaN for a
        class no row has).
Examples:
    >>> metric = evaluate.load("conformal_sets")
    >>> sets = [[True, False, False], [True, True, False], [False, False, True], [False, True, True]]
    >>> metric.compute(predictions=sets, references=[0, 2, 2, 1])
    {'coverage': 0.75, 'set_size': 1.5}
    >>> metric.compute(predictions=sets, references=[0, 2, 2, 1], per_class=True)["coverage_per_class"]
    [1.0, 1.0, 0.5]

    Split-conformal sets at 90%, fitted on held-out rows, measured on others:

    >>> import numpy as np
    >>> from calibkit.calibrators import SplitConformal
    >>> rng = np.random.default_rng(0)
    >>> logits = rng.normal(size=(2000, 5)) * 3
    >>> labels = (logits + rng.gumbel(size=logits.shape)).argmax(axis=1)  # drawn from softmax(logits)
    >>> conformal = SplitConformal(score="lac", confidence_level=0.9).fit(logits[:1000], labels[:1000])
    >>> results = metric.compute(predictions=conformal.predict_sets(logits[1000:]), references=labels[1000:])
    >>> round(results["coverage"], 3), round(results["set_size"], 3)
    (0.91, 1.565)

    Token classification, labels padded with -100 (the padding's sets are not counted):

    >>> metric = evaluate.load("conformal_sets", "token")
    >>> sets = [[[True, False], [True, True], [False, False]], [[False, True], [True, False], [True, True]]]
    >>> metric.compute(predictions=sets, references=[[0, 1, -100], [1, 1, 0]])
    {'coverage': 0.8, 'set_size': 1.4}

    Sets as lists of class indices are refused:

    >>> evaluate.load("conformal_sets").compute(predictions=[[0, 2], [1]], references=[0, 1])
    Traceback (most recent call last):
    ...
    ValueError: `predictions` must be prediction sets as boolean masks, ...
"""

_LIMITATIONS = """\
Coverage is a check, not a score to maximise: the set of every class covers every row. Compare sets
by their size at the coverage they promise. The guarantee of split-conformal sets is marginal and in
expectation over the calibration rows: on a few hundred test rows the coverage moves by a few points
around its expectation, and a rare class may be covered less (`per_class=True` shows it;
`SplitConformal(conditional=True)` fits one quantile per class). The sets must be measured on rows
that neither the model nor the sets were fitted on.
"""

_CARD = {
    "summary": (
        "Coverage and size of conformal prediction sets: how often the sets of a text or token classifier "
        "hold the true label, and how many labels they hold (calibkit)."
    ),
    "usage": """\
```python
import calibkit
import evaluate
from calibkit.calibrators import SplitConformal

calibkit.install_evaluate_modules()  # once per environment, or `calibkit install-modules`
metric = evaluate.load("conformal_sets")  # predictions: (N, K) boolean masks, references (N,)
sets = SplitConformal(score="aps", confidence_level=0.9).fit(cal_logits, cal_labels).predict_sets(test_logits)
results = metric.compute(predictions=sets, references=test_labels)
```

Token classification: `evaluate.load("conformal_sets", "token")` takes `(N, L, K)` masks (or per-sequence
lists) and `(N, L)` labels, -100 on padding. There is no multilabel or next-token configuration.

`add_batch(predictions=..., references=...)` then `compute()`, `evaluate.combine([...])` and distributed
use (`num_process`, `process_id`, a shared `experiment_id`) work as for any `evaluate` metric. Other
ways to load it: `evaluate.load(calibkit.evaluate_module_path("conformal_sets"))` (by path: always
calibkit's, never the Hub) and `evaluate.load("calibkit/conformal_sets")` (namespaced). Set
`HF_EVALUATE_OFFLINE=1` to skip the Hub look-ups that `evaluate` tries before its cache.
""",
    "storage": """\
Batches are held as numpy arrays until `compute()` (in one process; in distributed use each process
writes them to its `evaluate` cache file as one Arrow row per batch): memory is one byte per class
of each set added.
""",
    "functional": (
        "The functional API: `calibkit.coverage(sets, labels, per_class=False)` and `calibkit.set_size(sets, "
        "labels)` on numpy arrays or torch tensors; the sets from `calibkit.calibrators.SplitConformal`."
    ),
}


def _measure(sets, labels, *, per_class: bool, ignore_index: int) -> dict:
    """The coverage and mean size of the sets, as calibkit's functional core computes them."""
    out = {
        "coverage": calibkit.coverage(sets, labels, ignore_index=ignore_index),
        "set_size": calibkit.set_size(sets, labels, ignore_index=ignore_index),
    }
    if check_bool(per_class, "per_class"):
        out["coverage_per_class"] = calibkit.coverage(sets, labels, per_class=True, ignore_index=ignore_index)
    return out


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ConformalSets(SetMetric):
    def _compute(
        self, predictions, references, per_class: bool = False, ignore_index: int = DEFAULTS.ignore_index
    ) -> dict:
        return self._run(_measure, predictions, references, per_class=per_class, ignore_index=ignore_index)
