"""calibkit's metrics in Inspect AI's own results: a scorer wrapper and four metrics.

Three lines in an Inspect task put calibkit's ECE, Brier, NLL and AURC beside Inspect's accuracy,
in ``inspect eval``'s output and the eval log's ``results``::

    from calibkit.plugins.inspect_ai import calibrated

    Task(dataset=..., solver=multiple_choice(), scorer=calibrated(choice()),
         config=GenerateConfig(logprobs=True, top_logprobs=5))

:func:`calibrated` wraps any scorer: its score is kept as it is, and the confidence of the
sample's answer is recorded in ``Score.metadata["calibkit"]`` (``{"source", "confidence"}``),
computed from the output's logged token log-probabilities exactly as
:func:`calibkit.lm.inspect_logs.read_inspect_logs` reads them from the log afterwards (one
function, :func:`calibkit.lm.inspect_logs.output_sources`): ``letter`` (the chosen letter's
probability among the choice letters) for a multiple-choice sample, ``sequence`` otherwise, or
the source named. The metrics :func:`ece`, :func:`brier`, :func:`nll` and :func:`aurc` read it
and the score (right when Inspect's ``value_to_float`` gives at least 0.5) and are computed by
:func:`calibkit.lm.generations.source_metrics`, so they equal
``generations_report(read_inspect_logs(log))`` on the same samples.

An output whose logged tokens do not spell its text is refused with a ``ValueError`` (the sample
errors, with the reason): Inspect's ``hf`` provider samples by default and logs the most likely
token at each step, not the sampled one (run it with ``-M do_sample=False``); so is an output
without log-probabilities (``logprobs=True`` not asked). A sample without a confidence (no
output, a multiple-choice answer with no letter among its tokens) is left out of the metrics, as
:func:`calibkit.lm.generations.source_metrics` leaves it out.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, accuracy, metric, scorer, stderr
from inspect_ai.solver import TaskState
from inspect_ai.util import registry_info

from calibkit.lm.generations import source_metrics
from calibkit.lm.inspect_logs import LETTERS, SHUFFLED, SOURCES, answer_tokens, output_sources, score_value
from calibkit.lm.judges import HumanLabels, Judged, match_labels, read_labels
from calibkit.lm.sources import check_source
from calibkit.metrics.judges import ppi_mean
from calibkit.metrics.sampling import SAMPLING_DEFAULTS
from calibkit.metrics.settings import DEFAULTS
from calibkit.plugins.skeleton import interval_rows

KEY = "calibkit"
"""The key of ``Score.metadata`` that holds the confidence: ``{"source": str, "confidence": float | None}``."""

__all__ = [
    "KEY",
    "LABEL_KEY",
    "augrc",
    "aurc",
    "brier",
    "calibrated",
    "confidence_and_right",
    "ece",
    "nll",
    "ppi",
    "prr",
    "sample_confidence",
    "verdicts_and_labels",
]

LABEL_KEY = "human_label"
"""The key of a sample's ``metadata`` that holds its human label, for :func:`ppi` (1 pass, 0 fail, or in [0, 1])."""

RIGHT = SAMPLING_DEFAULTS.threshold
"""A score at least this high (Inspect's ``value_to_float``) is a right answer: the sampling settings'
``threshold``, as ``generations_report`` reads it by default."""


def _registered(function: Callable[..., Metric]) -> Callable[..., Metric]:
    """Register ``function`` as Inspect's ``@metric`` does, keeping its docstring and signature (help, docs)."""
    return functools.update_wrapper(metric(function), function)


