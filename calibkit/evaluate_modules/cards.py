"""Write each module folder's ``README.md`` (metric card), ``app.py``, ``requirements.txt`` and ``SPEC.md``.

The folders share their layout, so these files are rendered from one template and from the
script's own ``_DESCRIPTION``, ``_KWARGS_DESCRIPTION``, ``_LIMITATIONS`` and ``_CITATION``
(the script stays the single source of each metric's text). After editing a script or this
template, regenerate with ``python -m calibkit.evaluate_modules.cards``; a test checks that
the files on disk are up to date.

Each folder is pushed to the Hub as its own Space repository, so the card's link to the
conventions is relative (``SPEC.md``) and the folder carries a copy of the repository's
``SPEC.md``: the link works on the Hub, in a clone and in an installed wheel alike.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import textwrap
from pathlib import Path
from types import ModuleType

from calibkit.evaluate_modules import MODULE_NAMES, SET_MODULE_NAMES, modules_root

REQUIREMENTS = "evaluate>=0.4\ncalibkit>=0.1.0\n"

SPEC = Path(__file__).resolve().parents[2] / "SPEC.md"
"""The repository's SPEC.md, copied into every module folder."""

APP = '''"""Gradio widget of calibkit's `{name}` metric: a Hugging Face Space runs this file."""

from pathlib import Path

import evaluate
from evaluate.utils import launch_gradio_widget

# The script next to this file, by path: always calibkit's, without a Hub look-up.
module = evaluate.load(str(Path(__file__).with_name("{name}.py")))
launch_gradio_widget(module)
'''

CARD = """---
title: {title}
emoji: 🎯
colorFrom: blue
colorTo: red
sdk: gradio
sdk_version: 3.19.1
app_file: app.py
pinned: false
tags:
- evaluate
- metric
- calibration
- calibkit
description: >-
  {summary}
---

# Metric Card for {title}

## Metric Description

{description}
## How to Use

{usage}
## Inputs

{inputs}
## Output Values

{outputs}
## Examples

```python
{examples}```

## Limitations and Bias

{limitations}
{storage}
## Citation

```bibtex
{citation}```

## Further References

- [calibkit's SPEC.md](SPEC.md): every formula, default and convention (bin edges, ties, binary input, absent
  classes), in this folder and at the root of calibkit's repository.
- {functional}
"""


USAGE = """```python
import calibkit
import evaluate

calibkit.install_evaluate_modules()  # once per environment, or `calibkit install-modules`
metric = evaluate.load("{name}")  # sequence classification: predictions (N, K) or (N,), references (N,)
results = metric.compute(predictions=probs, references=labels)
```

Token classification takes the arrays `Trainer` gives `compute_metrics`, logits padded with -100:

```python
metric = evaluate.load("{name}", "token")


def compute_metrics(eval_pred):
    return metric.compute(predictions=eval_pred.predictions, references=eval_pred.label_ids, from_logits=True)
```

Multi-label heads (`problem_type="multi_label_classification"`): `evaluate.load("{name}", "multilabel")`
takes predictions `(N, K)` (one probability, or logit, per label) and multi-hot references `(N, K)`,
and returns each metric per label (`<metric>_per_label`) with its `_macro`, `_weighted` (by support) and
`_micro` averages; `calibration_report` returns `calibkit.multilabel_report`'s dict. Modules whose
metrics are not defined per label (`sce`, `selective`) refuse it.

Causal language models: `evaluate.load("{name}", "next_token")` takes what a causal LM's `Trainer`
gives, logits `(N, T, V)` and the labels unshifted (the input ids, -100 on padding and prompt), and
scores the logits at position `t` against the label at `t + 1`, as the model's own loss does
(`next_token=True` of `calibkit.calibration_report`). At a vocabulary of 32,000 or more, the
`Trainer`'s concatenation of every batch's logits does not fit: stream with `calibkit.CalibrationCallback`.

`add_batch(predictions=..., references=...)` then `compute()`, `evaluate.combine([...])` and distributed
use (`num_process`, `process_id`, a shared `experiment_id`) work as for any `evaluate` metric. Other
ways to load it: `evaluate.load(calibkit.evaluate_module_path("{name}"))` (by path: always calibkit's,
never the Hub) and `evaluate.load("calibkit/{name}")` (namespaced). Set `HF_EVALUATE_OFFLINE=1` to
skip the Hub look-ups that `evaluate` tries before its cache.
"""
"""The card's "How to Use" of a calibration module (``{name}`` filled in)."""

