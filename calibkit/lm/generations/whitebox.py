"""White-box confidence of an answer, computed with the causal LM that gave it (or any other).

- ``sequence``: the probability of the answer's tokens after the question,
  ``exp(sum_t log p(a_t | question, a_<t))`` (LM-Polygraph's MaximumSequenceProbability is
  ``-sum_t log p``);
- ``sequence_normalized``: the geometric mean of those token probabilities,
  ``exp(mean_t log p(a_t | ...))``, which does not fall with the answer's length;
- ``ptrue``: P(True) (Kadavath et al. 2022) with LM-Polygraph's prompt :data:`PTRUE_PROMPT`: the
  next-token probabilities of ``True`` and ``False`` (each as the tokenizer encodes the word
  alone, as LM-Polygraph takes ``True``), renormalised over the two,
  ``p(True) / (p(True) + p(False))``: the raw ``p(True)`` of a small model over a 50,000-token
  vocabulary is a few percent whatever the answer, no confidence at all.

The question and the answer are tokenized apart and joined (question, then the answer without
special tokens), as a model that generated the answer saw them. Batches of :data:`BATCH`
answers, right-padded, on the model's device; only the answer's positions are read.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibkit.lm.sources import WHITEBOX, check_source, names  # WHITEBOX: the white-box sources, in order

FROM_LOGPROBS = names("model", kind="log-probabilities")
"""The white-box sources read from the answer tokens' log-probabilities (one forward pass gives them all)."""

PTRUE_PROMPT = (
    "Question: {q}\n Possible answer:{a}\n Is the possible answer:\n (A) True\n (B) False\n The possible answer is:"
)
"""LM-Polygraph's P(True) prompt (``PromptCalculator``), ``{q}`` the question and ``{a}`` the answer."""

BATCH = 8


def _pad(tokenizer: Any) -> int:
    for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id, 0):
        if candidate is not None:
            return int(candidate)
    return 0  # pragma: no cover - the loop's last candidate is 0