def sample_confidence(state: TaskState, answer: str | None, source: str | None = None) -> tuple[str, float | None]:
    """Return the confidence source and value of one sample's answer, from its logged tokens.

    Parameters
    ----------
    state : inspect_ai.solver.TaskState
        The sample's state after generation (its ``output`` and ``choices``).
    answer : str or None
        The scorer's answer (the letter, for a multiple-choice sample).
    source : str, optional
        ``sequence``, ``sequence_normalized``, ``least_token`` or ``letter`` (its old spelling
        ``letters`` still read, with a warning); default ``letter`` for a multiple-choice sample and
        ``sequence`` otherwise (:mod:`calibkit.lm.sources`).

    Returns
    -------
    tuple of (str, float or None)
        The source and the confidence; None where there is no output or the source gives none
        (a multiple-choice answer without its letter among the tokens).

    Raises
    ------
    ValueError
        On an unknown source, an output without log-probabilities (``logprobs=True`` not asked),
        tokens that do not spell the output (the ``hf`` provider's
        sampling), or shuffled choices (Inspect rewrites the completion then).
    """
    n_choices = len(state.choices) if state.choices else 0
    if any(i != c.original_position for i, c in enumerate(state.choices or [])):
        raise ValueError(f"sample {state.sample_id} epoch {state.epoch}: {SHUFFLED}")
    name = source or (LETTERS if n_choices else SOURCES[0])
    name = check_source(name, "source", among=(*SOURCES, LETTERS))
    output = state.output
    choice = output.choices[0] if output.choices else None
    where = f"sample {state.sample_id} epoch {state.epoch}"
    if choice is None:  # no output at all (the model failed): nothing to be confident in
        return name, None
    if choice.logprobs is None:
        raise ValueError(
            f"{where}: no log-probabilities were logged; give the task GenerateConfig(logprobs=True, top_logprobs=5)"
        )
    tokens = answer_tokens(choice.logprobs.content, output.completion, where)
    values = output_sources([tokens], [answer], [n_choices], [where])
    if name not in values:  # letters asked of a generation
        return name, None
    value = float(values[name][0])
    return name, None if math.isnan(value) else value


@_registered
def ece(n_bins: int = DEFAULTS.n_bins) -> Metric:
    """Measure the expected calibration error of the confidence that :func:`calibrated` records.

    ``sum_b |B_b|/n * |acc(B_b) - conf(B_b)|`` over equal-width bins of the confidence (Naeini et
    al. 2015; Guo et al. 2017), computed by :func:`calibkit.lm.generations.source_metrics`.

    Parameters
    ----------
    n_bins : int, default 15
        Bins of the confidence.

    Returns
    -------
    inspect_ai.scorer.Metric
    """
    return _of_sources("ece", n_bins)


def _of_sources(name: str, n_bins: int) -> Metric:
    """Return Inspect's metric function: ``name`` of :func:`calibkit.lm.generations.source_metrics` on the scores."""

    def compute(scores: list[SampleScore]) -> float:
        confidence, right = confidence_and_right(scores)
        value = source_metrics(confidence, right, n_bins=n_bins)[name] if len(right) else None
        return math.nan if value is None else float(value)

    return compute


def _without_settings(name: str, what: str) -> Callable[[], Metric]:
    """Return Inspect's registered metric ``name`` (no setting): :func:`_of_sources` under its name and docstring."""

    def build() -> Metric:
        return _of_sources(name, DEFAULTS.n_bins)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = f"""{what} of the confidence that :func:`calibrated` records.

    Computed by :func:`calibkit.lm.generations.source_metrics` (right: a score of at least ``RIGHT``).

    Returns
    -------
    inspect_ai.scorer.Metric
    """
    return _registered(build)


brier = _without_settings("brier", "Brier score, ``mean (conf - right)^2``,")
nll = _without_settings("nll", "Negative log-likelihood of the answers' correctness")
aurc = _without_settings(
    "aurc",
    "Area under the risk-coverage curve (the mean over coverages ``k/n`` of the error rate of the ``k`` most "
    "confident answers; Geifman and El-Yaniv 2017)",
)
prr = _without_settings(
    "prr",
    "Prediction rejection ratio (LM-Polygraph's PRR: the rejection area between random, 0, and oracle, 1, "
    "rejection; :mod:`calibkit.metrics.rejection`), over right and wrong,",
)
augrc = _without_settings(
    "augrc",
    "Area under the generalized risk-coverage curve (Traub et al. 2024: the rate of answers both kept and "
    "wrong, torch-uncertainty's trapezoid)",
)


