"""calibkit's metrics in lighteval's results table: ``CorpusLevelMetric`` classes for ``--custom-tasks``.

lighteval (0.13) scores a multiple-choice question by asking the model for each choice's summed
log-probability (``SamplingMethod.LOGPROBS``): ``ModelResponse.logprobs`` holds one value per
choice (``2n`` where a PMI metric of the task asks for the unconditioned values too, appended),
``Doc.gold_index`` the right one. :func:`choice_calibration` turns them into calibkit's metrics:

- per question, :class:`ChoiceLogprobs` keeps the choices' log-probabilities, the gold index and
  each choice's length (characters as stored, UTF-8 bytes, tokens) for the normalised scores;
- over the task, :class:`ChoiceCalibration` stacks them into a
  :class:`~calibkit.lm.multiple_choice.ChoiceData` and computes the report with
  :func:`~calibkit.lm.multiple_choice.multiple_choice_report`, the function behind ``calibkit
  choices``, so the values equal ``calibkit choices --predictions DETAILS`` on the run's details
  file; the intervals are :func:`calibkit.metrics.bootstrap.bootstrap_intervals` over the same
  probabilities.

lighteval's own standard error is turned off for these rows, and replaced: its bootstrap
(``lighteval.metrics.utils.stderr.bootstrap_stderr``) returns the standard deviation of 1000
replicates divided by ``sqrt(1000)`` (``mean_stderr`` of the replicates), 32 times too small, and
it pickles the aggregation into a process pool. lighteval computes no standard error for an
aggregation that returns a ``dict`` (``MetricsLogger.aggregate``), so :class:`ChoiceCalibration`
returns every metric at once, each with ``{name}_ci_lower`` and ``{name}_ci_upper``: calibkit's
percentile interval (95% by default), printed as rows of their own in lighteval's table (the rows
of every plugin: :mod:`calibkit.plugins.skeleton`).

HLE (Humanity's Last Exam): lighteval's ``hle`` task reports ``calibration_error`` from the HLE
authors' ``calib_err``, which skips the last, most confident bin (``range(len(bins) - 1)``);
lighteval's copy also leaves the judge's stated confidence in percent (the authors' script divides
it by 100 first), and flags the error higher-is-better. :class:`HLECalibration` reports lighteval's
three numbers unchanged beside ``calibration_error_all_bins`` (the same equal-mass bins, every
one of them, confidence in [0, 1], in percent as HLE reports it; lower is better) and calibkit's
metrics of the stated confidence (:func:`calibkit.lm.generations.source_metrics`, the function
behind ``calibkit generations``).

Use the module by name, ``--custom-tasks calibkit.plugins.lighteval`` (its ``TASKS_TABLE`` is
ARC with calibkit's metrics: ``calibkit_arc:easy``, ``calibkit_arc:challenge``), or import
:func:`choice_calibration` / :func:`with_calibration` in a task file of your own. Importing it
imports lighteval (about 4 seconds).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from lighteval.metrics.metrics_corpus import CorpusLevelComputation
from lighteval.metrics.metrics_sample import SampleLevelComputation
from lighteval.metrics.utils.metric_utils import CorpusLevelMetric, CorpusLevelMetricGrouping
from lighteval.tasks.requests import SamplingMethod

from calibkit.lm.generations import source_metrics
from calibkit.lm.multiple_choice import (
    ChoiceData,
    check_question,
    check_score,
    choice_probabilities,
    multiple_choice_report,
)
from calibkit.lm.multiple_choice.lighteval import choice_lengths
from calibkit.metrics.bootstrap import bootstrap_intervals
from calibkit.metrics.registry import HARNESS_METRICS, OVER_CLASSES, metric, metric_names
from calibkit.metrics.sampling import SAMPLING_UNSET, SamplingSettings, resolve_sampling
from calibkit.metrics.settings import DEFAULTS, renamed, resolve_settings
from calibkit.metrics.validation import check_positive_int
from calibkit.plugins.skeleton import higher_is_better, metric_rows

__all__ = [
    "CHOICE_METRICS",
    "CLASSWISE",
    "HLE_NAMES",
    "ChoiceCalibration",
    "ChoiceLogprobs",
    "HLECalibration",
    "choice_calibration",
    "choice_data",
    "hle_calibration",
    "hle_rms_calibration_error",
    "with_calibration",
]

CHOICE_METRICS = HARNESS_METRICS
"""The metrics :func:`choice_calibration` reports by default (every task)."""

CLASSWISE = tuple(m for m in OVER_CLASSES if not metric(m).per_class)
"""The class-wise family, over answer positions: reported where every question of the task has
the same number of choices (elsewhere not defined, and left out of the table)."""

HLE_NAMES = ("accuracy", "confidence_half_width", "calibration_error")
"""lighteval's HLE metric names, whose values :class:`HLECalibration` keeps unchanged."""

