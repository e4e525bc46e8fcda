"""The served-model part of ``calibkit demo --task llm``: the model's answers as an API would return them.

A served model (OpenAI, vLLM's server) gives no weights, only each generated token's
log-probability and its ``top_logprobs`` alternatives. Here SmolLM2 plays the server: it answers
MMLU questions (the harness's MMLU prompt, as ``calibkit.demos.llm_answers`` writes them)
greedily, and each answer is written as the Batch API writes a chat completion with
``logprobs=true, top_logprobs=20`` (its input file holding the prompts, a gold file the right
letters). :func:`calibkit.lm.served.read_served` then reads the files back as any user's API
responses, and the report judges the sources (``sequence``, ``sequence_normalized``,
``least_token``, ``letter``) and states the mass the top 20 leave out and the bound it puts on
the ECE over the letters.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SERVED_QUESTIONS = 40
"""MMLU questions put to the model as to a server (a greedy pass of a few tokens each; the 2-core
budget of the demo allows no more)."""

TOP_LOGPROBS = 20
"""The alternatives per token, OpenAI's most."""

MAX_TOKENS = 6
"""The tokens generated per answer (enough for "The answer is B")."""


def model_responses(
    model: Any, tokenizer: Any, prompts: list[str], *, max_tokens: int = MAX_TOKENS, top_logprobs: int = TOP_LOGPROBS,
    batch_size: int = 8,
) -> list[dict[str, Any]]:  # fmt: skip
    """Answer each prompt greedily and return the answers as chat completions with log-probabilities.

    Each generated token gets its log-probability under the model (the log-softmax of its raw
    logits, before any processing, as vLLM's server gives by default) and the ``top_logprobs``
    most probable tokens at that step, in the schema of ``openai``'s ``ChatCompletion``
    (``choices[0].logprobs.content[j].{token, logprob, bytes, top_logprobs}``). The answer stops
    before an end-of-sequence token.

    Parameters
    ----------
    model, tokenizer
        A causal LM and its tokenizer.
    prompts : list of str
        Each the user's message; a tokenizer with a chat template puts it through the template
        (``add_generation_prompt``), as a chat server does.
    max_tokens : int, default 6
    top_logprobs : int, default 20
        At most the vocabulary's size.
    batch_size : int, default 8

    Returns
    -------
    list of dict
        One ``chat.completion`` response per prompt.
    """
    import torch

    k = min(top_logprobs, int(model.config.vocab_size))
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    if getattr(tokenizer, "chat_template", None):  # a chat model is served through its template, as a server does
        prompts = [
            tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
            for p in prompts
        ]
    side, tokenizer.padding_side = tokenizer.padding_side, "left"  # the prompts end where generation starts
    pad_token, tokenizer.pad_token_id = tokenizer.pad_token_id, pad
    responses = []
    try:
        for start in range(0, len(prompts), batch_size):
            batch = tokenizer(
                prompts[start : start + batch_size], return_tensors="pt", padding=True, add_special_tokens=False
            )
            with torch.no_grad():
                out = model.generate(
                    **batch, max_new_tokens=max_tokens, do_sample=False, output_logits=True,
                    return_dict_in_generate=True, pad_token_id=pad,
                )  # fmt: skip
            steps = torch.log_softmax(torch.stack(out.logits, dim=1).double(), dim=-1)  # (B, T, V)
            chosen = out.sequences[:, batch["input_ids"].shape[1] :]
            top = steps.topk(k, dim=-1)
            for b in range(chosen.shape[0]):
                responses.append(_response(tokenizer, chosen[b], steps[b], top, b, eos, len(responses)))
    finally:
        tokenizer.padding_side, tokenizer.pad_token_id = side, pad_token
    return responses


def _response(tokenizer: Any, chosen: Any, steps: Any, top: Any, b: int, eos: int | None, number: int) -> dict:
    """Write one answer as a chat completion (OpenAI's schema)."""
    ids = chosen.tolist()
    if eos in ids:
        ids = ids[: ids.index(eos)]

    def text(token: int) -> str:
        return tokenizer.decode([token])

    content = [
        {
            "token": text(t), "logprob": float(steps[j, t]), "bytes": list(text(t).encode()),
            "top_logprobs": [
                {"token": text(a), "logprob": float(v), "bytes": list(text(a).encode())}
                for a, v in zip(top.indices[b, j].tolist(), top.values[b, j].tolist())
            ],
        }
        for j, t in enumerate(ids)
    ]  # fmt: skip
    message = {"role": "assistant", "content": tokenizer.decode(ids)}
    choice = {"index": 0, "finish_reason": "length", "message": message, "logprobs": {"content": content}}
    return {"id": f"chatcmpl-{number}", "object": "chat.completion", "created": 0, "model": "smollm2",
            "choices": [choice]}  # fmt: skip


