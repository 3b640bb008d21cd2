"""Per-token log-probabilities of completions given prompts, batched, with gradients.

One forward pass scores a whole batch of (prompt, completion) pairs of different lengths.
Rows are laid out as ``[left pad][prompt][completion][right pad]`` so every prompt ends at
the same column; the completion tokens of every row then sit in the same ``C_max`` columns,
and only those logits are computed (``logits_to_keep``), which matters for large
vocabularies. Position ids are counted from each row's first real token, so a row's numbers
do not depend on what else is in the batch.

The log-probs are ``log_softmax(logits / temperature)`` at the completion tokens, in float32.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    ``batch_size`` splits the rows into chunks (one forward each); results are independent of
    the chunking.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 to score tokens, got {temperature}")
    vocab = model.get_output_embeddings().weight.shape[0]
    _check(prompt_ids, completion_ids, vocab)
    n = len(prompt_ids)
    step = batch_size or max(n, 1)
    logps: list[Tensor] = []
    ents: list[Tensor] = []
    for start in range(0, n, step):
        lp, en = _score_chunk(
            model,
            prompt_ids[start : start + step],
            completion_ids[start : start + step],
            pad_id=pad_id,
            temperature=temperature,
            with_entropy=with_entropy,
            entropy_grad=entropy_grad,
        )
        logps.extend(lp)
        ents.extend(en)
    return logps, (ents if with_entropy else None)


def _score_chunk(
    model: nn.Module,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    *,
    pad_id: int,
    temperature: float,
    with_entropy: bool,
    entropy_grad: bool,
) -> tuple[list[Tensor], list[Tensor]]:
    device = model.get_output_embeddings().weight.device
    c_lens = [len(c) for c in completion_ids]
    c_max = max(c_lens, default=0)
    if c_max == 0:
        empty = torch.zeros(0, device=device)
        return [empty.clone() for _ in c_lens], [empty.clone() for _ in c_lens]
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
    logp_all = torch.log_softmax(logits, dim=-1)
    targets = ids[:, p_max:]
    token_logp = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    logps = [token_logp[i, :n] for i, n in enumerate(c_lens)]
    ents: list[Tensor] = []
    if with_entropy:
        # differentiated, it keeps rows x tokens x vocabulary floats twice more for the backward pass
        src = logp_all if entropy_grad else logp_all.detach()
        entropy = -(src.exp() * src).sum(-1)
        ents = [entropy[i, :n] for i, n in enumerate(c_lens)]
    return logps, ents
