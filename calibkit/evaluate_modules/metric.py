"""The base class of calibkit's ``evaluate`` metric scripts: fast storage, inputs, errors.

Why not plain ``evaluate.Metric`` storage: evaluate 0.4.6 encodes every row of ``add_batch``
and ``compute`` into Arrow and writes it to a cache file, which for large evaluations costs
orders of magnitude more time and memory than the computation itself
(``benchmarks/hf_evaluate_modules.py`` measures both). And
calibkit's additive statistics cannot be taken at ``add_batch`` time either, because the
settings they depend on (``n_bins``, ``from_logits``, ``ignore_index``) reach the module only
in ``compute``. So :class:`CalibrationMetric` keeps the batches as numpy arrays and, in
``compute``, concatenates them and calls the exact one-shot functional core (ACE included):

- one process (``num_process == 1``, the default): batches are held in memory (copied, as
  evaluate copies them into Arrow), no Arrow, no cache file. Memory: the predictions added.
- distributed (``num_process > 1``): every process writes its batches to its evaluate cache
  file as ONE Arrow row per batch (raw bytes, dtype and shape: Arrow copies a blob instead of
  encoding N rows), at most every 64 MiB and at ``compute``; process 0 reads all the files
  through evaluate's own locking and rendez-vous (same ``experiment_id``), unpacks and computes.

The declared ``features`` stay the user-facing ones (a vector of floats and an int label per
sample, per token for the ``"token"`` configuration) for the docs and the Gradio widget.
"""

from __future__ import annotations

import abc
import dataclasses
import inspect
import sys
from typing import Any

import datasets
import evaluate
import numpy as np
from datasets.utils.py_utils import temp_seed

import calibkit
from calibkit.metrics.registry import module_metrics
from calibkit.metrics.settings import DEFAULTS
from calibkit.metrics.validation import InputError, prepare_labels, shift_labels, to_numpy

CORE_METRICS = module_metrics()  # each single-purpose module's metrics (the registry's)

CONFIGS = ("default", "token", "multilabel", "next_token")
UNSCORED = np.iinfo(np.int64).min
"""next_token configuration: the label the shift gives the last position of each sequence, until
``compute`` knows ``ignore_index`` (rows are held flat, so the shift is done when they are added)."""
FLUSH_BYTES = 64 * 2**20
"""Distributed mode: write the held batches to the Arrow cache file once they exceed this."""

_BLOB = {
    "data": datasets.Value("large_binary"),
    "dtype": datasets.Value("string"),
    "shape": datasets.Sequence(datasets.Value("int64")),
}
PACKED_FEATURES = datasets.Features({"predictions": _BLOB, "references": _BLOB})
"""What the Arrow cache file holds in distributed mode: one row per batch."""


def _features(config: str) -> list[datasets.Features]:
    label = datasets.Value("int64")
    vector = datasets.Sequence(datasets.Value("float64"))
    if config == "multilabel":  # one probability (or logit) and one 0/1 label per label
        return [datasets.Features({"predictions": vector, "references": vector})]
    if config in ("token", "next_token"):  # one entry per token of each sequence; labels -100 mark padding
        return [
            datasets.Features({"predictions": datasets.Sequence(vector), "references": datasets.Sequence(label)}),
            datasets.Features({"predictions": vector, "references": datasets.Sequence(label)}),
        ]
    return [
        datasets.Features({"predictions": vector, "references": label}),
        datasets.Features({"predictions": datasets.Value("float64"), "references": label}),  # binary: P(class 1)
    ]


def _pack(array: np.ndarray) -> dict[str, Any]:
    array = np.ascontiguousarray(array)
    # A memoryview, not tobytes(): Arrow copies the buffer once, into the column.
    return {"data": memoryview(array).cast("B"), "dtype": array.dtype.str, "shape": list(array.shape)}


def _unpack(blob: dict[str, Any]) -> np.ndarray:
    return np.frombuffer(blob["data"], dtype=np.dtype(blob["dtype"])).reshape(blob["shape"])