def confidence_and_right(scores: list[SampleScore]) -> tuple[np.ndarray, np.ndarray]:
    """Return the confidences :func:`calibrated` recorded (NaN where none) and whether each answer is right.

    Parameters
    ----------
    scores : list of inspect_ai.scorer.SampleScore

    Returns
    -------
    tuple of ndarray
        Confidence and right (1.0 or 0.0), shape (n,), over the scores that carry calibkit's
        metadata.
    """
    kept = [s for s in scores if KEY in (s.score.metadata or {})]
    confidence = np.array(
        [np.nan if s.score.metadata[KEY]["confidence"] is None else s.score.metadata[KEY]["confidence"] for s in kept],
        dtype=np.float64,
    )
    values = np.array([score_value(s.score, f"sample {s.sample_id}") for s in kept], dtype=np.float64)
    return confidence, (values >= RIGHT).astype(np.float64)


def calibrated(
    base: Scorer,
    *,
    source: str | None = None,
    metrics: list[Metric] | None = None,
    name: str | None = None,
) -> Scorer:
    """Wrap a scorer so that each score records calibkit's confidence and the results show calibkit's metrics.

    Parameters
    ----------
    base : inspect_ai.scorer.Scorer
        Any scorer (``choice()``, ``match()``, ``includes()``, a model grader, your own); its
        scores are kept as they are.
    source : str, optional
        The confidence: ``letter`` (default for a multiple-choice sample; ``letters``, its old
        spelling, still read with a warning), ``sequence`` (default otherwise),
        ``sequence_normalized`` or ``least_token`` (:mod:`calibkit.lm.sources`).
    metrics : list of inspect_ai.scorer.Metric, optional
        Default ``[accuracy(), stderr(), ece(), brier(), nll(), aurc()]``; :func:`prr` and
        :func:`augrc` (the rejection metrics) on request.
    name : str, optional
        The scorer's name in the results (default: the wrapped scorer's).

    Returns
    -------
    inspect_ai.scorer.Scorer
        Each ``Score`` has ``metadata["calibkit"] = {"source", "confidence"}``.

    Raises
    ------
    ValueError
        On an unknown source (here), and in the sample's scoring when its logged tokens do not
        spell its output (the ``hf`` provider's sampling: run with ``-M do_sample=False``).
    """
    if source is not None:  # checked here, before any sample: an unknown one listed with the known ones
        source = check_source(source, "source", among=(*SOURCES, LETTERS))
    if name is None:
        name = registry_info(base).name.split("/")[-1]

    @scorer(metrics=metrics or [accuracy(), stderr(), ece(), brier(), nll(), aurc()], name=name)
    def wrapped() -> Scorer:
        async def score(state: TaskState, target: Target) -> Score | None:
            result = await base(state, target)
            if result is None:
                return None
            used, value = sample_confidence(state, result.answer, source)
            record: dict[str, Any] = {KEY: {"source": used, "confidence": value}}
            return result.model_copy(update={"metadata": {**(result.metadata or {}), **record}})

        return score

    return wrapped()