STORAGE = """Batches are held as numpy arrays until `compute()` (in one process; in distributed use each process
writes them to its `evaluate` cache file as one Arrow row per batch), and `compute()` runs calibkit's
exact one-shot computation on all of them: memory is the size of the predictions added, as for
`Trainer`'s own evaluation loop. For evaluations that do not fit in memory, use the streaming
`calibkit.CalibrationAccumulator`.
"""
"""The paragraph after a calibration module's limitations: how its batches are held."""

FUNCTIONAL = "The functional API: `calibkit.{name}(probs, labels, ...)` on numpy arrays or torch tensors."
"""The card's last reference of a calibration module."""

CARD_PARTS = ("summary", "usage", "storage", "functional")
"""The parts of the card a script may write itself, in a dict ``_CARD`` (a module that is not a
calibration metric: ``conformal_sets``); the others are the calibration modules' defaults."""


def load_script(name: str) -> ModuleType:
    """Import the script of module ``name`` by path (it imports ``evaluate``).

    Parameters
    ----------
    name : str
        One of :data:`~calibkit.evaluate_modules.MODULE_NAMES` or
        :data:`~calibkit.evaluate_modules.SET_MODULE_NAMES`.

    Returns
    -------
    types.ModuleType
    """
    path = modules_root() / name / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"calibkit_evaluate_script_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # CalibrationMetric._info looks its script up by module name
    spec.loader.exec_module(module)
    return module


def _sections(kwargs_description: str) -> dict[str, str]:
    """Split ``_KWARGS_DESCRIPTION`` at its ``Args:``, ``Returns:`` and ``Examples:`` headers."""
    parts = re.split(r"^(Args|Returns|Examples):\n", kwargs_description, flags=re.MULTILINE)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def _markdown_list(block: str) -> str:
    """``    name (`type`): text`` items with 8-space continuations -> a markdown list."""
    items: list[str] = []
    for line in textwrap.dedent(block).splitlines():
        if not line.strip():
            continue
        if line.startswith(" "):
            items[-1] += " " + line.strip()
        else:
            name, _, rest = line.partition(" ")
            items.append(f"- **{name}** {rest}")
    return "\n".join(items) + "\n"


def render(name: str) -> dict[str, str]:
    """Render the generated files of module ``name``: ``README.md``, ``app.py``, ``requirements.txt``, ``SPEC.md``.

    Parameters
    ----------
    name : str
        One of :data:`~calibkit.evaluate_modules.MODULE_NAMES` or
        :data:`~calibkit.evaluate_modules.SET_MODULE_NAMES`.

    Returns
    -------
    dict of str to str
        File name -> text.
    """
    script = load_script(name)
    sections = _sections(script._KWARGS_DESCRIPTION)
    title = script.__doc__.split(" as an ")[0]
    own = getattr(script, "_CARD", {})
    unknown = sorted(set(own) - set(CARD_PARTS))
    if unknown:
        raise ValueError(f"{name}: `_CARD` has unknown parts {unknown}; known: {list(CARD_PARTS)}")
    parts = {
        "summary": f"{title}: how far the probabilities of a text or token classifier can be trusted (calibkit).",
        "usage": USAGE.format(name=name),
        "storage": STORAGE,
        "functional": FUNCTIONAL.format(name=name),
        **own,
    }
    card = CARD.format(
        name=name,
        title=title,
        description=script._DESCRIPTION,
        inputs=_markdown_list(sections["Args"]),
        outputs=_markdown_list(sections["Returns"]),
        examples=textwrap.dedent(sections["Examples"]),
        limitations=script._LIMITATIONS,
        citation=script._CITATION,
        **parts,
    )
    return {
        "README.md": card,
        "app.py": APP.format(name=name),
        "requirements.txt": REQUIREMENTS,
        "SPEC.md": SPEC.read_text(encoding="utf-8"),
    }


def write(names: tuple[str, ...] = (*MODULE_NAMES, *SET_MODULE_NAMES)) -> list[Path]:
    """Regenerate the files of ``names`` in :func:`calibkit.evaluate_modules.modules_root`.

    Parameters
    ----------
    names : tuple of str, default MODULE_NAMES and SET_MODULE_NAMES
        The modules to regenerate.

    Returns
    -------
    list of Path
        The files written.
    """
    written = []
    for name in names:
        for filename, text in render(name).items():
            path = modules_root() / name / filename
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


if __name__ == "__main__":
    for path in write():
        print(path)
