"""calibkit's metrics in lm-evaluation-harness's own results table: a task class for any task.

Two lines in a task's YAML (in a folder given to ``--include_path``) add calibkit's rows to the
table ``lm_eval ... --tasks NAME`` prints::

    include: arc_easy.yaml                                  # the task to calibrate (its file)
    class: !function calibkit.plugins.lm_eval.CalibratedTask

(and ``task: NAME`` to run it beside the original; :func:`write_task` writes such a file for a
task the harness knows by name). :class:`CalibratedTask` is the harness's own
``ConfigurableTask``: every metric of the included task is computed as before, and calibkit's
are added:

- ``multiple_choice`` tasks: ``ece``, ``brier``, ``nll``, ``aurc`` (and ``cece`` where every
  question has the same number of choices), from the softmax over each question's choices of
  their log-likelihoods: exactly what ``calibkit choices`` reads from the run's
  ``--log_samples`` (:func:`calibkit.lm.multiple_choice.multiple_choice_report`);
- ``generate_until`` tasks whose answers state a confidence ("Confidence: 80%", parsed by
  :func:`calibkit.lm.generations.parse_confidence`): ``ece``, ``brier``, ``nll``, ``aurc`` of
  that confidence against the task's first metric (right when at least 0.5), and
  ``without_confidence``, the share of answers that state none (left out of the others): what
  ``calibkit generations --confidence verbalized`` reads
  (:func:`calibkit.lm.generations.source_metrics`); by name (``metrics: [ece, prr, augrc]``), the
  rejection rows too (``prr``, ``prr_at``, ``roc_auc``, ``pr_auc``, ``augrc``, ``risk_at_coverage``,
  ``coverage_at_risk``: :mod:`calibkit.metrics.rejection`), against the task's score as given.

Intervals: calibkit's bootstrap (``bootstrap`` replicates by question, 1000 unless set, seed 0)
gives each metric a 95% percentile interval, shown beside the metric as two rows
``<metric>_ci_lower`` and ``<metric>_ci_upper`` (the rows of every plugin:
:mod:`calibkit.plugins.skeleton`); the harness's ``Stderr`` column shows the standard error a normal
interval of the same width would have, ``(upper - lower) / (2 * 1.959964)`` (the harness
computes a standard error only for its own aggregations, so calibkit returns it as the
``<metric>_stderr`` value the table reads).

Settings, under a ``calibkit:`` key of the YAML: ``metrics`` (a list), ``bootstrap`` (replicates,
0 for none), ``seed``, ``n_bins``; for generations ``correct`` (the metric that says an answer is
right), ``threshold`` and ``words`` (:func:`calibkit.lm.generations.parse_confidence`).

What the harness would do silently is refused here with a ``ValueError`` naming the task: a
metric of a multiple-choice task that the harness does not compute by name (a function given
as ``metric: !function ...`` gives no row and no warning there), a gold answer that is not one
of the choices or several of them (naming the question: its ``doc_id`` and its fields; a list
of one index, ``[2]``, is that choice, as the harness scores it), filters (the logged samples
would then not be what calibkit reads), a ``generate_until`` correctness outside [0, 1], the
harness's ``brier_score`` on questions with different numbers of choices (it fails at the end
of the run). The harness's own ``brier_score`` is logged per sample as the text of a numpy
array; this class logs it as a list of numbers.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from calibkit.lm.generations import parse_confidence, source_metrics
from calibkit.lm.generations.report import REJECTION
from calibkit.lm.generations.verbalized import check_words
from calibkit.lm.multiple_choice import ChoiceData, choice_probabilities, multiple_choice_report
from calibkit.lm.multiple_choice.report import POSITION_METRICS, TABLE_COLUMNS
from calibkit.metrics.bootstrap import bootstrap_intervals
from calibkit.metrics.registry import CONFIDENCE_METRICS, HARNESS_METRICS, ON_REQUEST
from calibkit.metrics.sampling import SAMPLING_DEFAULTS, SamplingSettings
from calibkit.metrics.settings import DEFAULTS
from calibkit.metrics.validation import check_positive_int
from calibkit.plugins.skeleton import higher_is_better, interval_rows

try:
    from lm_eval.api.task import ConfigurableTask
except ImportError as exc:  # pragma: no cover - the plugin is for harness users
    message = f"calibkit.plugins.lm_eval runs inside lm-evaluation-harness: pip install lm-eval ({exc})"
    raise ImportError(message) from exc

__all__ = ["CHOICE_METRICS", "GENERATION_METRICS", "CalibratedTask", "choices_of", "write_task"]

CHOICE_METRICS = HARNESS_METRICS
"""The rows added to a multiple-choice task (``cece`` too where the number of choices is fixed)."""

GENERATION_METRICS = HARNESS_METRICS
"""The rows added to a ``generate_until`` task, with ``without_confidence``."""

Z95 = round(NormalDist().inv_cdf(0.5 + SAMPLING_DEFAULTS.level / 2), 15)
"""The standard normal's 97.5% quantile (the sampling settings' ``level``; to 15 decimals, the double
nearest the exact value): a 95% interval is this many standard errors each side."""

BOOTSTRAP = SAMPLING_DEFAULTS.bootstrap
"""Bootstrap replicates of the intervals (the ``calibkit: bootstrap:`` key; 0 for none): the sampling
settings' ``bootstrap``."""

