"""Per-token log-probabilities of completions given prompts, batched, with gradients.

One forward pass scores a whole batch of (prompt, completion) pairs of different lengths.
Rows are laid out as ``[left pad][prompt][completion][right pad]`` so every prompt ends at
the same column; the completion tokens of every row then sit in the same ``C_max`` columns,
and only those logits are computed (``logits_to_keep``), which matters for large
vocabularies. Position ids are counted from each row's first real token, so a row's numbers
do not depend on what else is in the batch.

The log-probs are ``log_softmax(logits / temperature)`` at the completion tokens, in float32.

Rows with the same *context* -- the same prompt and the same completion up to its last token --
have the same logits at every scored position, so each context is run through the model once and
every row sharing it gathers its own tokens from that one pass (gradients add up through the
shared graph). A group of G samples of one prompt with one-token answers (the signal game's
messages, a verdict, a digit) costs one forward instead of G; other rows are unaffected.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor, nn


def _check(prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]], vocab: int) -> None:
    if len(prompt_ids) != len(completion_ids):
        raise ValueError(f"{len(prompt_ids)} prompts but {len(completion_ids)} completions")
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids)):
        if len(p) == 0:
            raise ValueError(f"row {i}: empty prompt (a causal LM needs at least one context token)")
        for t in (*p, *c):
            if not 0 <= int(t) < vocab:
                raise ValueError(f"row {i}: token id {t} outside the model vocabulary [0, {vocab})")


def completion_logprobs(
    model: nn.Module,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    *,
    pad_id: int,
    temperature: float = 1.0,
    with_entropy: bool = False,
    entropy_grad: bool = True,
    batch_size: int | None = None,
) -> tuple[list[Tensor], list[Tensor] | None]:
    """Log-prob of every completion token (and optionally the entropy of each step's distribution).

    Returns one 1-D float32 tensor per row, of length ``len(completion_ids[i])``, attached to the
    autograd graph when gradients are enabled. ``entropy_grad=False`` computes the entropies
    outside the graph (a statistic only: no full-vocabulary tensors kept for the backward pass).
    ``batch_size`` splits the distinct contexts (module docstring) into chunks of at most that
    many rows (one forward each); results are independent of the chunking.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 to score tokens, got {temperature}")
    vocab = model.get_output_embeddings().weight.shape[0]
    _check(prompt_ids, completion_ids, vocab)
    contexts, owner = unique_contexts(prompt_ids, completion_ids)
    members: list[list[int]] = [[] for _ in contexts]
    for i, u in enumerate(owner):
        members[u].append(i)
    device = model.get_output_embeddings().weight.device
    step = batch_size or max(len(contexts), 1)
    logps: list[Tensor] = [torch.zeros(0)] * len(prompt_ids)
    ents: list[Tensor] = [torch.zeros(0)] * len(prompt_ids)
    for start in range(0, len(contexts), step):
        chunk = contexts[start : start + step]
        logp_all = _context_logprobs(model, [prompt_ids[r] for r in chunk], [completion_ids[r] for r in chunk],
                                     pad_id=pad_id, temperature=temperature)
        entropy = None
        if with_entropy and logp_all is not None:
            # differentiated, it keeps rows x tokens x vocabulary floats twice more for the backward pass
            src = logp_all if entropy_grad else logp_all.detach()
            entropy = -(src.exp() * src).sum(-1)
        for j in range(len(chunk)):
            for i in members[start + j]:
                n = len(completion_ids[i])
                if logp_all is None or not n:
                    logps[i], ents[i] = torch.zeros(0, device=device), torch.zeros(0, device=device)
                    continue
                targets = torch.as_tensor(list(completion_ids[i]), dtype=torch.long, device=device)
                logps[i] = logp_all[j, torch.arange(n, device=device), targets]
                if entropy is not None:
                    ents[i] = entropy[j, :n]
    return logps, (ents if with_entropy else None)


def unique_contexts(
    prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]]
) -> tuple[list[int], np.ndarray]:
    """(the first row of each distinct context, each row's context index); a context is the prompt and
    the completion but its last token (the prompt's length too: where the scored positions start)."""
    first: dict[tuple, int] = {}
    owner = np.empty(len(prompt_ids), dtype=np.int64)
    rows: list[int] = []
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids)):
        key = (len(p), len(c), *(int(t) for t in p), *(int(t) for t in c[:-1]))
        owner[i] = first.setdefault(key, len(first))
        if owner[i] == len(rows):
            rows.append(i)
    return rows, owner


def _context_logprobs(
    model: nn.Module,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    *,
    pad_id: int,
    temperature: float,
) -> Tensor | None:
    """``log_softmax(logits / temperature)`` at the completion positions, ``[rows, C_max, vocab]`` float32
    (None when every completion is empty)."""
    device = model.get_output_embeddings().weight.device
    c_lens = [len(c) for c in completion_ids]
    c_max = max(c_lens, default=0)
    if c_max == 0:
        return None
    p_max = max(len(p) for p in prompt_ids)
    width = p_max + c_max
    ids = torch.full((len(c_lens), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(c_lens), width), dtype=torch.long)
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids)):
        lo, hi = p_max - len(p), p_max + len(c)
        ids[i, lo:hi] = torch.tensor([*p, *c], dtype=torch.long)
        mask[i, lo:hi] = 1
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    out = model(
        input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=c_max + 1, use_cache=False
    )
    # logits at column j predict token j+1: columns p_max-1 .. p_max+c_max-2 predict the completion.
    logits = out.logits[:, :c_max, :].float() / temperature
    return torch.log_softmax(logits, dim=-1)
