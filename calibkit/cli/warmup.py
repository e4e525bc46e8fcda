"""``calibkit warmup``: compiles and caches the metric kernels now (first calls run on torch meanwhile)."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    """Run ``calibkit warmup``: compile and cache the metric kernels of the common input kinds.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``calibkit warmup``.

    Returns
    -------
    int
        The exit status, 0 (bad input raises a one-line ``ValueError``, which :func:`calibkit.cli.main`
        prints as exit status 2).
    """
    import time

    from calibkit.metrics.warmup import warmup

    start = time.perf_counter()
    compiled = warmup(verbose=not args.quiet)
    print(f"calibkit: {compiled} kernel kinds compiled and cached in {time.perf_counter() - start:.0f} s")
    return 0