def _renamed(message: str) -> str:
    """Rename the core's ``probs``, ``sets``, ``labels`` in a message to ``predictions``, ``references``.

    The core writes its arguments in backticks, indexed ones too (```labels[:, t + 1]```), so that
    only the names are renamed, never the word "labels" in a sentence.
    """
    message = message.replace("`probs", "`predictions").replace("`sets`", "`predictions`")
    return message.replace("`labels`", "`references`").replace("`labels[", "`references[")


def _ignore_index(keywords: dict[str, Any]) -> int:
    """Read the ``ignore_index`` of a script's keywords: its ``settings`` object's when given, else the keyword."""
    given = keywords.get("settings")
    return given.ignore_index if given is not None else keywords.get("ignore_index", DEFAULTS.ignore_index)


def _shifted(references: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """next_token configuration: the labels of ``shape`` shifted, the shift's gaps :data:`UNSCORED`."""
    try:
        labels = prepare_labels(references)
    except ValueError as exc:  # the core names its `labels`; this configuration's are `references`
        raise ValueError(_renamed(str(exc))) from exc
    return shift_labels(labels.reshape(shape), UNSCORED)


def _check_something_to_score(shifted: np.ndarray, ignore_index: int) -> None:
    """next_token configuration: refuse references that leave no token to score after the shift, naming them.

    Every reference ``ignore_index``, only position 0 labelled, sequences of one token: the core
    would say its ``labels`` have no sample; this configuration's argument is ``references``,
    and the shift is what left nothing.
    """
    if len(shifted) and (shifted == ignore_index).all():
        raise ValueError(
            "`references`: no token to score: in the next_token configuration the predictions at position t are "
            f"scored against `references[:, t + 1]`, and every one of those is ignore_index={ignore_index} (give "
            "`references` unshifted: the input ids, with ignore_index on padding and prompt)"
        )


def _with_next_token(keywords: dict[str, Any]) -> dict[str, Any]:
    """Return a script's keywords with ``next_token`` on: in its ``settings`` object when one is given."""
    given = keywords.get("settings")
    if given is not None:
        return {**keywords, "settings": dataclasses.replace(given, next_token=True)}
    return {**keywords, "next_token": True}


def _nested_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _nested_json(v) for k, v in value.items()}
    return _json_friendly(value)


