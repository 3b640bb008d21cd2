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

A prefix every context of a chunk shares (the chat template and the role's system message, at
least :data:`MIN_SHARED_PREFIX` tokens) is run once: its KV cache, with gradients, is replicated
to every row, which then runs only its own tokens (laid out ``[shared][left pad][rest][completion]
[right pad]``, positions continuing after the prefix). Short prompts are mostly that prefix, so
the scoring forward shrinks to the tokens that differ. Only for models whose every layer is full
attention without gradient checkpointing (a sliding window counts columns, which the padding
after the prefix would shift); others take the one padded forward.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor, nn
from transformers.modeling_outputs import CausalLMOutputWithPast

from baselines.policies.loading import checkpointed_layers

#: a prefix shared by every context of a chunk is run once when it is at least this many tokens long
MIN_SHARED_PREFIX = 8
#: the keyword of the KV cache in a model's forward: ``cache`` since transformers 5.x, ``past_key_values`` before
_CACHE_KW = "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"


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
    share: bool = True,
) -> tuple[list[Tensor], list[Tensor] | None]:
    """Log-prob of every completion token (and optionally the entropy of each step's distribution).

    Returns one 1-D float32 tensor per row, of length ``len(completion_ids[i])``, attached to the
    autograd graph when gradients are enabled. ``entropy_grad=False`` computes the entropies
    outside the graph (a statistic only: no full-vocabulary tensors kept for the backward pass).
    ``batch_size`` splits the distinct contexts (module docstring) into chunks of at most that
    many rows (one forward each); results are independent of the chunking. ``share=False`` runs every
    row in full (no shared contexts or prefix; the reference the sharing is checked against).
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 to score tokens, got {temperature}")
    vocab = model.get_output_embeddings().weight.shape[0]
    _check(prompt_ids, completion_ids, vocab)
    if share:
        contexts, owner = unique_contexts(prompt_ids, completion_ids)
    else:
        contexts, owner = list(range(len(prompt_ids))), np.arange(len(prompt_ids))
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
                                     pad_id=pad_id, temperature=temperature, share=share)
        entropy = None
        if with_entropy and logp_all is not None:
            # differentiated, it keeps rows x tokens x vocabulary floats twice more for the backward pass
            src = logp_all if entropy_grad else logp_all.detach()
            entropy = -(src.exp() * src).sum(-1)
        rows = [(i, j) for j in range(len(chunk)) for i in members[start + j] if len(completion_ids[i])]
        for i in (i for j in range(len(chunk)) for i in members[start + j] if not len(completion_ids[i])):
            logps[i], ents[i] = torch.zeros(0, device=device), torch.zeros(0, device=device)
        if not rows:
            continue
        # every row's tokens from its context's log-probs, gathered at once (one host-to-device copy a chunk)
        width = logp_all.shape[1]
        targets = torch.tensor([[*completion_ids[i], *[0] * (width - len(completion_ids[i]))] for i, _ in rows],
                               dtype=torch.long).to(device)
        context = torch.tensor([j for _, j in rows], dtype=torch.long).to(device)
        token_logp = logp_all[context[:, None], torch.arange(width, device=device)[None, :], targets]
        row_entropy = entropy[context] if entropy is not None else None
        for k, (i, _) in enumerate(rows):
            n = len(completion_ids[i])
            logps[i] = token_logp[k, :n]
            if row_entropy is not None:
                ents[i] = row_entropy[k, :n]
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
    share: bool = True,
) -> Tensor | None:
    """``log_softmax(logits / temperature)`` at the completion positions, ``[rows, C_max, vocab]`` float32
    (None when every completion is empty)."""
    device = model.get_output_embeddings().weight.device
    c_lens = [len(c) for c in completion_ids]
    c_max = max(c_lens, default=0)
    if c_max == 0:
        return None
    shared = shared_prefix_length(model, prompt_ids) if share else 0
    out = _prefix_forward(model, prompt_ids, completion_ids, shared, pad_id, c_max) if shared else None
    if out is None:
        ids, mask = _layout(prompt_ids, completion_ids, pad_id)
        ids, mask = ids.to(device), mask.to(device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=c_max + 1,
                    use_cache=False)
    # logits at column j predict token j+1: the last prompt column and the completion's columns but its
    # last predict the completion (the rows are right-aligned at the prompt's end).
    logits = out.logits[:, :c_max, :].float() / temperature
    return torch.log_softmax(logits, dim=-1)


def _layout(prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]],
            pad_id: int) -> tuple[Tensor, Tensor]:
    """(ids, attention mask) of rows ``[left pad][prompt][completion][right pad]``, every prompt ending
    at the same column."""
    p_max = max(len(p) for p in prompt_ids)
    width = p_max + max(len(c) for c in completion_ids)
    ids = torch.full((len(prompt_ids), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompt_ids), width), dtype=torch.long)
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids)):
        lo, hi = p_max - len(p), p_max + len(c)
        ids[i, lo:hi] = torch.tensor([*p, *c], dtype=torch.long)
        mask[i, lo:hi] = 1
    return ids, mask


def shared_prefix_length(model: nn.Module, prompt_ids: Sequence[Sequence[int]]) -> int:
    """Tokens every prompt starts with (each keeps at least one of its own), when worth running once:
    0 for a single row, a prefix under :data:`MIN_SHARED_PREFIX`, or a model it does not apply to."""
    if len(prompt_ids) < 2 or not _full_attention(model):
        return 0
    n = min(len(p) for p in prompt_ids) - 1
    first = prompt_ids[0]
    for p in prompt_ids[1:]:
        n = next((j for j in range(n) if int(p[j]) != int(first[j])), n)
    return n if n >= MIN_SHARED_PREFIX else 0


def _full_attention(model: nn.Module) -> bool:
    """Every layer attends to every earlier column (no sliding window) and none is checkpointed."""
    config = model.config
    if any(layer.training for layer in checkpointed_layers(model)):
        return False
    types = getattr(config, "layer_types", None)
    if types is not None:
        return all(t == "full_attention" for t in types)
    return getattr(config, "sliding_window", None) is None or getattr(config, "use_sliding_window", True) is False


def _prefix_forward(model: nn.Module, prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]],
                    n: int, pad_id: int, c_max: int) -> CausalLMOutputWithPast | None:
    """The chunk's forward with its first ``n`` prompt tokens run once (module docstring); None when the
    model's cache cannot be replicated (not plain dynamic layers)."""
    device = model.get_output_embeddings().weight.device
    head = torch.tensor([list(prompt_ids[0][:n])], dtype=torch.long, device=device)
    cache = model(input_ids=head, use_cache=True, logits_to_keep=1)[_CACHE_KW]
    layers = getattr(cache, "layers", None)
    if not layers or any(type(layer).__name__ != "DynamicLayer" for layer in layers):
        return None
    cache.reorder_cache(torch.zeros(len(prompt_ids), dtype=torch.long, device=device))
    ids, mask = _layout([p[n:] for p in prompt_ids], completion_ids, pad_id)
    ids, mask = ids.to(device), mask.to(device)
    positions = n + (mask.cumsum(-1) - 1).clamp(min=0)
    full_mask = torch.cat([torch.ones(len(prompt_ids), n, dtype=mask.dtype, device=device), mask], dim=1)
    return model(input_ids=ids, attention_mask=full_mask, position_ids=positions, logits_to_keep=c_max + 1,
                 use_cache=True, **{_CACHE_KW: cache})
