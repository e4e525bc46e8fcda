"""Training recipes of `calibkit demo`: what each reaches on its test split, and how long it takes.

Runs the demo (no re-splits) once per recipe and prints one Markdown row per run: epochs,
learning rate, class-weight power (0: plain cross-entropy; 0.5: weights (n_max / n_k) ** 0.5),
test accuracy and macro-F1 of the fine-tuned model, and wall time. The rows of the recipes tried
are kept in ``benchmarks/demo_recipes.md``; the chosen one is ``TOKEN_RECIPE`` /
``SEQUENCE_RECIPE`` in ``calibkit/demos/``.

    python benchmarks/demo_recipes.py --task token 5:2e-4:0 8:3e-4:0.5
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
import time


def run(task: str, epochs: float, learning_rate: float, power: float, threads: int | None) -> dict[str, float]:
    from calibkit.demos import run_demo

    with tempfile.TemporaryDirectory() as folder, contextlib.redirect_stdout(io.StringIO()):
        start = time.perf_counter()
        out = run_demo(
            task, folder, epochs=epochs, learning_rate=learning_rate, class_weight_power=power, resplits=0,
            progress=False, threads=threads,
        )  # fmt: skip
        seconds = time.perf_counter() - start
    row = out["comparison"].rows["uncalibrated"]
    return {"accuracy": row["accuracy"], "macro_f1": row["macro_f1"], "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=("token", "sequence"), default="token")
    parser.add_argument("--threads", type=int)
    parser.add_argument("recipes", nargs="+", help="EPOCHS:LEARNING_RATE:CLASS_WEIGHT_POWER")
    args = parser.parse_args()
    print("| task | epochs | learning rate | class-weight power | test accuracy | test macro-F1 | seconds |")
    print("|---|---|---|---|---|---|---|")
    for recipe in args.recipes:
        epochs, rate, power = (float(x) for x in recipe.split(":"))
        result = run(args.task, epochs, rate, power, args.threads)
        print(
            f"| {args.task} | {epochs:g} | {rate:g} | {power:g} | {result['accuracy']:.4f} | "
            f"{result['macro_f1']:.4f} | {result['seconds']:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
