"""Every Python block of the user guide (docs/guide/*.rst) runs as written.

One process per page, as a reader goes through it: the README's preamble (tests/test_readme.py:
small random data, a tiny BERT, offline Hub) and a few names the guide leaves to the reader run
first, then the page's blocks in order in one namespace, in a temporary folder. A block that
cannot run here says so in the page, in an RST comment just above it (``.. not run: <reason>``).
"""

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.test_readme import DASK, PREAMBLE, offline_env

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide"
BLOCK = re.compile(r"^(\.\. not run:[^\n]*\n\n)?\.\. code-block:: python\n\n((?:   [^\n]*\n|\n)+)", re.M)


def python_blocks(page: Path) -> list[str]:
    """The page's Python blocks to run, dedented (those marked ``.. not run:`` left out)."""
    return [textwrap.dedent(m.group(2)) for m in BLOCK.finditer(page.read_text()) if not m.group(1)]


# Names the guide leaves to the reader, beyond the README's: a Trainer and its data.
GUIDE_PREAMBLE = textwrap.dedent(
    """
    from transformers import DataCollatorWithPadding, Trainer
    tokenized_validation_set = test_dataset = val
    collator = data_collator = None
    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=val)
    test_labels, test_probs = labels[200:], probs[200:]
    names = [f"class {k}" for k in range(K)]
    read_batches = lambda: batches  # noqa: E731 - a reader's data source, read twice
    from transformers import BertTokenizerFast
    open("vocab.txt", "w").write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]))
    tokenizer = BertTokenizerFast(vocab_file="vocab.txt")
    """
)

PAGES = sorted(p for p in GUIDE.glob("*.rst") if python_blocks(p))

RUNNER = """
import json, sys, traceback
blocks = json.loads(sys.argv[1])
namespace = {"__name__": "__main__"}
exec(compile(sys.argv[2], "preamble", "exec"), namespace)
for index, block in enumerate(blocks):
    try:
        exec(compile(block, f"block {index + 1}", "exec"), namespace)
    except BaseException:
        print(f"--- block {index + 1} ---\\n{block}", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
"""


def test_the_guide_has_python_blocks():
    assert sum(len(python_blocks(p)) for p in PAGES) >= 20


@pytest.mark.slow  # processes of their own, each importing torch: the default run's time, in .ci/run's slow pass
@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_guide_blocks_run_as_written(page, tmp_path):
    blocks = python_blocks(page)
    preamble = PREAMBLE + GUIDE_PREAMBLE + (DASK if any("calibkit.io.dask" in b for b in blocks) else "")
    env = offline_env(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, json.dumps(blocks), preamble],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, f"{page.name}:\n{proc.stderr[-4000:]}"