def verdicts_and_labels(
    scores: list[SampleScore], labels: HumanLabels | None = None, key: str = LABEL_KEY
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the judge's verdicts and people's labels of the samples that have one.

    Parameters
    ----------
    scores : list of inspect_ai.scorer.SampleScore
        The judge's scores (Inspect's ``value_to_float``: ``C`` 1, ``P`` 0.5, ``I`` 0).
    labels : HumanLabels, optional
        Labels by sample id (:func:`calibkit.lm.judges.read_labels`); default: each sample's
        ``metadata[key]``.
    key : str, default ``human_label``

    Returns
    -------
    tuple of ndarray
        The verdicts (shape (N,)), the labelled samples' indices into them (shape (n,)) and
        their labels (shape (n,)).

    Raises
    ------
    ValueError
        A label off the verdicts' scale (a score where every verdict is 0/1, naming the file and
        line), or a metadata label that is not a number in [0, 1]. A label whose id is none of the
        scores' is set aside: Inspect computes its metrics on the samples done so far while it runs.
    """
    verdicts = np.array([score_value(s.score, f"sample {s.sample_id}") for s in scores], dtype=np.float64)
    ids = np.array([str(s.sample_id) for s in scores], dtype=object)
    if labels is None:
        given = [(i, (s.sample_metadata or {}).get(key)) for i, s in enumerate(scores)]
        given = [(i, v) for i, v in given if v is not None]
        where = [f"sample {scores[i].sample_id}, metadata[{key!r}]" for i, _ in given]
        for (_, value), place in zip(given, where):  # a loop over the labels while reading them
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise ValueError(f"`labels`: {place}: {value!r} is not a label (1 pass, 0 fail, or in [0, 1])")
        labels = HumanLabels(ids[[i for i, _ in given]], np.array([v for _, v in given], dtype=np.float64), where)
    # Inspect computes the metrics on the samples done so far while it runs: a label of a sample not among
    # them is set aside, not refused (``calibkit judge`` on the log refuses an id that matches nothing)
    known = np.isin(labels.ids.astype(str), ids.astype(str))
    kept = HumanLabels(labels.ids[known], labels.label[known], [o for o, k in zip(labels.origin, known) if k])
    judged = Judged(ids, np.zeros(len(ids), dtype=object), verdicts, np.full(len(ids), np.nan))
    return verdicts, match_labels(judged, kept), kept.label


@_registered
def ppi(labels: str | None = None, key: str = LABEL_KEY, level: float = SAMPLING_DEFAULTS.level) -> Metric:
    """Report people's pass rate, corrected from the judge's by PPI++ on the samples people labelled.

    A model grader's (``model_graded_qa``, ``model_graded_fact``) pass rate carries the judge's
    errors; with human labels for some samples, prediction-powered inference with a power-tuned
    ``lambda`` (PPI++, :func:`calibkit.metrics.judges.ppi_mean`, equal to ``ppi-python``'s
    ``ppi_mean_ci``) corrects it: ``lambda * mean(judge, unlabelled) + mean(label - lambda *
    judge, labelled)``, with its normal interval. Inspect's results show ``ppi_pass_rate``, its
    interval ``ppi_pass_rate_ci_lower`` and ``ppi_pass_rate_ci_upper``, and ``ppi_labelled`` (NaN
    rates with fewer than 2 labels, or no sample left without one).

    Parameters
    ----------
    labels : str, optional
        A labels file (``id``, ``label``: :func:`calibkit.lm.judges.read_labels`), ids the
        samples' ids; read when the task is made, so that a bad file is refused before any
        sample runs. Default: the samples' ``metadata[key]`` where present.
    key : str, default ``human_label``
        The metadata key of a sample's label, when no file is given.
    level : float, default 0.95
        The interval's level.

    Returns
    -------
    inspect_ai.scorer.Metric

    Examples
    --------
    >>> Task(dataset=..., solver=generate(), scorer=model_graded_qa(),  # doctest: +SKIP
    ...      metrics=[accuracy(), stderr(), ppi(labels="labels.csv")])
    """
    given = read_labels(labels) if labels is not None else None
    rate = "ppi_pass_rate"
    lower, upper = interval_rows(rate)

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        verdicts, labelled, human = verdicts_and_labels(scores, given, key)
        rest = np.ones(verdicts.size, dtype=bool)
        rest[labelled] = False
        out = {rate: math.nan, lower: math.nan, upper: math.nan, "ppi_labelled": float(labelled.size)}
        if labelled.size < 2 or not rest.any():
            return out
        found = ppi_mean(human, verdicts[labelled], verdicts[rest], level=level)
        return {**out, rate: found["estimate"], lower: found["ci_lower"], upper: found["ci_upper"]}

    return compute