HARNESS_CHOICE_METRICS = (
    "acc", "acc_norm", "acc_bytes", "f1", "mcc", "exact_match", "brier_score", "likelihood", "acc_mutual_info",
)  # fmt: skip
"""The per-sample metrics the harness computes for a multiple-choice task, by name (lm_eval/api/task.py):
any other name gives no row, silently."""

_CHOICE_NAMES = tuple(m for m in TABLE_COLUMNS if m != "questions")
_GENERATION_NAMES = (*CONFIDENCE_METRICS, *ON_REQUEST, *REJECTION)
_OPTIONS = ("metrics", "bootstrap", "seed", "n_bins", "correct", "threshold", "words")


class CalibratedTask(ConfigurableTask):
    """An lm-evaluation-harness task with calibkit's metrics added to its results.

    Named in a task's YAML as ``class: !function calibkit.plugins.lm_eval.CalibratedTask``
    beside ``include:`` of the task to calibrate (see the module docstring).

    Parameters
    ----------
    config : dict
        The task's configuration as the harness reads it from the YAML; its ``calibkit`` key
        (optional) holds the settings: ``metrics`` (list of str), ``bootstrap`` (int, default
        1000; 0: no interval), ``seed`` (int, default 0), ``n_bins`` (int, default 15) and, for
        ``generate_until`` tasks, ``correct`` (the metric that scores an answer, default the
        task's first), ``threshold`` (default 0.5) and ``words`` (a mapping of words to
        confidences).
    **kwargs
        As ``lm_eval.api.task.ConfigurableTask``.

    Raises
    ------
    ValueError
        Naming the task: an output type other than ``multiple_choice`` and ``generate_until``,
        filters, a multiple-choice metric the harness does not compute by name, a gold answer
        that is not exactly one of the choices (naming the question by its ``doc_id``; a list of
        one index is that choice), a metric name calibkit does not give, or a bad setting.
    """

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        config = dict(config or {})
        config.pop("class", None)
        options = config.pop("calibkit", None) or {}
        name = config.get("task")
        if config.get("filter_list") is not None:
            raise ValueError(
                f"calibkit.plugins.lm_eval, task {name!r}: the task has filters ({_filter_names(config)}); calibkit "
                "reads the response the harness logs and scores, which a filter may change (cut a stated "
                "confidence off, log one line per filter): set `filter_list: null` in this YAML, or calibrate a "
                "task without filters"
            )
        _check_harness_metrics(name, config)
        super().__init__(config=config, **kwargs)
        self._calibkit = _options(name, options, self.OUTPUT_TYPE)
        self._cache: dict[tuple, tuple[list, dict]] = {}
        if self.OUTPUT_TYPE == "multiple_choice":
            counts = {len(self._choices_and_gold(doc, i)[0]) for i, doc in enumerate(self.eval_docs)}
            self._fixed = len(counts) == 1
            default = (*CHOICE_METRICS, "cece") if self._fixed else CHOICE_METRICS
        else:
            self._fixed = False
            default = GENERATION_METRICS
        if self.OUTPUT_TYPE == "multiple_choice" and not self._fixed and "brier_score" in self._metric_fn_list:
            raise ValueError(
                f"calibkit.plugins.lm_eval, task {name!r}: the harness's brier_score stacks every question's "
                "probabilities into one array and fails at the end of the run when questions have different numbers "
                "of choices, as here: remove it from metric_list (calibkit's `brier` row is defined for any)"
            )
        metrics = self._calibkit["metrics"] or default
        if self.OUTPUT_TYPE == "multiple_choice" and not self._fixed:
            dropped = [m for m in metrics if m in POSITION_METRICS]
            if dropped:
                raise ValueError(
                    f"calibkit.plugins.lm_eval, task {name!r}: {dropped} are metrics over answer positions, defined "
                    "only where every question has the same number of choices; this task's questions do not"
                )
        self._rows = tuple(metrics) + (("without_confidence",) if self.OUTPUT_TYPE == "generate_until" else ())
        clash = [m for m in self._keys() if m in self._aggregation_list]
        if clash:
            raise ValueError(f"calibkit.plugins.lm_eval, task {name!r}: the task already has metrics named {clash}")
        for key, (metric, part) in self._keys().items():
            self._aggregation_list[key] = _Aggregation(self, metric, part)
            self._higher_is_better[key] = higher_is_better(metric)

    def _keys(self) -> dict[str, tuple[str, str]]:
        """Each key calibkit adds to the per-sample results -> (metric, part), in the order of the table."""
        keys = {}
        for metric in self._rows:
            keys[metric] = (metric, "value")
            if self._calibkit["bootstrap"] and self._has_interval(metric):
                # after the metric: the harness writes "N/A" as its stderr, then this key's value over it
                keys[f"{metric}_stderr"] = (metric, "stderr")
                lower, upper = interval_rows(metric)
                keys[lower], keys[upper] = (metric, "lower"), (metric, "upper")
        return keys

    def _has_interval(self, metric: str) -> bool:
        if self.OUTPUT_TYPE == "multiple_choice":
            return metric not in ("questions",)
        return metric in (*CONFIDENCE_METRICS, *REJECTION)  # the generations' bootstrap (source_metrics) covers these

    def _choices_and_gold(self, doc: dict, index: int | None = None) -> tuple[list, int]:
        """Return a question's choices and the index of its gold one, as the harness derives it; refuse the others.

        A list of one index (``[2]``) is that choice: the harness scores it as ``pred in gold``, the
        same as ``2``. ``index`` is the question's ``doc_id``, for the message.
        """
        choices = self.doc_to_choice(doc)
        target = self.doc_to_text(doc) if self.multiple_input else self.doc_to_target(doc)
        gold = target
        if isinstance(target, (list, tuple)) and len(target) == 1 and _is_index(target[0]):
            gold = target[0]
        if isinstance(gold, str):
            gold = choices.index(gold) if gold in choices else -1
        where = f"calibkit.plugins.lm_eval, task {self.config.task!r}, the question {_question(doc, index)}"
        if isinstance(gold, (list, tuple)) and len(gold) > 1:
            raise ValueError(
                f"{where}: the gold answer {target!r} names {len(gold)} choices: calibration needs exactly one right "
                "choice per question"
            )
        if not _is_index(gold):
            raise ValueError(
                f"{where}: the gold answer {target!r} names no single choice (an index, the text of a choice, or a "
                "list of one index): calibration needs exactly one right choice per question"
            )
        if not 0 <= int(gold) < len(choices):
            raise ValueError(
                f"{where}: the gold answer {target!r} is not one of the {len(choices)} choices {_short(choices)} "
                "(the harness would only warn)"
            )
        return choices, int(gold)

    def process_results(self, doc: dict, results: list) -> dict:
        """Return the task's own per-sample results, then calibkit's: what its aggregations read.

        Parameters
        ----------
        doc : dict
            The question.
        results : list
            The model's responses: ``(loglikelihood, is_greedy)`` per choice, or the generated text.

        Returns
        -------
        dict
            The included task's metrics (numpy arrays as lists of numbers, so that the samples
            file logs numbers), then one key per calibkit row holding the same value: for a
            multiple-choice question ``{"gold": index, "loglik": [one per choice]}``, for a
            generated answer ``{"confidence": stated or None, "correct": score}``.
        """
        own = super().process_results(doc, results)
        out = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in own.items()}
        for key, value in list(out.items()):  # brier_score's (gold, probabilities): numbers, not a numpy text
            if isinstance(value, tuple) and any(isinstance(v, np.ndarray) for v in value):
                out[key] = tuple(v.tolist() if isinstance(v, np.ndarray) else v for v in value)
        if self.OUTPUT_TYPE == "multiple_choice":
            choices, gold = self._choices_and_gold(doc)
            # acc_mutual_info appends the unconditional requests: the first len(choices) are the question's
            item = {"gold": gold, "loglik": [float(r[0]) for r in results[: len(choices)]]}
        else:
            item = self._generation_item(doc, results, out)
        return {**out, **dict.fromkeys(self._keys(), item)}

    def _generation_item(self, doc: dict, results: list, out: dict) -> dict:
        name = self._calibkit["correct"] or next(iter(out), None)
        if name not in out:
            raise ValueError(
                f"calibkit.plugins.lm_eval, task {self.config.task!r}: no per-sample metric {name!r} says whether an "
                f"answer is right (the task gives {list(out)}): name one as `calibkit: {{correct: NAME}}`"
            )
        score = out[name]
        value = float(score) if isinstance(score, (bool, int, float, np.integer, np.floating)) else math.nan
        if not 0 <= value <= 1:
            raise ValueError(
                f"calibkit.plugins.lm_eval, task {self.config.task!r}: {name} = {score!r} for the question "
                f"{_short(doc)} is neither 0/1 nor a score in [0, 1]"
            )
        text = results[0] if isinstance(results[0], str) else str(results[0])
        try:
            confidence = parse_confidence(text, self._calibkit["words"])
        except ValueError as exc:
            raise ValueError(f"calibkit.plugins.lm_eval, task {self.config.task!r}, {_short(doc)}: {exc}") from None
        return {"confidence": None if math.isnan(confidence) else confidence, "correct": value}

    def calibration(self, items: list) -> dict[str, dict[str, float]]:
        """Compute every calibkit row from the per-sample values (once per list of them).

        Parameters
        ----------
        items : list of dict
            The per-sample values of :meth:`process_results` (the same objects under every key).

        Returns
        -------
        dict
            metric -> ``{"value", "stderr", "lower", "upper"}``.
        """
        key = tuple(map(id, items))
        if key not in self._cache:  # the list is kept with its result: the ids stay those of these objects
            compute = self._choice_numbers if self.OUTPUT_TYPE == "multiple_choice" else self._generation_numbers
            self._cache = {key: (items, compute(items))}
        return self._cache[key][1]

    def _choice_numbers(self, items: list) -> dict[str, dict[str, float]]:
        settings = self._calibkit
        data = choices_of(items, self.config.task)
        report = multiple_choice_report(data, n_bins=settings["n_bins"])["pooled"]
        values = {m: report.get(m) for m in self._rows}
        ci = {}
        if settings["bootstrap"]:
            wanted = tuple(m for m in self._rows if values[m] is not None)
            ci = bootstrap_intervals(
                choice_probabilities(data), data.gold, metrics=wanted, bootstrap=settings["bootstrap"],
                seed=settings["seed"], n_bins=settings["n_bins"],
            )["intervals"]  # fmt: skip
        return {m: _parts(values[m], ci.get(m)) for m in self._rows}

    def _generation_numbers(self, items: list) -> dict[str, dict[str, float]]:
        settings = self._calibkit
        confidence = np.array([math.nan if i["confidence"] is None else i["confidence"] for i in items], dtype=float)
        correct = np.array([i["correct"] for i in items], dtype=float)
        right = (correct >= settings["threshold"]).astype(np.float64)
        judged = source_metrics(  # the rejection rows read the score as given (in [0, 1], checked per answer)
            confidence, right, n_bins=settings["n_bins"], bootstrap=settings["bootstrap"], seed=settings["seed"],
            quality=correct, threshold=settings["threshold"],
        )  # fmt: skip
        judged["without_confidence"] = judged["without"]
        ci = judged.get("intervals", {})
        return {m: _parts(judged[m], ci.get(m)) for m in self._rows}


