"""The ``calibkit`` command: one module a sub-command, the parser in :mod:`calibkit.cli.parser`.

- ``calibkit report`` (:mod:`~calibkit.cli.report`): every calibration metric of saved
  predictions (``--predictions`` a file), of shards (a folder or glob: :mod:`~calibkit.cli.report_shards`),
  of multiple-choice logs (:mod:`~calibkit.cli.report_choices`), of multi-label predictions
  (``--multilabel``: :mod:`~calibkit.cli.report_multilabel`), or the calibrators' comparison for a
  model on a dataset (``--model`` and ``--dataset``: :mod:`~calibkit.cli.report_model`);
- ``calibkit demo`` (:mod:`~calibkit.cli.demo`): fine-tune a real MiniLM offline and compare every
  calibrator (the tasks are in :mod:`calibkit.demos`);
- ``calibkit install-modules`` (:mod:`~calibkit.cli.install_modules`): makes ``evaluate.load("cece")``
  and the other modules work offline;
- ``calibkit warmup`` (:mod:`~calibkit.cli.warmup`): compiles and caches the metric kernels now
  (first calls are fast anyway: they run on torch while the kernels compile).

:mod:`calibkit.cli.common` holds what they share (option checks, the ``--output`` folder, the table).
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
    from calibkit.cli import demo, install_modules, report, warmup
    from calibkit.cli.parser import build_parser

    commands = {"demo": demo.run, "report": report.run, "install-modules": install_modules.run, "warmup": warmup.run}
    args = build_parser(commands).parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, OSError) as exc:  # bad input, files that cannot be read or written
        from calibkit.io.prediction_files import for_option

        message = for_option(str(exc), "--predictions")  # the readers name their Python argument
        print(f"calibkit: error: {message}".splitlines()[0], file=sys.stderr)
        return 2
    except MemoryError as exc:
        detail = f" ({str(exc).splitlines()[0]})" if str(exc) else ""
        print(f"calibkit: error: not enough memory{detail}", file=sys.stderr)
        return 2
