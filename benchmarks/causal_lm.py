"""A causal LM's evaluation loop at vocabulary scale: bf16 (T, V) batches streamed into the accumulator.

    python benchmarks/causal_lm.py                                  # CUDA if there is one: V = 32,000 and 128,256
    python benchmarks/causal_lm.py --device cpu --tokens 1024 --batches 3 --vocab 32000   # a CPU run

Each batch is a causal LM's logits for ``--tokens`` positions over the vocabulary, in bfloat16 as
the model returns them, with the next-token labels (``next_token=True``: the logits at ``t`` are
scored against the label at ``t + 1``). Contenders, on the same batches, round-robin:

- ``calibkit ECE``: ``CalibrationAccumulator(metrics=["ece"], from_logits=True, next_token=True)``,
  fed the bf16 logits as they are (on a GPU the torch engine bins them where they are);
- ``calibkit report``: the same accumulator with the default report (every metric);
- ``torchmetrics ECE``: ``MulticlassCalibrationError(num_classes=V, n_bins=15)`` updated with the
  float32 softmax of the same batch (torchmetrics takes probabilities; the softmax is its cost);
- ``one read``: a sum over the bf16 batch, the floor of any pass over it.

Printed: tokens/s of each, the ratio to torchmetrics, the floor, the peak device memory of each
(CUDA), and calibkit's ECE against a float64 host computation of the same batches (exactness).
The sizes on a CPU are small: the figures of the issue are a lent H100/H200's.
"""

from __future__ import annotations

import argparse
import statistics
import time


def batches(vocab: int, tokens: int, count: int, device: str, seed: int = 0):
    """``count`` bf16 batches (1, T, V) of peaked logits (a trained LM's look) and their labels (1, T)."""
    import torch

    g = torch.Generator(device=device).manual_seed(seed)
    out = []
    for _ in range(count):
        logits = torch.randn((1, tokens, vocab), generator=g, device=device, dtype=torch.float32) * 2.5
        hot = torch.randint(0, vocab, (1, tokens, 4), generator=g, device=device)
        logits.scatter_add_(2, hot, torch.full(hot.shape, 6.0, device=device))  # a few likely tokens a position
        pick = torch.randint(0, 4, (1, tokens, 1), generator=g, device=device)
        labels = hot.gather(2, pick).squeeze(2).roll(1, dims=1)  # the label at t + 1 is one of t's likely tokens
        out.append((logits.to(torch.bfloat16), labels))
    return out


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run(vocab: int, tokens: int, count: int, rounds: int, device: str) -> None:
    import torch
    from torchmetrics.classification import MulticlassCalibrationError

    import calibkit

    data = batches(vocab, tokens, count, device)
    scored = count * (tokens - 1)

    def calibkit_pass(metrics):
        def go():
            acc = calibkit.CalibrationAccumulator(metrics=metrics, from_logits=True, next_token=True)
            for logits, labels in data:
                acc.update(logits, labels)
            return acc.compute()

        return go

    def torchmetrics_pass():
        metric = MulticlassCalibrationError(num_classes=vocab, n_bins=15, norm="l1").to(device)
        for logits, labels in data:
            metric.update(torch.softmax(logits[0, :-1].float(), dim=-1), labels[0, 1:])
        return metric.compute()

    def one_read():
        return [logits.sum() for logits, _ in data]

    contenders = {
        "torchmetrics ECE": torchmetrics_pass,
        "calibkit ECE": calibkit_pass(["ece"]),
        "calibkit report": calibkit_pass(None),
        "one read": one_read,
    }
    times: dict[str, list[float]] = {name: [] for name in contenders}
    peaks: dict[str, float] = {}
    results: dict[str, object] = {}
    for _ in range(rounds):
        for name, fn in contenders.items():
            if device.startswith("cuda"):
                torch.cuda.reset_peak_memory_stats()
            sync(device)
            start = time.perf_counter()
            results[name] = fn()
            sync(device)
            times[name].append(time.perf_counter() - start)
            if device.startswith("cuda"):
                peaks[name] = torch.cuda.max_memory_allocated() / 2**20
    exact = calibkit.CalibrationAccumulator(metrics=["ece"], from_logits=True, next_token=True)
    for logits, labels in data:  # the reference: float64 on the host
        exact.update(logits.float().double().cpu().numpy(), labels.cpu().numpy())
    reference = exact.compute()["ece"]
    base = statistics.median(times["torchmetrics ECE"])
    print(
        f"\nV = {vocab:,}, {count} batches of {tokens:,} bf16 tokens on {device} ({scored:,} scored), "
        f"median of {rounds}"
    )
    for name, values in times.items():
        seconds = statistics.median(values)
        peak = f", peak {peaks[name]:,.0f} MiB" if name in peaks else ""
        print(f"  {name:18s} {scored / seconds:14,.0f} tokens/s  ({base / seconds:5.2f}x torchmetrics{peak})")
    got = results["calibkit ECE"]["ece"]
    print(f"  calibkit ECE {got:.15f} vs float64 on the host {reference:.15f} (difference {abs(got - reference):.1e})")
    print(f"  torchmetrics ECE {float(results['torchmetrics ECE']):.15f} (float32 sums)")


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--vocab", type=int, nargs="+", default=[32_000, 128_256])
    parser.add_argument("--tokens", type=int, default=4096, help="tokens per batch")
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"device: {torch.cuda.get_device_name() if args.device.startswith('cuda') else 'cpu'}")
    for vocab in args.vocab:
        run(vocab, args.tokens, args.batches, args.rounds, args.device)


if __name__ == "__main__":
    main()