class _Aggregation:
    """One row of the table: a part (value, stderr, interval bound) of one metric, for the harness to call."""

    def __init__(self, task: CalibratedTask, metric: str, part: str) -> None:
        self.task, self.metric, self.part = task, metric, part
        self.__name__ = f"calibkit_{metric}_{part}"

    def __call__(self, items: list) -> float:
        return self.task.calibration(items)[self.metric][self.part]


def choices_of(items: list[dict], task: str = "lm_eval") -> ChoiceData:
    """Return the multiple-choice questions of :meth:`CalibratedTask.process_results`'s per-sample values.

    Parameters
    ----------
    items : list of dict
        ``{"gold": index, "loglik": [log-likelihood of each choice]}`` per question.
    task : str, default "lm_eval"

    Returns
    -------
    calibkit.lm.multiple_choice.ChoiceData
        One row per question, padded with NaN past its last choice.
    """
    loglik, gold = [i["loglik"] for i in items], [i["gold"] for i in items]
    return ChoiceData.stack(loglik, gold, task=task, source="lm-evaluation-harness")


def write_task(
    folder: str | Path, base: str, *, name: str | None = None, include_path: str | None = None, defaults: bool = True
) -> Path:
    """Write the two-line YAML that adds calibkit's rows to a task the harness knows by name.

    Parameters
    ----------
    folder : str or Path
        The folder to write ``{name}.yaml`` in (give it to the harness's ``--include_path``).
    base : str
        The task to calibrate (``arc_easy``, ``hellaswag``, or one of ``include_path``).
    name : str, optional
        The new task's name; default ``{base}_calibkit``.
    include_path : str, optional
        Where the harness finds ``base`` when it is not one of its own tasks.
    defaults : bool, default True
        Whether to look among the harness's own tasks too (indexing them takes a while).

    Returns
    -------
    Path
        The YAML file.

    Raises
    ------
    ValueError
        When the harness knows no task ``base`` (a group or a tag: write one file per task).
    """
    from lm_eval.tasks import TaskManager

    entry = TaskManager(include_path=include_path, include_defaults=defaults).task_index.get(base)
    if entry is None or entry.yaml_path is None or entry.kind.name != "TASK":
        kind = "unknown" if entry is None else entry.kind.name.lower()
        raise ValueError(f"`base`: {base!r} is no task of lm-evaluation-harness with a YAML file ({kind})")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    name = name or f"{base}_calibkit"
    path = folder / f"{name}.yaml"
    path.write_text(
        f"include: {entry.yaml_path}\nclass: !function calibkit.plugins.lm_eval.CalibratedTask\n"
        f"task: {name}\ntag: null  # not one of {base}'s groups\n"
    )
    return path


