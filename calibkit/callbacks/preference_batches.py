"""TRL's preference batches read pair by pair: the chosen rows above the rejected rows, exactly.

TRL's collators (``RewardTrainer``'s and ``DPOTrainer``'s ``DataCollatorForPreference``) put a
batch's chosen sequences in its top half and the rejected ones in its bottom half, padded on the
right; DPO's batches carry a ``completion_mask`` (1 on the answer's tokens) and, with
``precompute_ref_log_probs``, the reference's ``ref_chosen_logps`` / ``ref_rejected_logps``.
These functions turn one batch (its rewards, or its log-probabilities) into one
:class:`PreferencePairs` per pair, in the dataset's order, for
:mod:`calibkit.callbacks.preferences`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import numpy as np
import torch

__all__ = [
    "OutputHooks",
    "PreferencePairs",
    "dpo_batch_pairs",
    "on_device",
    "reward_batch_pairs",
    "sequence_logps",
    "to_numpy",
]


@dataclasses.dataclass
class PreferencePairs:
    """The pairs of an evaluation: one margin and two lengths a pair, in the evaluation set's order.

    Parameters
    ----------
    margins : ndarray of float64, shape (N,)
        ``reward_chosen - reward_rejected`` (DPO: ``beta`` times the difference of the log-ratios).
    length_chosen : ndarray of int64, shape (N,)
        Tokens of the chosen sequence (``RewardTrainer``: prompt and answer; DPO: the completion).
    length_rejected : ndarray of int64, shape (N,)
        Tokens of the rejected sequence, counted as ``length_chosen``.
    """

    margins: np.ndarray
    length_chosen: np.ndarray
    length_rejected: np.ndarray

    @classmethod
    def concat(cls, parts: Iterable[PreferencePairs]) -> PreferencePairs:
        """Return the pairs of several batches, in order.

        Parameters
        ----------
        parts : iterable of PreferencePairs

        Returns
        -------
        PreferencePairs
        """
        parts = list(parts)
        if not parts:
            return cls(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        return cls(*(np.concatenate([getattr(p, f.name) for p in parts]) for f in dataclasses.fields(cls)))

    def __len__(self) -> int:
        """Return the number of pairs."""
        return len(self.margins)


def _halves(tensor: torch.Tensor, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Split a batch's rows into its chosen (top half) and rejected (bottom half) rows."""
    if tensor.shape[0] % 2:
        raise ValueError(
            f"`{name}`: a preference batch holds its chosen rows then its rejected rows, so an even number of "
            f"rows, got {tensor.shape[0]}"
        )
    chosen, rejected = tensor.chunk(2, dim=0)
    return chosen, rejected


def to_numpy(tensor: torch.Tensor, dtype: type) -> np.ndarray:
    """Return a tensor on the CPU as a float64 (``dtype=np.float64``) or int64 array."""
    return tensor.detach().to("cpu", torch.float64 if dtype is np.float64 else torch.int64).numpy()


def _lengths(mask: torch.Tensor, name: str) -> tuple[np.ndarray, np.ndarray]:
    _halves(mask, name)  # an even number of rows
    lengths = to_numpy(mask.sum(dim=1), np.int64)  # one copy to the CPU a batch, then its halves
    half = len(lengths) // 2
    return lengths[:half], lengths[half:]


def reward_batch_pairs(rewards: torch.Tensor, attention_mask: torch.Tensor) -> PreferencePairs:
    """Return the pairs of a ``RewardTrainer`` batch from its rewards: chosen rows, then rejected rows.

    Parameters
    ----------
    rewards : torch.Tensor of shape (2B,) or (2B, 1)
        The reward model's output for the batch (``outputs.logits``), TRL's collator's layout.
    attention_mask : torch.Tensor of shape (2B, L)
        The batch's attention mask (its row sums are the lengths).

    Returns
    -------
    PreferencePairs
        ``margins = r_chosen - r_rejected`` in float64 (from the rewards as the model gave them).

    Raises
    ------
    ValueError
        When the rewards are not one a row, or the rows are odd in number.

    Examples
    --------
    >>> import torch
    >>> pairs = reward_batch_pairs(torch.tensor([[2.0], [0.5], [1.0], [1.5]]), torch.ones(4, 3, dtype=torch.long))
    >>> pairs.margins.tolist()
    [1.0, -1.0]
    """
    rows = rewards.shape[0]
    if rewards.numel() != rows:
        raise ValueError(
            f"`rewards` must hold one reward a row (a reward model has one output), got {tuple(rewards.shape)}"
        )
    chosen, rejected = _halves(rewards.reshape(rows).to(torch.float64), "rewards")  # float64: exact difference
    margins = to_numpy(chosen - rejected, np.float64)
    return PreferencePairs(margins, *_lengths(attention_mask, "attention_mask"))