def _forward(model: Any, tokenizer: Any, ids: list[list[int]]) -> tuple[Any, Any, Any]:
    """Run the model on token lists, right-padded into one batch: float32 logits, the tokens, the mask."""
    import torch

    pad = _pad(tokenizer)
    width = max(len(x) for x in ids)
    tokens = torch.full((len(ids), width), pad, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for i, row in enumerate(ids):  # one row a sequence: building the batch, not a metric
        tokens[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, : len(row)] = 1
    tokens, mask = tokens.to(model.device), mask.to(model.device)
    with torch.inference_mode():
        logits = model(input_ids=tokens, attention_mask=mask).logits.float()
    return logits, tokens, mask


def answer_logprobs(
    model: Any, tokenizer: Any, questions: list[str], answers: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Sum and count the answer tokens' log-probabilities after their question.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM.
    tokenizer : transformers.PreTrainedTokenizerBase
        Its tokenizer.
    questions, answers : list of str

    Returns
    -------
    tuple of ndarray
        ``sum_t log p(a_t | ...)`` (float64) and the number of answer tokens, per answer.

    Raises
    ------
    ValueError
        When an answer has no token.
    """
    import torch

    prompts = [tokenizer(q)["input_ids"] for q in questions]
    replies = [tokenizer(a, add_special_tokens=False)["input_ids"] for a in answers]
    empty = [i for i, r in enumerate(replies) if not r]
    if empty:
        raise ValueError(f"answer {empty[0]} has no token: {answers[empty[0]]!r}")
    sums, counts = np.zeros(len(answers)), np.zeros(len(answers), dtype=np.int64)
    for rows in _length_batches([len(p) + len(r) for p, r in zip(prompts, replies)]):
        prompt, reply = [prompts[i] for i in rows], [replies[i] for i in rows]
        logits, tokens, _ = _forward(model, tokenizer, [p + r for p, r in zip(prompt, reply)])
        # position t predicts token t + 1: the answer's j-th token is predicted at (prompt length - 1 + j).
        # Only those positions are normalised: a long prompt's (B, T, V) log-softmax is never built.
        lengths = torch.tensor([len(r) for r in reply], device=tokens.device)
        step = torch.arange(int(lengths.max()), device=tokens.device)[None, :]
        inside = step < lengths[:, None]
        at = torch.tensor([len(p) - 1 for p in prompt], device=tokens.device)[:, None] + step
        at = torch.where(inside, at, 0)  # past an answer's end: any position, masked out below
        picked = logits.gather(1, at[:, :, None].expand(-1, -1, logits.shape[-1]))
        target = tokens.gather(1, at + 1)
        logp = torch.log_softmax(picked, dim=-1).gather(2, target[:, :, None]).squeeze(2)
        sums[rows] = (logp.double() * inside).sum(dim=1).cpu().numpy()
        counts[rows] = inside.sum(dim=1).cpu().numpy()
    return sums, counts


def _length_batches(lengths: list[int]) -> list[np.ndarray]:
    """Split row indices into batches of :data:`BATCH` of similar length (sorted): little padding."""
    order = np.argsort(np.asarray(lengths), kind="stable")
    return [order[i : i + BATCH] for i in range(0, len(order), BATCH)]


def next_token_logprobs(
    model: Any, tokenizer: Any, prompts: list[str], candidates: list[list[int]]
) -> list[np.ndarray]:
    """Log-probabilities of candidate next tokens after each prompt: one forward pass per prompt.

    A multiple-choice question whose choices are one token each (MMLU's ``" A"`` to ``" D"``) is
    scored from its prompt's next-token distribution: the same numbers as
    :func:`answer_logprobs` on each choice, at a quarter of the cost for four choices.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM.
    tokenizer : transformers.PreTrainedTokenizerBase
        Its tokenizer.
    prompts : list of str
    candidates : list of list of int
        Each prompt's candidate token ids.

    Returns
    -------
    list of ndarray of float64
        ``log p(token | prompt)`` for each prompt's candidates.
    """
    import torch

    ids = [tokenizer(q)["input_ids"] for q in prompts]
    out: list[np.ndarray] = [np.zeros(0)] * len(prompts)
    for rows in _length_batches([len(x) for x in ids]):
        logits, _, mask = _forward(model, tokenizer, [ids[i] for i in rows])
        last = logits[torch.arange(len(rows)), mask.sum(dim=1) - 1]  # the prompt's next token
        logp = torch.log_softmax(last.double(), dim=-1).cpu().numpy()
        for j, i in enumerate(rows):  # a loop over prompts: building the batch's result, not a metric
            out[i] = logp[j, candidates[i]]
    return out


def p_true(model: Any, tokenizer: Any, questions: list[str], answers: list[str]) -> np.ndarray:
    """P(True) of each answer with :data:`PTRUE_PROMPT`, renormalised over ``True`` and ``False``.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM.
    tokenizer : transformers.PreTrainedTokenizerBase
        Its tokenizer.
    questions, answers : list of str

    Returns
    -------
    ndarray of float64
        ``p(True) / (p(True) + p(False))`` at the prompt's next token.
    """
    import torch

    words = [_word_token(tokenizer, w) for w in ("True", "False")]
    out = np.zeros(len(answers))
    for start in range(0, len(answers), BATCH):
        texts = [
            PTRUE_PROMPT.format(q=q, a=a)
            for q, a in zip(questions[start : start + BATCH], answers[start : start + BATCH])
        ]
        logits, _, mask = _forward(model, tokenizer, [tokenizer(t)["input_ids"] for t in texts])
        last = logits[torch.arange(len(texts)), mask.sum(dim=1) - 1]  # the prompt's next token
        pair = last[:, words].double()
        out[start : start + len(texts)] = torch.softmax(pair, dim=1)[:, 0].cpu().numpy()
    return out


def _word_token(tokenizer: Any, word: str) -> int:
    """Return the one token ``word`` is encoded to alone (special tokens left out), as LM-Polygraph reads it."""
    special = set(tokenizer.all_special_ids)
    ids = [t for t in tokenizer(word)["input_ids"] if t not in special]
    if len(ids) != 1:
        raise ValueError(f"P(True) needs {word!r} to be one token of the tokenizer; it is {len(ids)}: {ids}")
    return ids[0]


def whitebox_confidence(
    model: Any, tokenizer: Any, questions: list[str], answers: list[str], sources: tuple[str, ...] = WHITEBOX
) -> dict[str, np.ndarray]:
    """Compute the white-box confidence sources of answers with a causal LM.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM, in evaluation mode, on its device.
    tokenizer : transformers.PreTrainedTokenizerBase
        Its tokenizer.
    questions, answers : list of str
        The prompts the answers followed, and the answers.
    sources : tuple of str, default WHITEBOX
        Which of :data:`WHITEBOX`.

    Returns
    -------
    dict of str to ndarray
        Each source's confidence in [0, 1].

    Raises
    ------
    ValueError
        On an unknown source, unequal lengths, or an answer with no token.
    """
    sources = tuple(check_source(s, "sources", among=WHITEBOX) for s in sources)
    if len(questions) != len(answers):
        raise ValueError(f"{len(questions)} questions for {len(answers)} answers")
    out = {}
    if set(FROM_LOGPROBS) & set(sources):
        sums, counts = answer_logprobs(model, tokenizer, questions, answers)
        if "sequence" in sources:
            out["sequence"] = np.exp(sums)
        if "sequence_normalized" in sources:
            out["sequence_normalized"] = np.exp(sums / counts)
    if "ptrue" in sources:
        out["ptrue"] = p_true(model, tokenizer, questions, answers)
    return {s: out[s] for s in sources}