def _parts(value: Any, interval: Any) -> dict[str, float]:
    value = math.nan if value is None else float(value)
    if interval is None:
        return {"value": value, "stderr": math.nan, "lower": math.nan, "upper": math.nan}
    lower, upper = (float(b) for b in interval)
    return {"value": value, "stderr": (upper - lower) / (2 * Z95), "lower": lower, "upper": upper}


def _options(task: Any, options: Any, output_type: str) -> dict[str, Any]:
    """Check the ``calibkit:`` settings of a task and fill in the defaults."""
    where = f"calibkit.plugins.lm_eval, task {task!r}"
    if output_type not in ("multiple_choice", "generate_until"):
        raise ValueError(f"{where}: output_type {output_type!r}: calibkit calibrates multiple_choice, generate_until")
    if not isinstance(options, dict) or set(options) - set(_OPTIONS):
        raise ValueError(f"{where}: the `calibkit` key holds a mapping of {list(_OPTIONS)}, got {options!r}")
    known = _CHOICE_NAMES if output_type == "multiple_choice" else _GENERATION_NAMES
    metrics = options.get("metrics")
    if metrics is not None:
        metrics = [metrics] if isinstance(metrics, str) else list(metrics)
        unknown = [m for m in metrics if m not in known]
        if unknown or not metrics:
            shown = unknown or metrics
            raise ValueError(f"{where}: `calibkit: metrics` {shown}: the {output_type} rows are {list(known)}")
    try:  # the keys are the sampling settings' names, checked by their one carrier
        sampling = SamplingSettings(**{k: options[k] for k in ("bootstrap", "seed", "threshold") if k in options})
    except ValueError as exc:
        raise ValueError(f"{where}: " + re.sub(r"`(\w+)`", r"`calibkit: \1`", str(exc))) from None
    return {
        "metrics": metrics,
        "bootstrap": sampling.bootstrap,
        "seed": sampling.seed,
        "n_bins": check_positive_int(options.get("n_bins", DEFAULTS.n_bins), "calibkit: n_bins"),
        "correct": options.get("correct"),
        "threshold": sampling.threshold,
        "words": check_words(options.get("words")),
    }