HLE_BIN = 100
"""Answers per bin of the HLE calibration error (the authors' ``beta``)."""


def _suffix(score: str) -> str:
    return "" if score == "loglik" else f"_{score}"


def _sampling(where: str, bootstrap: Any, level: Any, seed: Any, old: dict[str, Any]) -> SamplingSettings:
    """Resolve a corpus level's sampling settings (``bootstrap=0``: no interval), old names with a warning."""
    bootstrap = renamed("n_boot", old.get("n_boot"), "bootstrap", bootstrap, where)
    level = renamed("confidence", old.get("confidence"), "level", level, where)
    return resolve_sampling(bootstrap=bootstrap, level=level, seed=seed)


class ChoiceLogprobs(SampleLevelComputation):
    """One question's scored choices, kept for :class:`ChoiceCalibration` (lighteval's sample level).

    The value logged per question (and written in the details file's ``metric`` column) is a dict:
    ``logprobs`` (the ``n`` choices' summed log-probabilities, the unconditioned half of a PMI
    task left out), ``gold`` (the index of the right choice), ``chars`` and ``bytes`` (each
    choice's length as stored, as lighteval's ``acc_norm`` counts it) and ``tokens`` (its length
    in tokens, empty where the response holds none).
    """

    def compute(self, doc: Any, model_response: Any, **kwargs: Any) -> dict[str, Any]:
        """Return the question's scored choices, checked.

        Parameters
        ----------
        doc : lighteval.tasks.requests.Doc
            The question: ``choices``, ``gold_index`` (one index), ``id``.
        model_response : lighteval.models.model_output.ModelResponse
            ``logprobs``: ``n`` or ``2n`` values; ``output_tokens``: the choices' tokens.
        **kwargs
            Ignored (lighteval's signature).

        Returns
        -------
        dict

        Raises
        ------
        ValueError
            Naming the task and the doc's id: no choice, not ``n`` or ``2n`` log-probabilities, one
            not finite, or a gold that is not one index of the choices (calibration needs one).
        """
        n = len(doc.choices)
        where = f"lighteval task {doc.task_name}, doc {doc.id!r}"
        ll, gold = check_question(where, n, list(model_response.logprobs or []), doc.gold_index)
        tokens = model_response.output_tokens or []
        counts = [len(t) for t in tokens[:n]] if len(tokens) >= n and all(isinstance(t, list) for t in tokens) else []
        chars, nbytes = choice_lengths(doc.choices)
        return {"logprobs": ll.tolist(), "gold": gold, "chars": chars, "bytes": nbytes, "tokens": counts}


def choice_data(items: list[dict[str, Any]], task: str = "lighteval") -> ChoiceData:
    """Stack :class:`ChoiceLogprobs`'s values into :class:`~calibkit.lm.multiple_choice.ChoiceData`.

    Parameters
    ----------
    items : list of dict
        One per question, as ``ChoiceLogprobs.compute`` returns them.
    task : str, default "lighteval"
        The task name the data carry (for messages).

    Returns
    -------
    ChoiceData
        ``tokens`` is None where no question has its choices' token counts (NaN for a question
        without them).

    Raises
    ------
    ValueError
        When ``items`` is empty.
    """
    if not items:
        raise ValueError("`items`: no question to compute calibkit's metrics on")
    rows = {key: [item[key] for item in items] for key in ("logprobs", "gold", "chars", "bytes", "tokens")}
    return ChoiceData.stack(
        rows["logprobs"], rows["gold"], task=task, source=task, chars=rows["chars"], bytes=rows["bytes"],
        tokens=rows["tokens"],
    )  # fmt: skip


