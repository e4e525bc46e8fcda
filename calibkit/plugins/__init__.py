"""calibkit inside the tools where models are evaluated and trained.

Each module is the few lines a user adds to a tool so that calibkit's numbers appear in that
tool's own output, computed by calibkit's functional core (never re-derived here):

- ``calibkit.plugins.lm_eval``: lm-evaluation-harness tasks (``process_results`` and
  aggregations);
- ``calibkit.plugins.inspect_ai``: an Inspect AI scorer and metrics;
- ``calibkit.plugins.lighteval``: lighteval ``CorpusLevelMetric`` classes;
- ``calibkit.plugins.torchmetrics``: a ``torchmetrics.Metric`` backed by the accumulator's
  sums, for Lightning.

What no tool changes is in ``calibkit.plugins.skeleton`` (the rows, their intervals' names, their
direction) and ``calibkit.lm.multiple_choice`` (``ChoiceData.stack``, ``check_question``): a new
tool's module holds its glue only, and one line here.

None of them is imported by ``import calibkit``: each imports its tool.
"""
