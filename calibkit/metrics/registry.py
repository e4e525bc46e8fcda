"""Every metric calibkit reports, once: its name, the sums it needs, its settings, its paper.

Each :class:`Metric` says which per-bin sums of :class:`~calibkit.metrics.statistics.CalibrationStatistics` it reads,
which :class:`~calibkit.metrics.settings.CalibrationSettings` it depends on, whether higher is better or 0 is best on
a signed scale, which ``evaluate`` module returns it, and the function that computes it from the sums. Everything that
lists metrics reads :data:`REGISTRY`: :func:`report_from_statistics` (hence the functional API,
:func:`calibkit.calibration_report`, the accumulator and the bootstrap), the ``evaluate`` modules and their cards, the
callback's choices, the comparison table, the CLI and the model card. Adding a metric built from existing sums is one
formula (``formulas.py``), one entry here and, if it wants its own function, one face in ``functional/<family>.py``
(see CONTRIBUTING.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from calibkit.metrics import _kernels as kernels
from calibkit.metrics.formulas import (
    ece_from_table,
    ece_l2_debiased_from_table,
    ece_l2_from_table,
    esce_from_table,
    fce_from_table,
    mce_from_table,
    overconfidence_from_sums,
    rbece_from_table,
)
from calibkit.metrics.rejection import REJECTION
from calibkit.metrics.settings import CalibrationSettings
from calibkit.metrics.statistics import CalibrationStatistics, SumsPlan
from calibkit.metrics.sums import HELD_ONLY, Sums

SUMS = ("top", "rows", "classwise", "ace", "fuzzy", "selective")
"""The groups of sums a pass can fill: ``top`` (top-label bins, one table per bin count),
``rows`` (per-entry logs and squares: ECD, NLL, Brier), ``classwise`` (per-column bins, SCE),
``ace`` (fine per-column buckets), ``fuzzy`` (FCE) and ``selective`` (fine buckets of the
top-label confidence: AURC, selective accuracy). The scalars (n, correct, confidence and
count of wrong predictions) are always kept."""


@dataclass(frozen=True)
class Metric:
    """One metric of the registry.

    Parameters
    ----------
    name : str
        Its key in every report and its function's name where it has one.
    summary : str
        One line: what it measures.
    compute : callable or None
        ``compute(sums: Sums) -> float | ndarray``; None for a column that the comparison table computes from
        the predicted classes (``macro_f1``), or a rejection metric (``REJECTION_METRICS``: from the rows).
    sums : frozenset of str
        The groups of :data:`SUMS` it reads.
    top_bins : str or None
        The setting that gives the bin count of the top-label table it reads.
    settings : tuple of str
        Every setting its value depends on (besides ``from_logits`` and ``ignore_index``).
    higher_is_better : bool
        Accuracy-like; else lower is better.
    signed : bool
        0 is best and the sign says the direction (ECD, ESCE): compared by absolute value.
    per_class : bool
        An array of one value per class, not a scalar.
    over_classes : bool
        Defined over the classes as columns or groups (class-wise, per class, or a summary of per-class values),
        not over the top label alone: meaningful only where every row has the same classes (a fixed number of choices).
    in_report : bool
        One of :data:`METRICS` (what :func:`calibkit.calibration_report` returns by default);
        else returned when asked for by name (:data:`ON_REQUEST`).
    in_table : bool
        A column of the comparison table (``calibkit report``/``demo``) and of the model card.
    logged : bool
        Logged by :class:`calibkit.CalibrationCallback` by default (:data:`LOGGED`).
    module : str or None
        The ``evaluate`` module folder (``metrics/<module>/``) that returns it.
    papers : tuple of str
        Keys of :data:`calibkit.metrics.papers.PAPERS`.
    extra : tuple of (str, callable)
        Further keys it adds to a report, with their functions (ACE's ``ace_error_bound``).
    held : bool
        Needs every row at once (smECE: its bandwidth depends on all of them) and has no streamed form: computed
        where the rows are held (the functions, :func:`calibkit.calibration_report`, the ``evaluate`` module), asked
        for by name (``HELD``), refused by the streaming doors.
    """

    name: str
    summary: str
    compute: Callable[[Sums], Any] | None
    sums: frozenset[str] = frozenset()
    top_bins: str | None = None
    settings: tuple[str, ...] = ()
    higher_is_better: bool = False
    signed: bool = False
    per_class: bool = False
    over_classes: bool = False
    in_report: bool = True
    in_table: bool = True
    logged: bool = False
    module: str | None = None
    papers: tuple[str, ...] = ()
    extra: tuple[tuple[str, Callable[[Sums], Any]], ...] = ()
    held: bool = False


def _rows(slot: int) -> Callable[[Sums], float]:
    return lambda s: s.scalar(slot) / s.n


_TOP = frozenset({"top"})

REGISTRY: tuple[Metric, ...] = (
    Metric(
        "accuracy",
        "accuracy of the top-label prediction (of the class-1 probability > 0.5 for 1-D binary input)",
        lambda s: s.scalar(kernels.S_CORRECT) / s.n,
        higher_is_better=True,
        in_report=False,
    ),
    Metric(
        "macro_f1",
        "macro-averaged F1 of the predicted classes (computed by the comparison from the predictions)",
        None,
        higher_is_better=True,
        in_report=False,
    ),
    Metric(
        "ece",
        "expected calibration error: the bin-weighted mean |accuracy - confidence|",
        lambda s: ece_from_table(s.top(s.settings.n_bins)),
        _TOP,
        "n_bins",
        ("n_bins",),
        logged=True,
        module="ece",
        papers=("guo2017",),
    ),
    Metric(
        "mce",
        "maximum calibration error: the largest |accuracy - confidence| of a non-empty bin",
        lambda s: mce_from_table(s.top(s.settings.n_bins)),
        _TOP,
        "n_bins",
        ("n_bins",),
        in_table=False,
        module="ece",
        papers=("naeini2015",),
    ),
    Metric(
        "ece_l2",
        "L2 calibration error: the root of the bin-weighted mean squared gap (torchmetrics' norm='l2')",
        lambda s: ece_l2_from_table(s.top(s.settings.n_bins)),
        _TOP,
        "n_bins",
        ("n_bins",),
        in_table=False,
        module="ece_l2",
        papers=("kumar2019",),
    ),
    Metric(
        "ece_l2_debiased",
        "debiased L2 calibration error: each bin's squared gap less its sampling variance",
        lambda s: ece_l2_debiased_from_table(s.top(s.settings.n_bins)),
        _TOP,
        "n_bins",
        ("n_bins",),
        in_table=False,
        module="ece_l2",
        papers=("kumar2019",),
    ),
    Metric(
        "ace",
        "adaptive calibration error: class-wise, over equal-mass ranges",
        lambda s: s.ace[0],
        frozenset({"ace"}),
        None,
        ("ace_ranges",),
        module="ace",
        over_classes=True,
        papers=("nixon2019",),
        extra=(("ace_error_bound", lambda s: s.ace[1]),),
    ),
    Metric(
        "sce",
        "static calibration error: class-wise ECE over every class column",
        lambda s: s.sce,
        frozenset({"classwise"}),
        None,
        ("sce_bins",),
        module="sce",
        over_classes=True,
        papers=("nixon2019",),
    ),
    Metric(
        "subset_ece",
        "per-class ECE: top-label ECE on the samples of each true class",
        lambda s: s.class_ece,
        _TOP,
        "n_bins",
        ("n_bins",),
        per_class=True,
        in_table=False,
        module="cece",
        over_classes=True,
        papers=("obadinma2021",),
    ),
    Metric(
        "cece",
        "contraharmonic ECE: sum of squared per-class ECEs over their sum",
        lambda s: s.class_wise["cece"],
        _TOP,
        "n_bins",
        ("n_bins",),
        logged=True,
        module="cece",
        over_classes=True,
        papers=("obadinma2021",),
    ),
    Metric(
        "msece",
        "mean per-class ECE",
        lambda s: s.class_wise["msece"],
        _TOP,
        "n_bins",
        ("n_bins",),
        module="cece",
        over_classes=True,
        papers=("obadinma2021",),
    ),
    Metric(
        "wsece",
        "support-weighted mean per-class ECE",
        lambda s: s.class_wise["wsece"],
        _TOP,
        "n_bins",
        ("n_bins",),
        module="cece",
        over_classes=True,
        papers=("obadinma2021",),
    ),
    Metric(
        "ece_variance",
        "variance of the per-class ECEs around the overall ECE",
        lambda s: s.class_wise["ece_variance"],
        _TOP,
        "n_bins",
        ("n_bins",),
        module="cece",
        over_classes=True,
        papers=("obadinma2021",),
    ),
    Metric(
        "rbece",
        "region-balanced ECE: unweighted mean gap over the bins holding more than theta samples",
        lambda s: rbece_from_table(s.top(s.settings.rbece_bins), s.settings.theta),
        _TOP,
        "rbece_bins",
        ("rbece_bins", "theta"),
        logged=True,
        module="rbece",
        papers=("dawkins2022",),
    ),
    Metric(
        "fce",
        "fuzzy calibration error: ECE over overlapping trapezoid bins",
        lambda s: fce_from_table(s.statistics.fuzzy, s.settings.fce_variant),
        frozenset({"fuzzy"}),
        None,
        ("fce_bins", "fce_variant"),
        logged=True,
        module="fce",
        papers=("bihani2023",),
    ),
    Metric(
        "overconfidence",
        "overconfidence: mean top-label confidence of the wrong predictions",
        lambda s: overconfidence_from_sums(s.scalar(kernels.S_WRONG_CONF), s.scalar(kernels.S_WRONG)),
        module="overconfidence",
        papers=("bihani2023",),
    ),
    Metric(
        "ecd",
        "entropic calibration difference: > 0 over-confident, < 0 under-confident",
        _rows(kernels.S_ECD),
        frozenset({"rows"}),
        None,
        ("eps",),
        signed=True,
        logged=True,
        module="ecd",
        papers=("sumler2025",),
    ),
    Metric(
        "esce",
        "expected signed calibration error: < 0 over-confident",
        lambda s: esce_from_table(s.top(s.settings.esce_bins)),
        _TOP,
        "esce_bins",
        ("esce_bins",),
        signed=True,
        logged=True,
        module="esce",
        papers=("sumler2025",),
    ),
    Metric(
        "brier",
        "Brier score: mean squared distance to the one-hot label",
        _rows(kernels.S_BRIER),
        frozenset({"rows"}),
        module="brier",
        papers=("brier1950",),
    ),
    Metric(
        "nll",
        "negative log-likelihood of the true label",
        _rows(kernels.S_NLL),
        frozenset({"rows"}),
        None,
        ("eps",),
        module="nll",
        papers=("galdran",),
    ),
    Metric(
        "aurc",
        "area under the risk-coverage curve: the error rate of the k most confident inputs, averaged over k",
        lambda s: s.selective["aurc"][0],
        frozenset({"selective"}),
        in_report=False,
        in_table=False,
        module="selective",
        papers=("geifman2017",),
        extra=(("aurc_error_bound", lambda s: s.selective["aurc"][1]),),
    ),
    Metric(
        "selective_accuracy",
        "selective accuracy: the accuracy on the `coverage` share of inputs the model is most confident about",
        lambda s: s.selective["selective_accuracy"][0],
        frozenset({"selective"}),
        None,
        ("coverage",),
        higher_is_better=True,
        in_report=False,
        in_table=False,
        module="selective",
        papers=("liang2023",),
        extra=(("selective_accuracy_error_bound", lambda s: s.selective["selective_accuracy"][1]),),
    ),
    Metric(
        "smece",
        "smooth ECE: the kernel-smoothed mean |accuracy - confidence| at its own bandwidth",
        lambda s: s.smooth[0],
        in_report=False,
        in_table=False,
        module="smece",
        papers=("blasiok2024",),
        extra=(("smece_bandwidth", lambda s: s.smooth[1]),),
        held=True,
    ),
    Metric(
        "brier_miscalibration",
        "the top label's Brier score miscalibration (CORP): what isotonic recalibration of its confidence removes",
        lambda s: s.decomposition["miscalibration"],
        in_report=False,
        module="score_decomposition",
        papers=("dimitriadis2021",),
        held=True,
    ),
    Metric(
        "brier_discrimination",
        "the top label's Brier score discrimination (CORP): what its recalibrated confidence knows beyond the accuracy",
        lambda s: s.decomposition["discrimination"],
        higher_is_better=True,
        in_report=False,
        module="score_decomposition",
        papers=("dimitriadis2021",),
        held=True,
    ),
)
REGISTRY += tuple(Metric(n, s, None, higher_is_better=h, in_report=False, in_table=False) for n, s, h in REJECTION)
"""Every metric, in report and table order (the two task scores first, in tables only); the rejection metrics last."""

REJECTION_METRICS = ("prr", "prr_at", "roc_auc", "pr_auc", "aurc", "augrc", "risk_at_coverage", "coverage_at_risk")
"""How a confidence ranks answers by quality (``calibkit.metrics.rejection``: held rows, no sums, no streaming door)."""

_BY_NAME = {m.name: m for m in REGISTRY}

METRICS: tuple[str, ...] = tuple(m.name for m in REGISTRY if m.in_report)
"""Every metric :func:`calibkit.calibration_report` returns, in its order."""

ON_REQUEST: tuple[str, ...] = tuple(
    m.name for m in REGISTRY if not m.in_report and not m.held and m.compute is not None and m.name != "accuracy"
)
"""Metrics returned only when asked for by name (``metrics=["aurc"]``): they rank the inputs (a sort of every row)."""

HELD: tuple[str, ...] = tuple(m.name for m in REGISTRY if m.held)
"""Metrics that need every row at once (smECE), asked for by name: the one-shot doors (the functions, the report,
the ``evaluate`` modules) give them; the streaming doors refuse them, naming the doors that give them."""

TABLE_METRICS: tuple[str, ...] = tuple(m.name for m in REGISTRY if m.in_table)
"""The columns of the comparison table and the model card, in order."""
OVER_CLASSES: tuple[str, ...] = tuple(m.name for m in REGISTRY if m.over_classes)
"""The metrics defined over the classes (see :class:`Metric`'s ``over_classes``)."""

MULTILABEL_TABLE: tuple[str, ...] = ("ece", "cece", "ece_variance", "brier", "nll")
"""A multi-label comparison's columns: macro ECE, Brier, NLL over the labels; CECE, ECE variance of their ECEs."""

LOGGED: tuple[str, ...] = tuple(m.name for m in REGISTRY if m.logged)
"""What :class:`calibkit.CalibrationCallback` logs at every evaluation by default: the seed papers' metrics
(class-wise, region, fuzzy, entropic) and the ECE they are read against."""

PREFERENCE_METRICS: tuple[str, ...] = ("accuracy", "ece", "brier", "nll", "aurc", "mean_confidence")
"""A reward model's numbers on pairs (``calibkit.metrics.preferences``); its re-splits judge ECE to AURC."""
JUDGE_METRICS: tuple[str, ...] = ("ece", "esce", "brier", "nll")
"""An LLM judge's confidence against people's labels (``calibkit.lm.judges``)."""


def metric(name: str) -> Metric:
    """Return the registry entry of metric ``name``.

    Parameters
    ----------
    name : str
        A metric of :data:`REGISTRY`.

    Returns
    -------
    Metric

    Raises
    ------
    ValueError
        Naming the known metrics, when ``name`` is not one.
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown metric {name!r}; known: {list(_BY_NAME)}") from None


def higher_is_better(name: str) -> bool:
    """Tell whether a larger value of metric ``name`` is better.

    Parameters
    ----------
    name : str
        A metric of :data:`REGISTRY`.

    Returns
    -------
    bool
    """
    return metric(name).higher_is_better


def signed(name: str) -> bool:
    """Tell whether metric ``name`` is signed (0 is best; compared by absolute value).

    Parameters
    ----------
    name : str
        A metric of :data:`REGISTRY`.

    Returns
    -------
    bool
    """
    return metric(name).signed


_MODULE_ORDER = {name: i for i, name in enumerate(dict.fromkeys(m.module for m in REGISTRY if m.module))}


def module_metrics() -> dict[str, tuple[str, ...]]:
    """Map each ``evaluate`` module folder to the metrics it returns.

    Returns
    -------
    dict of str to tuple of str
        Module folder -> its metrics, in registry order, per-class ones last; the folders in
        the order of their first metric.
    """
    out: dict[str, tuple[str, ...]] = {}
    for m in sorted(REGISTRY, key=lambda m: m.per_class):  # stable: registry order otherwise
        if m.module is not None:
            out[m.module] = (*out.get(m.module, ()), m.name)
    return dict(sorted(out.items(), key=lambda item: _MODULE_ORDER[item[0]]))


CONFIDENCE_METRICS: tuple[str, ...] = ("ece", "ace", "brier", "nll")
"""What a confidence that an outcome holds (a generated answer is right) is judged by, in the 1-D binary convention:
its calibration (ECE, ACE), its proper scores (Brier, NLL) (``calibkit.lm.generations``); ranking: REJECTION_METRICS."""

HARNESS_METRICS: tuple[str, ...] = ("ece", "brier", "nll", "aurc")
"""The rows calibkit adds to an evaluation tool's results table by default (``calibkit.plugins``):
calibration (ECE), the proper scores (Brier, NLL) and the ranking (AURC)."""

HEADLINE: tuple[str, ...] = ("ece", "cece", "esce", "brier", "accuracy", "nll", "aurc")
"""The numbers a report page puts in its summary, in this order, those the report has (``calibkit.plots.pages``):
at most :data:`HEADLINE_SHOWN` of them."""

HEADLINE_SHOWN = 5
"""How many headline numbers a report page's summary shows (one line at 1280 px)."""

REPORT_FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Overall (top label)", ("ece", "ace", "sce", "rbece", "fce", "overconfidence")),
    ("Classes", ("cece", "msece", "wsece", "ece_variance")),
    ("Over- or under-confident", ("ecd", "esce")),
    ("Accuracy and proper scores", ("accuracy", "macro_f1", "brier", "nll", "brier_miscalibration",
                                    "brier_discrimination")),
)  # fmt: skip
"""The metric families of a report page, each a group of rows (or a table of its own when many methods are compared)."""

MULTILABEL_OVER_LABELS: tuple[str, ...] = ("cece", "msece", "wsece", "ece_variance")
"""A multi-label report's metrics over the labels (a label's ECE is one class's): the class-wise family."""

MULTILABEL_BINNED: tuple[str, ...] = ("ece", "mce", "ece_l2", "ece_l2_debiased", "ace", "sce", "rbece", "fce")
"""A multi-label page's binned calibration errors per label; its other metrics (gaps, proper scores): a second table."""


def leans_one_way(row: dict, /) -> bool:
    """Say whether every bin of the ECE leans the same way, from the row alone: ``|ESCE| == ECE``.

    ESCE weighs each bin's gap ``acc_b - conf_b`` by ``n_b / N`` (the accuracy minus the mean confidence,
    whatever the bins); ECE weighs them unsigned: ``ECE >= |ESCE|``, equal when no bin leans the other way.

    Parameters
    ----------
    row : dict
        A report's values by metric name (``ece`` and ``esce``).

    Returns
    -------
    bool
        True when both are known and ``|ESCE|`` equals ECE (to 1e-6 of it: round-off).
    """
    ece, esce = (math.nan if row.get(m) is None else row[m] for m in ("ece", "esce"))
    return math.isclose(abs(esce), ece, rel_tol=1e-6, abs_tol=1e-12)  # False for a NaN


def headline(row: dict, /) -> list[str]:
    """Return the :data:`HEADLINE` metrics that ``row`` holds, at most :data:`HEADLINE_SHOWN`.

    Where every bin leans the same way (:func:`leans_one_way`), ESCE is ECE with a sign: it is left
    out (the next metric takes its place) and the page's answer says the direction in words.

    Parameters
    ----------
    row : dict
        A report's values by metric name (a value of None counts as absent).

    Returns
    -------
    list of str
    """
    return [m for m in HEADLINE if row.get(m) is not None and not (m == "esce" and leans_one_way(row))][:HEADLINE_SHOWN]


NEXT_TOKEN_METRICS: tuple[str, ...] = tuple(m for m in METRICS if m != "ace")
"""The default report over a vocabulary (``next_token=True``) or over :data:`WIDE_CLASSES` classes or more: ACE
only when asked for by name, as its sums are K x 1,026 buckets (3.2 GB at K = 128,000) where every other metric's
grow with the entries (2 CPU cores, V = 32,000: ACE alone 650 tokens/s, ECE 9,100; benchmarks/causal_lm.py; at
16,000 classes ACE alone costs 13x what it costs at 1,000 on the same entries, benchmarks/vocabulary_cost.py)."""

WIDE_CLASSES: int = kernels.COMPACT_CLASSES
"""From this many classes on (2,048, where the sums keep rows for what occurs, SPEC.md) the default report of a door
that knows the classes before its pass (the one-shot report) leaves ACE out, as over a vocabulary: a 16,000-label
product or entity head is a vocabulary by its cost."""


def metric_names(
    metrics: Iterable[str] | str | None,
    settings: CalibrationSettings | None = None,
    *,
    streaming: bool = False,
    num_classes: int | None = None,
) -> tuple[str, ...]:
    """Validate a choice of metrics.

    ``accuracy`` may be named too (it is in every report).

    Parameters
    ----------
    metrics : iterable of str, str or None
        Names from :data:`METRICS` or :data:`ON_REQUEST`; a string names one metric; None means
        all of :data:`METRICS`, or :data:`NEXT_TOKEN_METRICS` (ACE by name only) with
        ``settings.next_token`` or ``num_classes >= WIDE_CLASSES``.
    settings : CalibrationSettings, optional
        The settings of the door (the default report over a vocabulary leaves ACE out).
    streaming : bool, default False
        The door keeps sums, not rows: the metrics of ``HELD`` are refused.
    num_classes : int, optional
        The classes of the input, where the door knows them before its pass (the default report
        over :data:`WIDE_CLASSES` classes or more leaves ACE out).

    Returns
    -------
    tuple of str
        The names, in the order given.

    Raises
    ------
    ValueError
        When ``metrics`` is empty, not an iterable of strings, or names an unknown metric (or, with
        ``streaming``, one of ``HELD``).
    """
    if metrics is None:
        vocabulary = settings is not None and settings.next_token
        return NEXT_TOKEN_METRICS if vocabulary or (num_classes or 0) >= WIDE_CLASSES else METRICS
    names = (metrics,) if isinstance(metrics, str) else metrics
    try:
        names = tuple(names)
    except TypeError:
        raise ValueError(f"`metrics` must be a metric name or an iterable of names, got {metrics!r}") from None
    if not names:
        raise ValueError("`metrics` is empty: name at least one metric")
    unknown = [m for m in names if not isinstance(m, str) or m not in (*METRICS, *ON_REQUEST, *HELD, "accuracy")]
    if unknown:
        raise ValueError(f"`metrics` has unknown names {unknown}; known: {[*METRICS, *ON_REQUEST, *HELD]}")
    held = [m for m in names if m in HELD]
    if streaming and held:
        raise ValueError(HELD_ONLY.format(", ".join(held)))
    return names


def plan(metrics: Iterable[str], settings: CalibrationSettings) -> SumsPlan:
    """Plan the sums that ``metrics`` need under ``settings``: fewer metrics skip the costlier sums.

    Parameters
    ----------
    metrics : iterable of str
        Names of :data:`REGISTRY`.
    settings : CalibrationSettings
        The bin counts and clip to fill the sums with.

    Returns
    -------
    SumsPlan
    """
    chosen = [metric(name) for name in metrics]
    top = sorted({getattr(settings, m.top_bins) for m in chosen if m.top_bins is not None})
    groups = frozenset(g for m in chosen for g in m.sums if g != "top")
    return SumsPlan(tuple(top), groups, settings.fce_bins, settings.sce_bins, settings.eps)


def report_from_statistics(
    statistics: CalibrationStatistics,
    metrics: Iterable[str] | None = None,
    settings: CalibrationSettings | None = None,
    *,
    ace_partials: tuple[np.ndarray, np.ndarray] | None = None,
    selective_rows: tuple[np.ndarray, np.ndarray] | None = None,
    smooth_rows: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Evaluate metrics on accumulated statistics.

    Parameters
    ----------
    statistics : CalibrationStatistics
        Sums filled for at least these metrics (see ``plan()``).
    metrics : iterable of str, optional
        Names from :data:`METRICS` (default: all).
    settings : CalibrationSettings, optional
        Default: SPEC.md's defaults. Must be those the statistics were filled with.
    ace_partials : tuple of ndarray, optional
        Exact sums of the ACE buckets a range boundary cuts (from a further pass over the data):
        ACE is then exact and ``ace_error_bound`` 0.
    selective_rows : tuple of ndarray, optional
        Every row's top-label confidence and error: AURC and the selective accuracy are then
        exact and their bounds 0.
    smooth_rows : tuple of ndarray, optional
        Every row's prediction and outcome in smECE's convention (``calibkit.metrics.smooth``),
        which the metrics of ``HELD`` need.

    Returns
    -------
    dict
        The metrics asked for, in registry order, then the extra keys (``ace_error_bound``,
        ``aurc_error_bound``, ...), ``accuracy``, ``n`` and ``num_classes``.
    """
    settings = CalibrationSettings() if settings is None else settings
    wanted = set(metric_names(metrics, settings))
    sums = Sums(statistics, settings, ace_partials, selective_rows, smooth_rows)
    out: dict[str, Any] = {}
    extras: dict[str, Any] = {}
    for m in REGISTRY:
        if m.name in wanted and m.compute is not None and m.name != "accuracy":
            out[m.name] = m.compute(sums)
            for key, fn in m.extra:
                extras[key] = fn(sums)
    out.update(extras)
    out["accuracy"] = metric("accuracy").compute(sums)
    out["n"] = int(sums.n)
    out["num_classes"] = statistics.num_classes
    return out