class ChoiceCalibration(CorpusLevelComputation):
    """calibkit's metrics of a task's multiple-choice answers, with calibkit's bootstrap intervals.

    Parameters
    ----------
    score : {"loglik", "chars", "bytes", "tokens"}, default "loglik"
        The score whose softmax over the choices is the confidence: lighteval's ``acc``
        (summed log-probability), ``acc_norm`` (per character), per UTF-8 byte, ``acc_norm_token``.
    metrics : sequence of str, optional
        The metrics (default :data:`CHOICE_METRICS` and, where the number of choices is fixed,
        :data:`CLASSWISE`); any name of ``calibkit.calibration_report``'s or ``aurc``.
    n_bins : int, default 15
        Bins of the binned metrics (the settings' ``n_bins``).
    bootstrap : int, default 1000
        Bootstrap replicates of the intervals; 0 for none.
    level : float, default 0.95
        Level of the percentile intervals.
    seed : int, default 0
        Seed of the bootstrap.
    n_boot, confidence : optional
        Deprecated names of ``bootstrap`` and ``level`` (a ``FutureWarning``).
    """

    def __init__(
        self,
        score: str = "loglik",
        metrics: tuple[str, ...] | None = None,
        n_bins: int = DEFAULTS.n_bins,
        bootstrap: int = SAMPLING_UNSET.bootstrap,
        level: float = SAMPLING_UNSET.level,
        seed: int = SAMPLING_UNSET.seed,
        *,
        n_boot: int | None = None,
        confidence: float | None = None,
    ) -> None:
        self.score = check_score(score)
        # checked here, where the task is defined, not after the model has answered every question
        old = {"n_boot": n_boot, "confidence": confidence}
        sampling = _sampling("ChoiceCalibration()", bootstrap, level, seed, old)
        self.metrics = None if metrics is None else metric_names(metrics, streaming=sampling.bootstrap != 0)
        lists = [m for m in self.metrics or () if m != "accuracy" and metric(m).per_class]
        if lists:
            raise ValueError(f"`metrics`: {lists} give one number per class; lighteval's table holds one per row")
        self.n_bins = resolve_settings(n_bins=n_bins).n_bins
        self.bootstrap, self.level, self.seed = sampling.bootstrap, sampling.level, sampling.seed

    @property
    def n_boot(self) -> int:
        """The old name of ``bootstrap`` (kept for one release).

        Returns
        -------
        int
        """
        return self.bootstrap

    @property
    def confidence(self) -> float:
        """The old name of ``level`` (kept for one release).

        Returns
        -------
        float
        """
        return self.level

    def wanted(self, fixed: bool) -> tuple[str, ...]:
        """Return the metrics reported: the chosen ones, those over positions only where ``fixed``.

        Parameters
        ----------
        fixed : bool
            Whether every question of the task has the same number of choices.

        Returns
        -------
        tuple of str
        """
        chosen = self.metrics if self.metrics is not None else (*CHOICE_METRICS, *CLASSWISE)
        return tuple(m for m in chosen if fixed or m not in OVER_CLASSES)

    def compute_corpus(self, items: list[dict[str, Any]]) -> dict[str, float]:
        """Compute the metrics and their intervals over a task's questions (lighteval's aggregation).

        Parameters
        ----------
        items : list of dict
            :class:`ChoiceLogprobs`'s values, one per question.

        Returns
        -------
        dict of str to float
            ``{name}``, ``{name}_ci_lower`` and ``{name}_ci_upper`` per metric, ``name`` the metric with
            ``_{score}`` appended unless the score is ``loglik`` (``ece``, ``ece_chars``, ...).
            A dict: lighteval shows each entry as a row and computes no standard error of its own.
        """
        data = choice_data(items)
        counts = data.n_choices
        names = self.wanted(bool(counts.min() == counts.max()))
        # the report's own metric list: calibration_report's, AURC (always computed by the report) left out
        asked = [m for m in names if m not in ("aurc", "selective_accuracy")] or ["ece"]
        report = multiple_choice_report(data, score=self.score, n_bins=self.n_bins, metrics=asked)["pooled"]
        ci: dict[str, Any] = {}
        if self.bootstrap:
            probs = choice_probabilities(data, self.score)
            ci = bootstrap_intervals(
                probs, data.gold, metrics=names, bootstrap=self.bootstrap, level=self.level, seed=self.seed,
                n_bins=self.n_bins,
            )["intervals"]  # fmt: skip
        # a metric not defined here (a class no question has as its answer, ...) gets no row
        return metric_rows(report, ci, names, _suffix(self.score))


