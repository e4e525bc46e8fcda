"""The ``calibkit`` command: one module a sub-command, the parser in :mod:`calibkit.cli.parser`.

A command per input kind, each with only the options its input takes (the metric settings and
the outputs come from the parent parsers of :mod:`calibkit.cli.options`):

- ``calibkit report`` (:mod:`~calibkit.cli.report`): every calibration metric of saved
  predictions (``--predictions`` a file), or of shards (a folder or glob:
  :mod:`~calibkit.cli.report_shards`);
- ``calibkit choices`` (:mod:`~calibkit.cli.report_choices`): multiple-choice logs;
- ``calibkit generations`` (:mod:`~calibkit.cli.report_generations`): generated answers;
- ``calibkit served`` (:mod:`~calibkit.cli.report_served`): a served model's responses (their
  log-probabilities, in OpenAI's schema);
- ``calibkit multilabel`` (:mod:`~calibkit.cli.report_multilabel`): multi-label predictions;
- ``calibkit compare`` (:mod:`~calibkit.cli.report_model`): the calibrators' comparison for a
  model on a dataset;
- ``calibkit judge`` (:mod:`~calibkit.cli.report_judge`): an LLM judge against people's labels,
  and its pass rate corrected (PPI++, Rogan-Gladen);
- ``calibkit demo`` (:mod:`~calibkit.cli.demo`): fine-tune a real MiniLM offline and compare every
  calibrator (the tasks are in :mod:`calibkit.demos`);
- ``calibkit install-modules`` (:mod:`~calibkit.cli.install_modules`): makes ``evaluate.load("cece")``
  and the other modules work offline;
- ``calibkit warmup`` (:mod:`~calibkit.cli.warmup`): compiles and caches the metric kernels now
  (first calls are fast anyway: they run on torch while the kernels compile).

The old forms of ``calibkit report`` (``--generations``, ``--model``, ``--multilabel``,
multiple-choice logs) and of ``calibkit generations`` (a served model's responses) still work
for one release (:mod:`~calibkit.cli.legacy`).
:mod:`calibkit.cli.common` holds what the commands share (option checks, the ``--output``
folder, the flags named in errors, the table).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run the ``calibkit`` command; bad input is one line on stderr and exit status 2.

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0, or 2 on bad input.
    """
    from calibkit.cli import (
        demo,
        install_modules,
        report,
        report_choices,
        report_generations,
        report_judge,
        report_model,
        report_multilabel,
        report_served,
        warmup,
    )
    from calibkit.cli.common import name_flags
    from calibkit.cli.legacy import rewrite
    from calibkit.cli.parser import build_parser

    commands = {
        "demo": demo.run,
        "report": report.run,
        "choices": report_choices.run,
        "generations": report_generations.run,
        "served": report_served.run,
        "multilabel": report_multilabel.run,
        "compare": report_model.run,
        "judge": report_judge.run,
        "install-modules": install_modules.run,
        "warmup": warmup.run,
    }
    args = build_parser(commands).parse_args(rewrite(list(sys.argv[1:] if argv is None else argv)))
    try:
        return args.func(args)
    except (ValueError, OSError) as exc:  # bad input, files that cannot be read or written
        # the library names its Python arguments; the command names its flags
        print(f"calibkit: error: {name_flags(str(exc), args.command)}".splitlines()[0], file=sys.stderr)
        return 2
    except MemoryError as exc:
        detail = f" ({str(exc).splitlines()[0]})" if str(exc) else ""
        print(f"calibkit: error: not enough memory{detail}", file=sys.stderr)
        return 2
