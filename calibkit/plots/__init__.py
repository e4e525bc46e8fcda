"""Figures and tables: the calibration displays, the comparison's figures, the Markdown tables.

- ``calibkit.plots.diagrams``: reliability diagrams, region plots and the smooth reliability
  diagram, in scikit-learn's Display style (exported here);
- :mod:`~calibkit.plots.figures`: the figures of a comparison of calibrators
  (:func:`~calibkit.plots.figures.write_figures`), drawn on backend-free matplotlib figures;
- :mod:`~calibkit.plots.tables`: the Markdown table and its cells, which every report renders with;
- ``calibkit.plots.pages``: one self-contained HTML page (its sections from Markdown, its
  figures embedded), which every report's page is built with.

The room knows nothing of comparisons, re-splits or claims (``calibkit.verdicts`` does): it
reads a comparison's fields and draws them. It stands below every report that uses it.
"""

from calibkit.plots.diagrams import RegionPlot, ReliabilityDiagram, SmoothReliabilityDiagram

__all__ = ["RegionPlot", "ReliabilityDiagram", "SmoothReliabilityDiagram"]