def sequence_logps(output: Any, input_ids: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """Return each row's log-probability of its completion tokens, summed (float64).

    Parameters
    ----------
    output : transformers ModelOutput
        A causal LM's output: TRL's fused head (``log_probs`` of each next-token label, zero where
        the label is ignored), or ``logits`` of shape (rows, L, V).
    input_ids : torch.Tensor of shape (rows, L)
    completion_mask : torch.Tensor of shape (rows, L)
        1 on the completion's tokens (TRL's DPO collator's ``completion_mask``).

    Returns
    -------
    torch.Tensor of float64, shape (rows,)
        ``sum_t log p(x_t | x_<t)`` over the completion's tokens, as DPO's ``logps`` (its
        ``ld_alpha`` left out).
    """
    shift_mask = completion_mask[:, 1:].to(torch.float64)
    log_probs = getattr(output, "log_probs", None)
    if log_probs is None:
        logits = output.logits[:, -completion_mask.shape[1] :][:, :-1].float()
        log_probs = torch.log_softmax(logits, dim=-1).gather(-1, input_ids[:, 1:, None].to(logits.device))[..., 0]
    log_probs = log_probs[:, -shift_mask.shape[1] :].to(torch.float64)
    return (log_probs * shift_mask.to(log_probs.device)).sum(dim=1)


def dpo_batch_pairs(
    policy_logps: torch.Tensor, ref_logps: torch.Tensor, completion_mask: torch.Tensor, beta: float
) -> PreferencePairs:
    """Return the pairs of a ``DPOTrainer`` batch: margins of the implicit rewards ``beta * log(pi / pi_ref)``.

    Parameters
    ----------
    policy_logps : torch.Tensor of shape (2B,)
        The policy's completion log-probabilities (:func:`sequence_logps`), chosen rows first.
    ref_logps : torch.Tensor of shape (2B,)
        The reference model's, in the same rows.
    completion_mask : torch.Tensor of shape (2B, L)
        The batch's completion mask (its row sums are the lengths).
    beta : float
        DPO's ``beta``.

    Returns
    -------
    PreferencePairs
        ``margins = beta * ((pi_c - ref_c) - (pi_r - ref_r))``.

    Examples
    --------
    >>> import torch
    >>> pairs = dpo_batch_pairs(torch.tensor([-3.0, -5.0]), torch.tensor([-4.0, -4.0]), torch.ones(2, 4), 0.1)
    >>> round(float(pairs.margins[0]), 6)
    0.2
    """
    ratios = policy_logps.to(torch.float64) - ref_logps.to(device=policy_logps.device, dtype=torch.float64)
    chosen, rejected = _halves(ratios, "policy_logps")
    return PreferencePairs(
        beta * to_numpy(chosen - rejected, np.float64), *_lengths(completion_mask, "completion_mask")
    )


def on_device(batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """Return a batch with its tensors moved to ``device``."""
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


class OutputHooks:
    """Forward hooks that keep each call's output, for as long as the ``with`` block lasts.

    Parameters
    ----------
    modules : iterable of torch.nn.Module
        The modules to listen to (None and repeats are skipped).
    """

    def __init__(self, modules: Iterable[torch.nn.Module]) -> None:
        self.modules = [m for m in dict.fromkeys(modules) if m is not None]
        self.outputs: dict[int, list[Any]] = {id(m): [] for m in self.modules}
        self._handles: list[Any] = []

    def __enter__(self) -> OutputHooks:
        """Register the hooks."""
        for module in self.modules:
            kept = self.outputs[id(module)]
            self._handles.append(module.register_forward_hook(lambda _m, _a, out, kept=kept: kept.append(out)))
        return self

    def __exit__(self, *exc: object) -> None:
        """Remove the hooks."""
        for handle in self._handles:
            handle.remove()

    def of(self, module: torch.nn.Module) -> list[Any]:
        """Return the outputs ``module`` gave while the hooks were on, in call order.

        Parameters
        ----------
        module : torch.nn.Module

        Returns
        -------
        list
        """
        return self.outputs.get(id(module), [])
