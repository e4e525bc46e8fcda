"""Judging calibrators and the papers' claims: comparisons, re-splits, verdicts and their reports.

- :mod:`~calibkit.verdicts.comparison`: every calibrator fitted on one split, every metric on the other;
- :mod:`~calibkit.verdicts.resplits`: the same over random re-splits, with intervals and verdicts;
- :mod:`~calibkit.verdicts.claims`: the catalogue of the papers' claims and how each is judged;
- :mod:`~calibkit.verdicts.sequences`: labelled token rows taken out of their sentences and put back;
- :mod:`~calibkit.verdicts.held`: the conformal sets' table (what needs the test rows);
- :mod:`~calibkit.verdicts.reporting`: the comparison's tables, CSV, JSON and the HTML page.

The figures (the displays and the comparison's figures) and the Markdown tables' cells live in
:mod:`calibkit.plots`; ``calibkit.verdicts.plots`` still imports it, with a warning.
"""