def _json_friendly(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _check_finite(p: np.ndarray, y: np.ndarray) -> None:
    """Refuse a batch with NaN or inf where the reference is a class (>= 0).

    Compute would fail on it with every setting, and every batch added before it with it.
    """
    if p.dtype.kind != "f" or not p.size:
        return
    finite = np.isfinite(p)
    if y.shape != p.shape and p.ndim > 1:  # a row a reference (multilabel: an entry a reference)
        finite = finite.reshape(len(p), -1).all(axis=1)
    bad = ~finite & (np.asarray(y) >= 0)  # Trainer pads with -100: padding may hold anything
    if bad.any():
        i = int(np.flatnonzero(bad.reshape(-1))[0])
        reference = np.asarray(y).reshape(-1)[i].tolist()
        raise ValueError(
            f"`predictions` contains NaN or inf at position {i} of this batch (reference {reference!r}); "
            "the batch was not added, and the batches added before it are kept"
        )


class CalibrationMetric(evaluate.Metric, metaclass=abc.ABCMeta):
    """``evaluate.Metric`` for calibration metrics: fast storage, sequence and token configurations.

    A script subclasses it with a ``_compute`` whose keyword arguments are the metric's
    settings and which calls :meth:`_run` with the functional-core function; the script's
    ``_DESCRIPTION``, ``_KWARGS_DESCRIPTION`` and ``_CITATION`` become its ``MetricInfo``.
    Storage: see the module docstring. Configurations: ``"default"``, predictions ``(N, K)`` or
    ``(N,)`` (binary, P(class 1)) and references ``(N,)``; ``"token"``, per sequence: predictions
    ``(N, L, K)`` or ``(N, L)`` arrays, or lists of per-sequence ``(L_i, K)`` arrays, and
    references ``(N, L)`` (or per-sequence lists) where ``-100`` marks padding, as ``Trainer``
    produces them (its -100 padding of the logits is masked by the labels); ``"multilabel"``,
    predictions ``(N, K)`` (one probability, or logit, per label) and multi-hot references
    ``(N, K)``: every metric of the module per label, averaged (:func:`calibkit.multilabel_report`);
    ``"next_token"``, a causal LM's sequences as the token configuration reads them (logits
    ``(N, T, V)`` and the labels its ``Trainer`` gives, unshifted), scored at position ``t``
    against the label at ``t + 1`` (``next_token=True`` of :func:`calibkit.calibration_report`).

    Parameters
    ----------
    config_name : {"default", "token", "multilabel", "next_token"}, optional
        The configuration (None means ``"default"``).
    **kwargs
        ``evaluate.Metric``'s options (``num_process``, ``process_id``, ``experiment_id``, ...).
    """

    configurations: tuple[str, ...] = CONFIGS
    """The configurations a module of this class can be loaded with."""

    def __init__(self, config_name: str | None = None, **kwargs: Any) -> None:
        if config_name not in (None, *self.configurations):
            raise ValueError(
                f"`config_name` must be one of {list(self.configurations)} (or None for 'default'), got {config_name!r}"
            )
        self._held: list[tuple[np.ndarray, np.ndarray]] = []
        self._held_bytes = 0
        self._row_shape: tuple[int, ...] | None = None
        super().__init__(config_name=config_name, **kwargs)

    # ---------------------------------------------------------------- evaluate hooks

    @abc.abstractmethod
    def _compute(self, *, predictions: Any = None, references: Any = None, **settings: Any) -> dict[str, Any]:
        """Compute the metric: the script's explicit keyword settings, then ``return self._run(core_function, ...)``.

        Abstract so that evaluate's ``import_main_class``, which takes the first non-abstract
        ``EvaluationModule`` subclass in the script's namespace, never picks this base class.
        """

    def _info(self) -> evaluate.MetricInfo:
        script = sys.modules[type(self).__module__]
        return evaluate.MetricInfo(
            description=script._DESCRIPTION,
            citation=script._CITATION,
            inputs_description=script._KWARGS_DESCRIPTION,
            features=self._declared_features(),
            homepage="https://pypi.org/project/calibkit/",
            codebase_urls=["https://pypi.org/project/calibkit/"],
        )

    def _declared_features(self) -> list[datasets.Features]:
        """Return the user-facing features of the configuration (the docs' and the Gradio widget's)."""
        return _features(self.config_name)

    def _infer_feature_from_batch(self, batch: dict[str, Any]) -> datasets.Features:
        return PACKED_FEATURES  # only the distributed path writes Arrow, and it writes packed batches

    def _infer_feature_from_example(self, example: dict[str, Any]) -> datasets.Features:
        return PACKED_FEATURES

    def __len__(self) -> int:
        """Rows (samples, or tokens for the token configuration) held and not yet computed."""
        return sum(len(y) for _, y in self._held)

    # ---------------------------------------------------------------- inputs

    def _check_inputs(self, kwargs: dict[str, Any]) -> None:
        bad = [name for name in kwargs if name not in self._feature_names()]
        if bad:
            raise ValueError(
                f"Bad inputs for evaluation module: {bad}. All required inputs are {self._feature_names()}"
            )

    def _rows(self, predictions: Any, references: Any) -> tuple[np.ndarray, np.ndarray]:
        """One row per sample (token): predictions ``(R, K)`` or ``(R,)``, references ``(R,)``."""
        missing = [name for name, v in (("predictions", predictions), ("references", references)) if v is None]
        if missing:
            raise ValueError(
                f"Evaluation module inputs are missing: {missing}. All required inputs are {self._feature_names()}"
            )
        if self.config_name == "token":
            return self._token_rows(predictions, references)
        if self.config_name == "next_token":
            return self._token_rows(predictions, references, shift=True)
        if self.config_name == "multilabel":
            p, y = to_numpy(predictions, "predictions"), to_numpy(references, "references")
            if p.ndim != 2 or y.shape != p.shape:
                raise ValueError(
                    f"`predictions` has shape {p.shape} and `references` {y.shape}: the multilabel configuration "
                    "needs both (N, K), one column per label (references multi-hot)"
                )
            return p, y
        p, y = to_numpy(predictions, "predictions"), to_numpy(references, "references")
        if p.ndim == 2 and y.shape == p.shape and y.size and np.isin(y, (0, 1)).all():
            raise ValueError(
                f"`predictions` and `references` both of shape {p.shape}, references 0/1: they look like multi-label "
                f'(one column per label, multi-hot); load the multilabel configuration: evaluate.load("{self.name}", '
                f'"multilabel") (for a binary token classifier\'s P(class 1) per token: the "token" configuration)'
            )
        if p.ndim == 3 or y.ndim == 2:
            raise ValueError(
                f"`predictions` of shape {p.shape} and `references` of shape {y.shape} look like token classification; "
                f'load the token configuration: evaluate.load("{self.name}", "token")'
            )
        if y.ndim != 1 or p.ndim not in (1, 2):
            raise ValueError(
                f"`predictions` must have shape (N, K) or (N,) and `references` shape (N,); got {p.shape} and {y.shape}"
            )
        if len(p) != len(y):
            raise ValueError(f"Mismatch in the number of predictions ({len(p)}) and references ({len(y)})")
        return p, y

    def _token_rows(self, predictions: Any, references: Any, shift: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Flatten sequences to token rows; ``shift``: each row's label is the next position's (next_token)."""
        if isinstance(predictions, (list, tuple)) or isinstance(references, (list, tuple)):
            # Per-sequence lists of different lengths: a loop over sequences, not tokens.
            if len(predictions) != len(references):
                raise ValueError(
                    f"Mismatch in the number of predictions ({len(predictions)}) and references ({len(references)})"
                )
            seqs = [(to_numpy(p, "predictions"), to_numpy(y, "references")) for p, y in zip(predictions, references)]
            for i, (p, y) in enumerate(seqs):
                if y.ndim != 1 or p.ndim not in (1, 2) or len(p) != len(y):
                    raise ValueError(
                        f"`predictions` sequence {i} has shape {p.shape} but `references` sequence {i} has shape "
                        f"{y.shape}: each sequence needs one prediction (a vector, or P(class 1)) per token label"
                    )
            if not seqs:
                return np.empty((0,)), np.empty((0,), dtype=np.int64)
            if shift:  # a loop over sequences, not tokens
                seqs = [(p, _shifted(y, (1, -1))) for p, y in seqs]
            return self._concat([p for p, _ in seqs], "predictions"), np.concatenate([y for _, y in seqs])
        p, y = to_numpy(predictions, "predictions"), to_numpy(references, "references")
        if y.ndim != 2 or p.ndim not in (2, 3) or p.shape[:2] != y.shape:
            raise ValueError(
                f"`predictions` has shape {p.shape} and `references` {y.shape}: the token configuration needs "
                "predictions (sequences, tokens, classes) or (sequences, tokens) and references (sequences, tokens)"
            )
        if shift:
            return p.reshape(-1, *p.shape[2:]), _shifted(y, y.shape)
        return p.reshape(-1, *p.shape[2:]), y.reshape(-1)

    @staticmethod
    def _concat(arrays: list[np.ndarray], name: str) -> np.ndarray:
        if len(arrays) == 1:
            return arrays[0]
        shapes = {a.shape[1:] for a in arrays}
        if len(shapes) > 1:
            raise ValueError(f"`{name}`: batches disagree on the shape of a row (classes): {sorted(shapes)}")
        return np.concatenate(arrays)

    def _hold(self, p: np.ndarray, y: np.ndarray) -> None:
        if len(y) == 0:
            return
        if self._row_shape is not None and p.shape[1:] != self._row_shape:
            raise ValueError(
                f"`predictions` rows have shape {p.shape[1:]} in this batch but {self._row_shape} in earlier ones "
                "(a different number of classes, or binary input mixed with multi-class)"
            )
        self._row_shape = p.shape[1:]
        # Copy, as evaluate's Arrow writer does: the caller may reuse its buffers.
        self._held.append((np.array(p), np.array(y)))
        self._held_bytes += p.nbytes + y.nbytes
        if self.num_process > 1 and self._held_bytes >= FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        """Distributed mode: write the held batches to this process's Arrow cache file, one row each."""
        if not self._held:
            return
        held, self._held, self._held_bytes = self._held, [], 0
        super().add_batch(predictions=[_pack(p) for p, _ in held], references=[_pack(y) for _, y in held])

    # ---------------------------------------------------------------- evaluate API

    def add_batch(self, *, predictions: Any = None, references: Any = None, **kwargs: Any) -> None:
        """Add a batch of predictions and references (held as arrays; see the class docstring).

        Parameters
        ----------
        predictions : array-like, torch.Tensor or list
            Probabilities (logits with ``from_logits=True`` at ``compute``): ``(N, K)`` or ``(N,)``;
            token configuration: ``(N, L, K)``/``(N, L)`` or per-sequence lists.
        references : array-like or list of int
            True classes: ``(N,)``; token configuration: ``(N, L)`` or per-sequence lists.
        **kwargs
            Refused: ``evaluate`` takes only the features here.

        Raises
        ------
        ValueError
            On a missing input, shapes that do not match, or NaN or inf in a row whose reference
            is a class (negative references mark padding, which may hold anything): such a batch
            is not added, since no setting of ``compute`` could use it. Values that are only bad
            for one reading (probabilities outside [0, 1], which logits may be) are checked at
            ``compute``, where ``from_logits`` is known.
        """
        self._check_inputs(kwargs)
        batch = {"predictions": predictions, "references": references, **kwargs}
        p, y = self._rows(batch["predictions"], batch["references"])
        _check_finite(p, y)
        self._hold(p, y)

    def add(self, *, prediction: Any = None, reference: Any = None, **kwargs: Any) -> None:
        """Add one prediction and reference (one sequence for the token configuration).

        Parameters
        ----------
        prediction : array-like or float
            One probability vector (or P(class 1)); token configuration: one sequence's vectors.
        reference : int or list of int
            Its true class; token configuration: the sequence's labels.
        **kwargs
            Refused: ``evaluate`` takes only the features here.
        """
        self._check_inputs(kwargs)
        example = {"predictions": prediction, "references": reference, **kwargs}
        self.add_batch(predictions=[example["predictions"]], references=[example["references"]])

    def compute(self, *, predictions: Any = None, references: Any = None, **kwargs: Any) -> dict[str, Any] | None:
        """Compute the metric on everything added, plus ``predictions``/``references`` if given.

        A failed compute (a bad setting, a NaN) keeps the added batches, so it can be retried.

        Parameters
        ----------
        predictions : array-like, torch.Tensor or list
            Probabilities (logits with ``from_logits=True`` at ``compute``): ``(N, K)`` or ``(N,)``;
            token configuration: ``(N, L, K)``/``(N, L)`` or per-sequence lists.
        references : array-like or list of int
            True classes: ``(N,)``; token configuration: ``(N, L)`` or per-sequence lists.
        **kwargs
            The module's settings (``from_logits``, ``ignore_index``, ``n_bins``, ...).

        Returns
        -------
        dict or None
            The result dict on process 0 and ``None`` on the other processes, as evaluate does.

        Raises
        ------
        ValueError
            When nothing was added or given, or on bad input or settings.
        """
        compute_kwargs = {k: v for k, v in kwargs.items() if k not in self._feature_names()}
        given = predictions is not None or references is not None
        if self.num_process > 1:
            if given:
                self.add_batch(predictions=predictions, references=references)
            self._flush()
            return super().compute(**compute_kwargs)  # evaluate's gathering; _compute unpacks the rows
        new = [(p, y) for p, y in ([self._rows(predictions, references)] if given else []) if len(y)]
        if not self._held and not new:
            raise ValueError(
                "Nothing to compute: call `add` or `add_batch` at least once before `compute()`, "
                "or pass `predictions=` and `references=`"
            )
        if len(self._held) > 1:
            # The added batches become one held batch (the originals are freed), and stay held
            # until a compute succeeds: a failed compute (a bad setting, a NaN) loses nothing,
            # where evaluate's own modules forget every batch.
            merged = (
                self._concat([a for a, _ in self._held], "predictions"),
                self._concat([b for _, b in self._held], "references"),
            )
            self._held = [merged]
        rows = self._held + new  # compute()'s own predictions count once, and are not kept
        p = rows[0][0] if len(rows) == 1 else self._concat([a for a, _ in rows], "predictions")
        y = rows[0][1] if len(rows) == 1 else self._concat([b for _, b in rows], "references")
        del rows
        with temp_seed(self.seed):
            result = self._compute(predictions=p, references=y, **compute_kwargs)
        self._held, self._held_bytes, self._row_shape = [], 0, None
        return result

    # ---------------------------------------------------------------- for the scripts' _compute

    def _multilabel(self, probs: np.ndarray, labels: np.ndarray, settings: dict[str, Any]) -> dict[str, Any]:
        """Compute the multilabel configuration: the module's metrics per label and averaged, from one report.

        ``calibration_report`` returns :func:`calibkit.multilabel_report` whole; a single-purpose
        module returns, per metric of a label, ``<metric>_per_label``, ``_macro``, ``_weighted``
        and ``_micro``, and the class-wise summaries (``cece`` ...) over the labels' ECEs. A module
        with neither (``sce``, ``selective``) refuses the configuration.
        """
        from calibkit.metrics.multilabel import LABEL_METRICS
        from calibkit.metrics.settings import names

        known = {k: v for k, v in settings.items() if k in names() and v is not None}
        own = CORE_METRICS.get(self.name)
        summaries = CORE_METRICS["cece"]  # the class-wise summaries, here over the labels' ECEs
        if own is not None and not any(m in LABEL_METRICS or m in summaries for m in own):
            raise ValueError(
                f"the {self.name} module has no multilabel configuration (its metrics {list(own)} are not defined "
                "per label); load it without one"
            )
        wanted = [m for m in (own or LABEL_METRICS) if m in LABEL_METRICS] or ["ece"]
        try:
            report = calibkit.multilabel_report(
                probs, labels, metrics=wanted, settings=settings.get("settings"), **known
            )
        except ValueError as exc:
            raise ValueError(_renamed(str(exc))) from exc
        if own is None:
            out = report
        else:
            out = {}
            for m in (m for m in own if m in LABEL_METRICS):
                out[f"{m}_per_label"] = report["per_label"][m]
                out.update({f"{m}_{avg}": report[avg][m] for avg in ("macro", "weighted", "micro")})
            out.update({m: report[m] for m in own if m in summaries and m != "subset_ece"})
            if "subset_ece" in own:
                out["per_label_ece"] = report["per_label"]["ece"]
        return _nested_json(out)

    def _gathered(self, predictions: Any, references: Any) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(predictions, list) and predictions and isinstance(predictions[0], dict):
            # Distributed: the packed rows of every process, as evaluate read them back.
            return (
                self._concat([_unpack(b) for b in predictions], "predictions"),
                self._concat([_unpack(b) for b in references], "references"),
            )
        if isinstance(predictions, np.ndarray) and isinstance(references, np.ndarray) and references.ndim == 1:
            return predictions, references  # from compute(): already rows
        return self._rows(predictions, references)

    def _run(self, metric: Any, predictions: Any, references: Any, **settings: Any) -> dict[str, Any]:
        """Call the functional core on the gathered rows; ``metric`` is a function or a tuple of metric names.

        A function (``calibkit.ace``, ...) returns one value, reported under the module's name,
        or a dict (``calibkit.calibration_report``). A tuple of names of :data:`calibkit.METRICS`
        runs one :class:`calibkit.CalibrationAccumulator` pass (exact for all but ACE) and
        reports those names, ``subset_ece`` as ``per_class_ece``.
        """
        probs, labels = self._gathered(predictions, references)
        vocabulary = False
        if self.config_name == "next_token":  # the rows are the shifted tokens: the shift's gaps are skipped
            ignore_index = _ignore_index(settings)
            labels = np.where(labels == UNSCORED, ignore_index, labels)
            _check_something_to_score(labels, ignore_index)
            reads_next_token = not callable(metric) or "next_token" in inspect.signature(metric).parameters
            if probs.ndim == 2 and reads_next_token:
                # The core's own next-token input, so that its numbers are the module's (SPEC.md: over a
                # vocabulary ACE and SCE average over the tokens that occur, ACE by name only): the rows
                # as one sequence (logits read in place), the labels unshifted again. The last row ends
                # a sequence (its label is a gap) and position 0's label is never read.
                probs, labels = probs[None], np.concatenate(([ignore_index], labels[:-1]))[None]
                settings = _with_next_token(settings)
                vocabulary = True
        if self.config_name == "multilabel":
            return self._multilabel(probs, labels, settings)
        try:
            if callable(metric):
                result = metric(probs, labels, **settings)
            else:
                report = calibkit.CalibrationAccumulator(metric, **settings).update(probs, labels).compute()
                result = {("per_class_ece" if m == "subset_ece" else m): report[m] for m in metric}
        except InputError as exc:
            if vocabulary:  # the place in the references as added (flat), not in the one sequence above
                exc = InputError(exc.head, exc.index, exc.index, exc.tail, exc.batch)
            raise ValueError(_renamed(str(exc))) from exc
        except ValueError as exc:
            raise ValueError(_renamed(str(exc))) from exc
        if not isinstance(result, dict):
            result = {self.name: result}
        return {key: _json_friendly(value) for key, value in result.items()}


class SetMetric(CalibrationMetric, metaclass=abc.ABCMeta):
    """``evaluate.Metric`` for prediction sets: boolean masks over the classes, and the labels.

    The storage, the batches and the errors of :class:`CalibrationMetric`; the predictions are sets
    instead of probabilities. Configurations: ``"default"``, predictions ``(N, K)`` booleans (True
    where the class is in the row's set, as :meth:`calibkit.calibrators.SplitConformal.predict_sets`
    returns them) and references ``(N,)``; ``"token"``, per sequence, ``(N, L, K)`` and ``(N, L)``
    (or per-sequence lists), ``-100`` marking padding. Sets given as lists of class indices are
    refused, and so are 0/1 integers, which look the same: ``[0, 1]`` could be the classes 0 and 1
    or the set of class 1 alone.

    Parameters
    ----------
    config_name : {"default", "token"}, optional
        The configuration (None means ``"default"``).
    **kwargs
        ``evaluate.Metric``'s options (``num_process``, ``process_id``, ``experiment_id``, ...).
    """

    configurations = ("default", "token")

    def _declared_features(self) -> list[datasets.Features]:
        mask = datasets.Sequence(datasets.Value("bool"))
        label = datasets.Value("int64")
        if self.config_name == "token":
            return [datasets.Features({"predictions": datasets.Sequence(mask), "references": datasets.Sequence(label)})]
        return [datasets.Features({"predictions": mask, "references": label})]

    def _rows(self, predictions: Any, references: Any) -> tuple[np.ndarray, np.ndarray]:
        """One row per sample (token): sets ``(R, K)`` booleans, references ``(R,)``; anything else refused."""
        how = (
            "must be prediction sets as boolean masks, a row of K booleans per sample (True where the class "
            "is in the set), as SplitConformal.predict_sets returns them"
        )
        fix = (
            "lists of class indices are not read, nor 0/1 integers, which look alike: build the mask "
            "(mask = np.zeros((N, K), bool); mask[i, indices] = True), or cast a 0/1 mask with .astype(bool)"
        )
        try:
            p, y = super()._rows(predictions, references)
        except ValueError as exc:
            if "could not be read as an array" not in str(exc):
                raise
            raise ValueError(f"`predictions` {how}; got rows of different lengths: {fix}") from exc
        if len(y) and (p.dtype != np.bool_ or p.ndim != 2):
            raise ValueError(f"`predictions` {how}; got dtype {p.dtype} and rows of shape {p.shape[1:]}: {fix}")
        return p, y