def _check_harness_metrics(task: Any, config: dict) -> None:
    """Refuse a multiple-choice metric the harness would drop without a word (a function, an unknown name)."""
    if config.get("output_type") != "multiple_choice" or config.get("process_results") is not None:
        return
    for entry in config.get("metric_list") or []:
        metric = entry.get("metric") if isinstance(entry, dict) else entry
        if callable(metric) or metric not in HARNESS_CHOICE_METRICS:
            shown = getattr(metric, "__name__", metric)
            raise ValueError(
                f"calibkit.plugins.lm_eval, task {task!r}: metric {shown!r} gives no row in a multiple_choice task "
                f"(the harness computes only {list(HARNESS_CHOICE_METRICS)} by name, and drops the others without "
                "a warning); calibkit's rows come from this class: remove it from metric_list"
            )


def _filter_names(config: dict) -> str:
    filters = config.get("filter_list")
    return ", ".join(str(f.get("name")) if isinstance(f, dict) else str(f) for f in filters) if filters else ""


def _is_index(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _question(doc: Any, index: int | None) -> str:
    """Name a question as the samples file does: its ``doc_id`` (its place among the task's questions), and its text."""
    return _short(doc) if index is None else f"doc_id {index} {_short(doc)}"


def _short(doc: Any) -> str:
    text = repr(doc)
    return text if len(text) <= 120 else text[:117] + "..."
