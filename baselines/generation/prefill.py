"""Prompt prefill for :class:`~baselines.generation.TransformersBackend`: the KV cache ``generate`` continues from.

A batch of ``generate`` is left-padded to its longest prompt. :func:`prefill_cache` computes the
cache of every row's prompt but its last token, doing less work than ``generate``'s own prefill:

* **once per distinct prompt**: copies of a prompt (same adapter, same tokens: a GRPO group)
  are prefilled once and the cache is replicated to every copy (``Cache.reorder_cache``);
* **in length buckets** (``max_padding``): distinct prompts sorted by length are prefilled in
  buckets whose padded size stays within ``max_padding`` x their real size, and each bucket's
  cache is left-padded with zeros (masked positions) to the batch width. Prompt processing is
  quadratic and compute-bound on a CPU, so padding a 300-token prompt to 600 costs more than
  batching it saves. Only for caches made of plain ``DynamicLayer`` s (no sliding window);
  other caches are prefilled in one padded forward.

Positions are counted from each row's first real token, as ``generate`` derives them from the
attention mask, so the cache equals the one ``generate`` would build (to float rounding).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from transformers.modeling_outputs import CausalLMOutputWithPast

#: the keyword of the KV cache in model forward / generate: ``cache`` since transformers 5.x,
#: ``past_key_values`` before
CACHE_KW = "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"


def length_buckets(
    order: Sequence[int], lengths: Sequence[int], max_padding: float, cap: int, extra: int = 0
) -> list[list[int]]:
    """Split ``order`` (indices sorted by ascending ``lengths``) into runs of at most ``cap`` whose padded
    size, rows x (longest + ``extra``), stays within ``max_padding`` x the real size sum(length + ``extra``)."""
    buckets: list[list[int]] = []
    bucket: list[int] = []
    real = 0
    for j in order:
        size = lengths[j] + extra  # the longest so far: rows are sorted by length
        if bucket and (len(bucket) >= cap or (len(bucket) + 1) * size > max_padding * (real + size)):
            buckets.append(bucket)
            bucket, real = [], 0
        bucket.append(j)
        real += size
    return [*buckets, bucket] if bucket else buckets


def _forward(
    model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, adapters: list, device: Any
) -> Any:
    """The cache of one left-padded forward (only the last position's logits are computed)."""
    position_ids = (mask.cumsum(-1) - 1).clamp(min=0)  # what generate derives from the mask
    extra = {"adapter_names": adapters} if len(set(adapters)) > 1 else {}
    out = model(
        input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=position_ids.to(device),
        use_cache=True, logits_to_keep=1, **extra,
    )  # fmt: skip
    return out[CACHE_KW]


def _plain_layers(cache: Any) -> bool:
    layers = getattr(cache, "layers", None)
    return bool(layers) and all(type(layer).__name__ == "DynamicLayer" for layer in layers)


def prefill_cache(
    model: torch.nn.Module,
    ids: torch.Tensor,
    mask: torch.Tensor,
    adapters: list,
    device: Any,
    *,
    share: bool = True,
    max_padding: float | None = None,
) -> Any | None:
    """The cache of ``ids[:, :-1]`` (left-padded rows, ``mask`` their attention mask), or None when
    ``generate``'s own prefill would do the same work (no repeated prompt, one length bucket)."""
    width = ids.shape[1] - 1
    if width < 1 or not bool(mask[:, :-1].any(dim=1).all()):
        return None  # a one-token prompt: nothing to prefill before its last token
    first: dict[tuple, int] = {}
    rows: list[int] = []  # the first row of each distinct prompt
    index: list[int] = []  # row -> its distinct prompt
    for i, (a, row) in enumerate(zip(adapters, ids.tolist())):
        key = (a, *row) if share else (i,)
        if key not in first:
            first[key] = len(rows)
            rows.append(i)
        index.append(first[key])
    lengths = [int(mask[r].sum()) - 1 for r in rows]
    order = sorted(range(len(rows)), key=lambda j: lengths[j])
    buckets = [order] if max_padding is None else length_buckets(order, lengths, max_padding, cap=len(rows))
    if len(rows) == len(index) and len(buckets) == 1:
        return None
    sub_adapters = [adapters[r] for r in rows]
    if len(buckets) > 1:
        caches = []
        for bucket in buckets:  # shortest first: a cache that cannot be padded is found at the least cost
            w = max(lengths[j] for j in bucket)
            sel = [rows[j] for j in bucket]
            caches.append(_forward(model, ids[sel, -1 - w : -1], mask[sel, -1 - w : -1],
                                   [sub_adapters[j] for j in bucket], device))  # fmt: skip
            if not _plain_layers(caches[0]):
                break
        else:
            cache = caches[0]
            for n, layer in enumerate(cache.layers):
                parts = [(c.layers[n].keys, c.layers[n].values) for c in caches]
                layer.keys = torch.cat([F.pad(k, (0, 0, width - k.shape[-2], 0)) for k, _ in parts])
                layer.values = torch.cat([F.pad(v, (0, 0, width - v.shape[-2], 0)) for _, v in parts])
            position = {j: p for p, j in enumerate(j for bucket in buckets for j in bucket)}
            cache.reorder_cache(torch.tensor([position[k] for k in index], device=device))
            return cache
        if len(rows) == len(index):
            return None  # not bucketable (e.g. a sliding window) and nothing to share: generate prefills
    cache = _forward(model, ids[rows, :-1], mask[rows, :-1], sub_adapters, device)
    cache.reorder_cache(torch.tensor(index, device=device))
    return cache
