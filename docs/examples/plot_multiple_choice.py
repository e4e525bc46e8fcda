"""
Language models on multiple-choice benchmarks
=============================================

lm-evaluation-harness scores each choice of a multiple-choice question by its log-likelihood
and reports the accuracy of the best-scored choice. The softmax of those scores over the
choices is the model's confidence, and it can be calibrated or not like any classifier's.
:mod:`calibkit.lm.multiple_choice` reads the samples the harness logs (``--log_samples``) and
reports every calibration metric per task and pooled, for the score you choose: the summed
log-likelihood (the harness's ``acc``) or the log-likelihood per character (``acc_norm``). This
example writes a small samples file in the harness's format for two synthetic tasks, reads it
back with :func:`~calibkit.lm.multiple_choice.read_choices`, and compares the two scores with
:func:`~calibkit.lm.multiple_choice.multiple_choice_report` and temperature scaling over the choices.
"""

# %%
# A synthetic harness run
# -----------------------
# Two tasks: ``tiny_arc`` with 3 to 5 choices per question and ``tiny_mmlu`` with 4. Each choice
# has a text (random words) and a hidden quality ``s``; the gold choice is drawn from
# ``softmax(s / 2)``. The "model" gives each character of a choice the log-probability
# ``-1.5 + 0.25 s``, so a choice's summed log-likelihood is its length times that: longer
# choices are penalised whatever their quality, a length bias that the per-character score
# removes.
#
# Each line of ``samples_{task}_{date}.jsonl`` is one question as the harness writes it:
# ``doc_id``, the ``target`` (here the gold index), the requests in ``arguments`` (context and
# continuation, the continuation starting with the task's target delimiter, a space),
# ``filtered_resps`` (``[log-likelihood, is_greedy]`` per choice, as strings) and the sample's
# own ``acc`` and ``acc_norm``, which calibkit checks its gold choice against. Everything is
# written to a temporary folder.
import json
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from calibkit.lm.multiple_choice import (
    choice_probabilities,
    choice_temperature_scaling,
    format_choice_table,
    format_ts_table,
    multiple_choice_report,
    read_choices,
)
from calibkit.plots import ReliabilityDiagram

rng = np.random.default_rng(0)
WORDS = np.array("red green blue cat dog bird river stone cloud seven three paper light heavy old new".split())


def write_task(folder, task, n_questions, choice_counts):
    """Write one task's samples file in lm-evaluation-harness's format; return nothing."""
    lines = []
    for doc_id in range(n_questions):
        k = int(rng.choice(choice_counts))
        texts = [" ".join(rng.choice(WORDS, int(rng.integers(1, 6)))) for _ in range(k)]
        quality = rng.normal(0.0, 2.0, k)
        p_true = np.exp(quality / 2) / np.exp(quality / 2).sum()
        gold = int(rng.choice(k, p=p_true))
        chars = np.array([len(t) for t in texts], dtype=float)
        loglik = chars * (-1.5 + 0.25 * quality)
        sample = {
            "doc_id": doc_id,
            "doc": {},
            "target": str(gold),
            "arguments": {
                f"gen_args_{j}": {"arg_0": "Question: ...\nAnswer:", "arg_1": " " + t} for j, t in enumerate(texts)
            },
            "resps": [[[str(v), "False"]] for v in loglik],
            "filtered_resps": [[str(v), "False"] for v in loglik],
            "filter": "none",
            "metrics": ["acc", "acc_norm"],
            "acc": float(np.argmax(loglik) == gold),
            "acc_norm": float(np.argmax(loglik / chars) == gold),
        }
        lines.append(json.dumps(sample))
    (folder / f"samples_{task}_2026-01-01T00-00-00.000001.jsonl").write_text("\n".join(lines) + "\n")


tmp = tempfile.TemporaryDirectory()
run = Path(tmp.name) / "run"
run.mkdir()
write_task(run, "tiny_arc", 600, [3, 4, 5])
write_task(run, "tiny_mmlu", 800, [4])
print(sorted(p.name for p in run.iterdir()))

# %%
# Reading the run
# ---------------
# :func:`~calibkit.lm.multiple_choice.read_choices` takes a samples file, a folder of them (a whole
# harness run, searched recursively), a lighteval details file, or a file in calibkit's own
# choice format (``task``, ``choice_logprobs``, ``gold`` and optionally ``choice_chars``, ...,
# for any other tool). It returns one row per question, padded with NaN past a question's
# last choice.
data = read_choices(run)
tmp.cleanup()
print(
    f"{len(data.gold)} questions; tasks: {sorted(set(data.task))}; choices per question: "
    f"{sorted(set(data.n_choices.tolist()))}"
)

# %%
# One report per score
# --------------------
# ``score="loglik"`` takes the softmax of the summed log-likelihoods, ``score="chars"`` of the
# log-likelihoods divided by the choices' lengths in characters; the accuracy column is then the
# harness's ``acc`` or ``acc_norm``. Metrics over answer positions (CECE, per-position ECE, ...)
# are defined only where a task has a fixed number of choices: ``-`` for ``tiny_arc`` and the
# pooled row.
for score in ["loglik", "chars"]:
    report = multiple_choice_report(data, score=score)
    print(f"score = {report['score']!r}")
    print(format_choice_table(report))
    print()

# %%
# The two scores tell different stories. The summed log-likelihood is less accurate (the length
# bias picks short choices) and badly over-confident: multiplying the per-character score by a
# length of tens of characters makes the softmax far too sharp (a large ECE, a positive ECD,
# a high NLL). The per-character score is more accurate but under-confident (a negative ECD):
# ``0.25 s`` is flatter than the ``s / 2`` the gold choices follow.
#
# Temperature scaling over the choices
# ------------------------------------
# :func:`~calibkit.lm.multiple_choice.choice_temperature_scaling` fits one temperature per task on
# half of its questions and evaluates it on the other half, over ``resplits`` random re-splits,
# and says whether TS lowers ECE and NLL in at least 95% of them. The fitted temperature is above
# 1 for an over-confident score and below 1 for an under-confident one.
for score in ["loglik", "chars"]:
    result = choice_temperature_scaling(data, score=score, resplits=20)
    print(f"score = {score!r}")
    print(format_ts_table(result))
    print()

# %%
# Reliability per score
# ---------------------
# :func:`~calibkit.lm.multiple_choice.choice_probabilities` gives each question's softmax over its
# own choices, padded with zeros: the padding changes no top-label metric, so the diagrams of
# :class:`calibkit.plots.ReliabilityDiagram` take them as they are.
fig, axes = plt.subplots(1, 2, figsize=(9, 4.2), sharey=True, layout="constrained")
for ax, score in zip(axes, ["loglik", "chars"]):
    display = ReliabilityDiagram.from_predictions(choice_probabilities(data, score), data.gold, ax=ax, label=score)
    ax.set_title(f"score = {score!r}: ECE = {display.ece:.3f} (pooled)")
    ax.legend(loc="upper left", fontsize=8)
plt.show()