def choice_calibration(
    score: str = "loglik",
    *,
    metrics: tuple[str, ...] | None = None,
    n_bins: int = DEFAULTS.n_bins,
    bootstrap: int = SAMPLING_UNSET.bootstrap,
    level: float = SAMPLING_UNSET.level,
    seed: int = SAMPLING_UNSET.seed,
    n_boot: int | None = None,
    confidence: float | None = None,
) -> CorpusLevelMetric:
    """Return lighteval's ``CorpusLevelMetric`` of calibkit's metrics for a multiple-choice task.

    Add it to a ``LightevalTaskConfig``'s ``metrics``; the task's results then hold ECE, Brier,
    NLL and AURC of the softmax over the choices' scores (and the class-wise family where every
    question has the same number of choices), each with calibkit's bootstrap interval.

    Parameters
    ----------
    score : {"loglik", "chars", "bytes", "tokens"}, default "loglik"
    metrics : sequence of str, optional
    n_bins : int, default 15
    bootstrap : int, default 1000
    level : float, default 0.95
    seed : int, default 0
    n_boot, confidence : optional
        As in :class:`ChoiceCalibration`.

    Returns
    -------
    lighteval.metrics.utils.metric_utils.CorpusLevelMetric
        Named ``calibkit`` (``calibkit_{score}`` for another score): the name of the value logged
        per question; the results hold the names ``ChoiceCalibration.compute_corpus`` returns.

    Examples
    --------
    >>> from lighteval.tasks.tasks.arc import arc_easy  # doctest: +SKIP
    >>> TASKS_TABLE = [with_calibration(arc_easy, choice_calibration("chars"))]  # doctest: +SKIP
    """
    sampling = _sampling("choice_calibration()", bootstrap, level, seed, {"n_boot": n_boot, "confidence": confidence})
    corpus = ChoiceCalibration(score, metrics, n_bins, sampling.bootstrap, sampling.level, sampling.seed)
    return CorpusLevelMetric(
        metric_name=f"calibkit{_suffix(corpus.score)}",
        # one flag for every row (lighteval reads it nowhere in 0.13): higher is better only if it is for each
        higher_is_better=all(higher_is_better(m) for m in corpus.wanted(True)),
        category=SamplingMethod.LOGPROBS,
        sample_level_fn=ChoiceLogprobs(),
        corpus_level_fn=corpus,
    )


def with_calibration(config: Any, *metrics: CorpusLevelMetric, prefix: str = "calibkit_") -> Any:
    """Return a copy of a lighteval task with calibkit's metrics added, under a name of its own.

    Parameters
    ----------
    config : lighteval.tasks.lighteval_task.LightevalTaskConfig
        A multiple-choice task (one whose metrics use ``SamplingMethod.LOGPROBS``).
    *metrics : CorpusLevelMetric
        The metrics to add (default: ``choice_calibration()``).
    prefix : str, default ``"calibkit_"``
        Put before the task's name: a custom task may not take a built-in task's name.

    Returns
    -------
    LightevalTaskConfig
    """
    added = metrics or (choice_calibration(),)
    return dataclasses.replace(config, name=f"{prefix}{config.name}", metrics=[*config.metrics, *added])