def write_batch(folder: Path, prompts: list[str], responses: list[dict], gold: list[str]) -> tuple[Path, Path, Path]:
    """Write the Batch API's input and output files and a gold file for the answers.

    Parameters
    ----------
    folder : Path
    prompts : list of str
    responses : list of dict
        From :func:`model_responses`.
    gold : list of str
        The right letter of each question.

    Returns
    -------
    tuple of Path
        ``batch_input.jsonl``, ``batch_output.jsonl``, ``gold.jsonl``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    ids = [f"mmlu-{i}" for i in range(len(prompts))]
    inputs = [
        {"custom_id": i, "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": "smollm2", "messages": [{"role": "user", "content": p}], "logprobs": True,
                  "top_logprobs": TOP_LOGPROBS, "max_tokens": MAX_TOKENS, "temperature": 0}}
        for i, p in zip(ids, prompts)
    ]  # fmt: skip
    outputs = [
        {"id": f"batch_req_{n}", "custom_id": i, "response": {"status_code": 200, "body": r}, "error": None}
        for n, (i, r) in enumerate(zip(ids, responses))
    ]
    files = folder / "batch_input.jsonl", folder / "batch_output.jsonl", folder / "gold.jsonl"
    for file, rows in zip(files, (inputs, outputs, [{"id": i, "gold": g} for i, g in zip(ids, gold)])):
        file.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return files


def served_section(
    model: Any, tokenizer: Any, *, questions: list[tuple[str, list[str], int]], folder: Path,
    limit: int = SERVED_QUESTIONS,
) -> dict[str, Any]:  # fmt: skip
    """Answer lettered questions as a server would, write the responses in OpenAI's schema, read them back.

    Parameters
    ----------
    model, tokenizer
        A causal LM and its tokenizer.
    questions : list of tuple
        ``(prompt, continuations, gold index)`` with the letters as continuations (``" A"`` to
        ``" D"``: MMLU as ``calibkit.demos.llm_answers.mmlu_questions`` writes it); the first
        ``limit`` are put.
    folder : Path
        Where the batch files go.
    limit : int, default 40

    Returns
    -------
    dict
        ``text`` (Markdown), ``json`` (the numbers, the files) and ``verdicts`` (none: the part
        shows a reader, it tests no claim).
    """
    from calibkit.demos.llm_text import number, source_table
    from calibkit.lm.generations import generations_report
    from calibkit.lm.multiple_choice import multiple_choice_report
    from calibkit.lm.served import read_served

    asked = questions[:limit]
    prompts = [p for p, _, _ in asked]
    letters = "".join(c.strip() for c in asked[0][1])
    print(
        f"  {len(prompts)} MMLU questions answered as a server would (top {TOP_LOGPROBS} log-probabilities)", flush=True
    )
    responses = model_responses(model, tokenizer, prompts)
    batch_input, batch_output, gold = write_batch(folder, prompts, responses, [letters[g] for _, _, g in asked])
    served = read_served(batch_output, gold=gold, letters=letters, batch_input=batch_input)
    report = generations_report(served.generations)
    summary = served.summary()
    lines = [
        f"Served (SmolLM2 as an API: {len(prompts)} MMLU questions answered greedily, {MAX_TOKENS} tokens, written as "
        f"the Batch API's chat completions with top_logprobs={TOP_LOGPROBS}, read back by calibkit.lm.served; "
        f"log-probabilities before any processing, as vLLM's server gives them): "
        f"{summary['with_letter']} of {summary['answers']} answers give a letter, accuracy "
        f"{served.generations.correct.mean():.3f}.",
        "",
        *source_table(report),
    ]
    over_letters = None
    if summary["with_letter"]:
        over_letters = multiple_choice_report(served.choices())["pooled"]
        lines += [
            "",
            f"Over the letters (their distribution at the answer's letter): ECE {number(over_letters['ece'])}, "
            f"accuracy {number(over_letters['accuracy'])}; mass outside the top {TOP_LOGPROBS}: mean "
            f"{number(summary['outside_mass_mean'])}, max {number(summary['outside_mass_max'])}; that mass could "
            f"move the ECE over the letters by at most {number(summary['ece_bound'])}.",
        ]
    out = {
        "questions": len(prompts), "summary": summary, "report": report, "letters": letters,
        "over_letters": over_letters,
        "files": {"batch_input": str(batch_input), "batch_output": str(batch_output), "gold": str(gold)},
    }  # fmt: skip
    return {"text": "\n".join(lines), "json": out, "verdicts": []}
