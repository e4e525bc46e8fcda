"""
Confidence of generated answers
===============================

A language model that answers in free text has no softmax over choices: its confidence is a
number from somewhere else. Here, 600 synthetic answers carry three: the confidence the model
*states* ("Confidence: 90%"), which is over-confident, as verbalized confidences of small models
are; a judge's score, which is calibrated but coarse; and nothing else. calibkit reads them as
the sources of :mod:`calibkit.lm.generations`, judges each as the probability that the answer is
right, and recalibrates the stated confidence on half of the questions to see whether the other
half believes it.
"""

# %%
# Answers, correctness and two confidence sources
# -----------------------------------------------
# Each answer has a hidden chance of being right. The model states ``chance ** 0.4`` as a
# percentage (higher than the chance: over-confident); the judge gives the chance rounded to a
# tenth. The answers are written in calibkit's generations format, one JSON line each.
import json
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from calibkit.lm.generations import (
    apply_score_map,
    fit_score_map,
    generations_report,
    read_generations,
    recalibration_resplits,
    verbalized_confidence,
)
from calibkit.plots import ReliabilityDiagram

rng = np.random.default_rng(0)
rows = []
for i in range(600):
    chance = rng.beta(2, 2)
    stated = round(100 * chance**0.4)
    rows.append(
        {
            "task": "trivia" if i % 2 else "science",
            "id": str(i),
            "answer": f"Answer {i}. Confidence: {stated}%",
            "correct": int(rng.uniform() < chance),
            "judge": round(chance, 1),
        }
    )
path = Path(tempfile.mkdtemp()) / "answers.jsonl"
path.write_text("".join(json.dumps(r) + "\n" for r in rows))

data = read_generations(path)
data = data.with_source("verbalized", verbalized_confidence(data.answers, data.origin), "verbalized")

# %%
# Each source judged
# ------------------
# ECE and Brier say how well each source's numbers match the share of right answers; AURC says
# how well they rank answers (a monotone transform changes the first two, not the third).
report = generations_report(data)
for source, row in report["pooled"]["sources"].items():
    print(f"{source:>10}: ECE {row['ece']:.3f}  Brier {row['brier']:.3f}  AURC {row['aurc']:.3f}")
print("best calibrated:", report["best"]["calibration"], "- best at ranking:", report["best"]["ranking"])

# %%
# Recalibrating the stated confidence
# -----------------------------------
# Isotonic regression and Platt scaling fitted on half of the questions and judged on the other
# half, over ten re-splits: does each lower its source's ECE, and does the best recalibrated
# source beat the other source as it is?
resplit = recalibration_resplits(data, sources=["verbalized", "judge"], methods=("isotonic", "platt"), resplits=10)
for verdict in resplit["verdicts"]:
    print(f"{verdict['verdict']:>13}: {verdict['claim']}")

# %%
# Before and after, on one held-out half
# --------------------------------------
half = np.zeros(len(data), dtype=bool)
half[rng.permutation(len(data))[: len(data) // 2]] = True
stated, right = data.confidence["verbalized"], data.correct.astype(int)
mapped = apply_score_map(fit_score_map("isotonic", stated[half], right[half]), stated[~half])
fig, ax = plt.subplots(figsize=(5, 4.5))
ReliabilityDiagram.from_predictions(stated[~half], right[~half], ax=ax, label="stated", color="tab:red")
ReliabilityDiagram.from_predictions(mapped, right[~half], ax=ax, label="isotonic", color="tab:blue", diagonal=False)
ax.set_xlabel("confidence that the answer is right")
ax.set_ylabel("share of right answers")
ax.legend(loc="upper left")
plt.show()