def hle_rms_calibration_error(confidence: np.ndarray, correct: np.ndarray, per_bin: int = HLE_BIN) -> float:
    """Compute HLE's RMS calibration error over equal-mass bins, every bin counted.

    The answers sorted by confidence are cut into bins of ``per_bin`` (the last one takes the
    remainder, as the HLE authors' ``calib_err`` cuts them); the error is
    ``sqrt(sum_b n_b/N (conf_b - acc_b)^2)`` over all the bins, where the authors' loop stops one
    bin short (Phan et al. 2025 [1]_; Hendrycks et al. 2019 [2]_ for the estimator).

    Parameters
    ----------
    confidence : ndarray of shape (n,)
        Stated confidences in [0, 1].
    correct : ndarray of shape (n,)
        1 for a right answer, 0 for a wrong one.
    per_bin : int, default 100
        Answers per bin (the authors' ``beta``).

    Returns
    -------
    float
        In [0, 1]; NaN when there are fewer than ``per_bin`` answers (no bin), as the authors'
        code has none either.

    References
    ----------
    .. [1] L. Phan et al. (2025). "Humanity's Last Exam". arXiv:2501.14249.
    .. [2] D. Hendrycks, M. Mazeika and T. Dietterich (2019). "Deep Anomaly Detection with Outlier
       Exposure". ICLR 2019 (``utils/calibration_tools.py``).

    Examples
    --------
    >>> conf = np.r_[np.full(100, 0.5), np.full(100, 0.9)]
    >>> right = np.r_[np.zeros(50), np.ones(50), np.zeros(100)]
    >>> round(hle_rms_calibration_error(conf, right), 4)  # the 90%-confident bin is all wrong
    0.6364
    """
    confidence = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    n = confidence.size
    bins = n // per_bin
    if bins == 0:
        return float("nan")
    order = np.argsort(confidence)  # numpy's default sort, as the authors' code: the same bins where confidences tie
    starts = np.arange(bins) * per_bin
    counts = np.diff(np.r_[starts, n])
    gaps = np.add.reduceat(confidence[order], starts) / counts - np.add.reduceat(correct[order], starts) / counts
    return float(math.sqrt(np.sum(counts / n * gaps**2)))


class HLECalibration(CorpusLevelComputation):
    """HLE's calibration error with every bin, beside lighteval's numbers (lighteval's corpus level).

    Takes what lighteval's HLE judge (``lighteval.tasks.tasks.hle.JudgeLLMHLE``) gives per answer:
    ``correct`` (``"yes"`` or ``"no"``) and ``confidence`` (the answer's stated confidence, 0 to
    100).

    Parameters
    ----------
    n_bins : int, default 15
        Bins of calibkit's ECE (the settings' ``n_bins``).
    bootstrap : int, default 1000
        Bootstrap replicates of calibkit's intervals; 0 for none.
    seed : int, default 0
    per_bin : int, default 100
        Answers per bin of HLE's error (the authors' ``beta``).
    n_boot : int, optional
        Deprecated name of ``bootstrap`` (a ``FutureWarning``).
    """

    def __init__(
        self,
        n_bins: int = DEFAULTS.n_bins,
        bootstrap: int = SAMPLING_UNSET.bootstrap,
        seed: int = SAMPLING_UNSET.seed,
        per_bin: int = HLE_BIN,
        *,
        n_boot: int | None = None,
    ):
        sampling = _sampling("HLECalibration()", bootstrap, SAMPLING_UNSET.level, seed, {"n_boot": n_boot})
        self.n_bins = resolve_settings(n_bins=n_bins).n_bins
        self.bootstrap, self.seed = sampling.bootstrap, sampling.seed
        self.per_bin = check_positive_int(per_bin, "per_bin")

    @property
    def n_boot(self) -> int:
        """The old name of ``bootstrap`` (kept for one release).

        Returns
        -------
        int
        """
        return self.bootstrap

    def compute_corpus(self, items: list[dict[str, Any]]) -> dict[str, float]:
        """Compute lighteval's three HLE numbers, the corrected error and calibkit's metrics.

        Parameters
        ----------
        items : list of dict
            The judge's verdict per answer (``correct``, ``confidence``); lighteval logs the same
            dict under each of its three names.

        Returns
        -------
        dict of str to float
            ``accuracy``, ``confidence_half_width``, ``calibration_error``: lighteval's values,
            unchanged (its last bin skipped, the confidence left in percent);
            ``calibration_error_all_bins``: HLE's RMS error over every bin, the confidence in [0,
            1], times 100 (:func:`hle_rms_calibration_error`); ``ece``, ``brier``, ``nll``, ``aurc``
            of the stated confidence (calibkit's 1-D binary convention, class 1 = right) and
            ``{name}_ci_lower``, ``{name}_ci_upper`` for the first three.

        Raises
        ------
        ValueError
            When a confidence is not a number in [0, 100].
        """
        from lighteval.tasks.tasks.hle import JudgeLLMHLE

        original = JudgeLLMHLE.compute_corpus(self, items)  # lighteval's own numbers (it uses no state)
        right = np.array(["yes" in item["correct"] for item in items], dtype=np.float64)
        stated = np.array([item["confidence"] for item in items], dtype=np.float64)
        if not (np.isfinite(stated) & (stated >= 0) & (stated <= 100)).all():
            bad = stated[~(np.isfinite(stated) & (stated >= 0) & (stated <= 100))][0]
            raise ValueError(f"`items`: a judge's `confidence` must lie in [0, 100] (percent), got {bad}")
        out = {name: float(original[name]) for name in HLE_NAMES}
        out["calibration_error_all_bins"] = 100 * hle_rms_calibration_error(stated / 100, right, self.per_bin)
        judged = source_metrics(stated / 100, right, n_bins=self.n_bins, bootstrap=self.bootstrap, seed=self.seed)
        return {**out, **metric_rows(judged, judged.get("intervals", {}), CHOICE_METRICS)}


