"""``calibkit install-modules``: makes ``evaluate.load("cece")`` and the other modules work offline."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    """Run ``calibkit install-modules``: install the ``evaluate`` modules into evaluate's cache.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``calibkit install-modules``.

    Returns
    -------
    int
        The exit status, 0 (bad input raises a one-line ``ValueError``, which :func:`calibkit.cli.main`
        prints as exit status 2).
    """
    from calibkit.evaluate_modules import install_evaluate_modules

    scripts = install_evaluate_modules(args.names or None, modules_cache=args.modules_cache)
    for script in scripts:
        print(script)
    names = sorted({script.stem for script in scripts})
    print(
        f'installed {len(names)} evaluate modules ({", ".join(names)}): evaluate.load("{names[0]}") or '
        f'evaluate.load("calibkit/{names[0]}"); set HF_EVALUATE_OFFLINE=1 to skip the Hub look-ups'
    )
    return 0
