"""Judging calibrators and the papers' claims: comparisons, re-splits, verdicts, figures and reports.

- :mod:`~calibkit.verdicts.comparison`: every calibrator fitted on one split, every metric on the other;
- :mod:`~calibkit.verdicts.resplits`: the same over random re-splits, with intervals and verdicts;
- :mod:`~calibkit.verdicts.claims`: the catalogue of the papers' claims and how each is judged;
- :mod:`~calibkit.verdicts.sequences`: labelled token rows taken out of their sentences and put back;
- :mod:`~calibkit.verdicts.plots`: reliability diagrams and region plots;
- :mod:`~calibkit.verdicts.reporting`: tables, JSON, figures and the HTML page.
"""