def hle_calibration(
    *,
    n_bins: int = DEFAULTS.n_bins,
    bootstrap: int = SAMPLING_UNSET.bootstrap,
    seed: int = SAMPLING_UNSET.seed,
    sample_level_fn: Any = None,
    n_boot: int | None = None,
) -> CorpusLevelMetricGrouping:
    """Return lighteval's HLE metric with :class:`HLECalibration` as its corpus level.

    Parameters
    ----------
    n_bins : int, default 15
    bootstrap : int, default 1000
    seed : int, default 0
        As in :class:`HLECalibration`.
    sample_level_fn : SampleLevelComputation, optional
        The judge (default lighteval's ``JudgeLLMHLE``, which calls OpenAI's ``gpt-4o``).
    n_boot : int, optional
        Deprecated name of ``bootstrap`` (a ``FutureWarning``).

    Returns
    -------
    lighteval.metrics.utils.metric_utils.CorpusLevelMetricGrouping
        To put in place of ``Metrics.hle_metrics`` in the ``hle`` task's ``metrics``.
    """
    sampling = _sampling("hle_calibration()", bootstrap, SAMPLING_UNSET.level, seed, {"n_boot": n_boot})
    if sample_level_fn is None:
        from lighteval.tasks.tasks.hle import JudgeLLMHLE

        sample_level_fn = JudgeLLMHLE()
    extra = ("calibration_error_all_bins", *CHOICE_METRICS)
    return CorpusLevelMetricGrouping(
        metric_name=[*HLE_NAMES, *extra],
        # lighteval flags its calibration_error higher-is-better; each row's direction here is the registry's
        higher_is_better={name: higher_is_better(name) for name in (*HLE_NAMES, *extra)},
        category=SamplingMethod.GENERATIVE,
        sample_level_fn=sample_level_fn,
        corpus_level_fn=HLECalibration(n_bins=n_bins, bootstrap=sampling.bootstrap, seed=sampling.seed),
    )


def _tasks_table() -> list[Any]:
    """Return lighteval's ARC tasks with calibkit's metrics (``calibkit_arc:easy``, ``calibkit_arc:challenge``)."""
    from lighteval.tasks.tasks.arc import arc_challenge, arc_easy

    return [with_calibration(arc_easy), with_calibration(arc_challenge)]


def __getattr__(name: str) -> Any:
    # TASKS_TABLE, read by lighteval's --custom-tasks: built on first use, so that importing the
    # plugin for its metrics does not import lighteval's task modules
    if name == "TASKS_TABLE":
        return _tasks_table()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
