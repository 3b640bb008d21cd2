"""A lean decode loop: sampling and the sampled token's log-prob in one place, no ``generate`` machinery.

:func:`decode` continues a left-padded batch from the KV cache of its prompts but their last token
(:func:`~baselines.generation.prefill.prefill_cache`, so prefix sharing still applies), one model
forward of one token per row per step. Each step takes the last position's logits in float32 and

* records ``log_softmax(logits / temperature)`` gathered at the sampled token (the numbers
  :class:`~baselines.generation.transformers_backend.SampledLogprobs` records: those of the sampling
  policy before top-k / top-p renormalization);
* samples exactly as ``generate`` does: ``argmax`` when greedy, else ``logits / temperature``, then
  transformers' own top-k and top-p warpers when set, ``softmax`` and ``torch.multinomial`` -- so
  with the same seed and the same batch it draws the same tokens as ``generate``;
* replaces the tokens of rows that already stopped (EOS) by padding, and stops when all rows did.

Two KV caches:

* **dynamic** (CPU default): the model's own growing cache; finished rows are dropped from the
  batch every ``segment`` steps (``Cache.batch_select_indices``) so they stop costing compute.
* **static** (CUDA default): transformers' ``StaticCache`` pre-allocated for the call's prompt width
  + ``max_new_tokens`` (rounded up to a multiple of 128), the prompt cache copied in, the batch
  padded to a multiple of 8 rows, and a 4-D attention mask built here each step (the pad columns
  masked, causality by column). Every step then has the same shapes and addresses, so with
  CUDA graphs the step's forward is captured once per (rows, length) as a CUDA graph and
  replayed: one launch per step instead of hundreds (see :mod:`baselines.generation.cuda_graphs`).
  Only for models whose layers are all full attention (no sliding window) and whose attention
  takes a 4-D mask (``sdpa``, ``eager``); others use the dynamic cache.

Host syncs are batched: the "all rows stopped?" check runs every ``check_every`` steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import StaticCache, TopKLogitsWarper, TopPLogitsWarper

from baselines.generation.prefill import CACHE_KW, _forward, prefill_cache
from baselines.generation.types import GenerationConfig

#: the 4-D mask layouts the static path can build (boolean for sdpa, additive for eager attention)
MASK_KINDS = ("sdpa", "eager")


@dataclass
class DecodeOptions:
    """How :func:`decode` runs (see the module docstring)."""

    static_cache: bool = False
    share_prompts: bool = True
    prefill_padding: float | None = 1.25
    segment: int = 32
    check_every: int = 8


@dataclass
class Decoded:
    """Every row's completion (cut after its first EOS), its log-probs and whether it stopped."""

    completions: list[list[int]]
    logprobs: list[list[float]]
    stopped: list[bool]


def pick(logits: torch.Tensor, config: GenerationConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens, their log-probs) for one step's float32 ``logits`` (rows x vocabulary)."""
    scaled = logits / config.scoring_temperature
    if config.greedy:
        tokens = logits.argmax(-1)
    else:
        scores = scaled if config.temperature != 1.0 else logits
        if config.top_k:
            scores = TopKLogitsWarper(config.top_k)(None, scores)
        if config.top_p < 1.0:
            scores = TopPLogitsWarper(config.top_p)(None, scores)
        tokens = torch.multinomial(F.softmax(scores, dim=-1), num_samples=1).squeeze(1)
    logp = torch.log_softmax(scaled, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return tokens, logp


def static_supported(model: nn.Module) -> bool:
    """Whether the static-cache path applies: full attention in every layer and a 4-D mask it can take."""
    cfg = model.config.get_text_config(decoder=True)
    types = getattr(cfg, "layer_types", None) or ["full_attention"]
    sliding = getattr(cfg, "sliding_window", None) and getattr(cfg, "use_sliding_window", True)
    return (
        all(t == "full_attention" for t in types)
        and not sliding
        and getattr(model.config, "_attn_implementation", "eager") in MASK_KINDS
    )


def _first_cache(
    model: nn.Module, ids: torch.Tensor, mask: torch.Tensor, opts: DecodeOptions, device: Any, adapters: list
):
    """The dynamic cache of ``ids[:, :-1]`` (None when a row has nothing before its last token)."""
    if ids.shape[1] < 2 or not bool(mask[:, :-1].any(dim=1).all()):
        return None
    cache = prefill_cache(model, ids, mask, adapters, device, share=opts.share_prompts, max_padding=opts.prefill_padding)
    return cache if cache is not None else _forward(model, ids[:, :-1], mask[:, :-1], adapters, device)


def decode(
    model: nn.Module,
    ids: torch.Tensor,
    mask: torch.Tensor,
    config: GenerationConfig,
    eos_ids: list[int],
    pad_id: int,
    device: Any,
    opts: DecodeOptions,
    graphs: Any = None,
    adapters: list | None = None,
) -> Decoded:
    """Decode ``config.max_new_tokens`` tokens for the left-padded prompts ``ids`` (``mask``: 1 = real).

    ``adapters``: each row's peft adapter name when ``model`` is a peft model serving several in one
    batch (``adapter_names``; the dynamic cache then); None or all equal: ``model`` as it is."""
    adapters = list(adapters) if adapters is not None and len(set(adapters)) > 1 else [None] * ids.shape[0]
    if opts.static_cache and static_supported(model) and adapters[0] is None:
        return _decode_static(model, ids, mask, config, eos_ids, pad_id, device, opts, graphs)
    return _decode_dynamic(model, ids, mask, config, eos_ids, pad_id, device, opts, adapters)


def _collect(rows: list[int], new: torch.Tensor, lp: torch.Tensor, eos: set[int], out: Decoded) -> list[int]:
    """Append the segment ``new`` (rows x n) of original rows ``rows``; returns the positions still going."""
    keep = []
    for k, (r, row, lps) in enumerate(zip(rows, new.tolist(), lp.tolist())):
        if out.stopped[r]:
            continue
        stop = next((j for j, t in enumerate(row) if t in eos), None)
        cut = len(row) if stop is None else stop + 1
        out.completions[r] += row[:cut]
        out.logprobs[r] += lps[:cut]
        out.stopped[r] = stop is not None
        if stop is None:
            keep.append(k)
    return keep


def _decode_dynamic(model, ids, mask, config, eos_ids, pad_id, device, opts, adapters) -> Decoded:
    n_rows = ids.shape[0]
    out = Decoded([[] for _ in range(n_rows)], [[] for _ in range(n_rows)], [False] * n_rows)
    eos = set(eos_ids)
    eos_t = torch.tensor(eos_ids, device=device)
    ids, mask = ids.to(device), mask.to(device)
    lens = mask.sum(-1)
    cache = _first_cache(model, ids, mask, opts, device, adapters)
    rows = list(range(n_rows))
    if cache is None:  # full prompt forward, as generate's prefill
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        step_ids, step_mask = ids, mask
    else:
        positions = (lens - 1).unsqueeze(-1)
        step_ids, step_mask = ids[:, -1:], mask
    done = torch.zeros(n_rows, dtype=torch.bool, device=device)
    toks: list[torch.Tensor] = []
    lps: list[torch.Tensor] = []
    for step in range(config.max_new_tokens):
        names = {"adapter_names": [adapters[r] for r in rows]} if adapters[0] is not None else {}
        res = model(input_ids=step_ids, attention_mask=step_mask, position_ids=positions, use_cache=True,
                    logits_to_keep=1, **names, **({CACHE_KW: cache} if cache is not None else {}))  # fmt: skip
        cache = res[CACHE_KW]
        tokens, logp = pick(res.logits[:, -1, :].float(), config)
        tokens = torch.where(done, torch.full_like(tokens, pad_id), tokens)
        done = done | torch.isin(tokens, eos_t)
        toks.append(tokens)
        lps.append(logp)
        last = step + 1 == config.max_new_tokens
        if last or len(toks) == opts.segment or bool(done.all()):
            keep = _collect(rows, torch.stack(toks, 1), torch.stack(lps, 1), eos, out)
            toks, lps = [], []
            if last or not keep:
                break
            if len(keep) < len(rows):
                index = torch.tensor(keep, device=device)
                cache.batch_select_indices(index)
                tokens, step_mask, done, lens = tokens[index], step_mask[index], done[index], lens[index]
                rows = [rows[k] for k in keep]
        step_ids = tokens.unsqueeze(-1)
        step_mask = torch.cat([step_mask, torch.ones_like(step_ids)], dim=1)
        positions = (lens + step).unsqueeze(-1)
    return out


def mask_dtype(model: nn.Module) -> torch.dtype:
    """The 4-D attention mask's dtype for ``model``: boolean for sdpa, additive (the model's dtype) for eager."""
    return torch.bool if model.config._attn_implementation == "sdpa" else model.dtype


def allocated_static_cache(model: nn.Module, rows: int, length: int, device: Any) -> StaticCache:
    """A ``StaticCache`` of ``rows`` x ``length`` columns with every layer allocated now (fixed addresses)."""
    cache = StaticCache(config=model.config, max_cache_len=length)
    cfg = model.config.get_text_config(decoder=True)
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    dummy = torch.zeros(rows, heads, 1, dim, dtype=model.dtype, device=device)
    for layer in cache.layers:
        layer.lazy_initialization(dummy, dummy)
    return cache


def _static_mask(model: nn.Module, mask: torch.Tensor, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(the rows' key mask over ``length`` columns, bool; the 4-D mask buffer in the model's layout)."""
    keys = torch.ones(mask.shape[0], length, dtype=torch.bool, device=mask.device)
    keys[:, : mask.shape[1]] = mask.bool()
    return keys, torch.zeros(mask.shape[0], 1, 1, length, dtype=mask_dtype(model), device=mask.device)


def _fill_mask(buffer: torch.Tensor, keys: torch.Tensor, column: int) -> None:
    allowed = keys.clone()
    allowed[:, column + 1 :] = False
    if buffer.dtype == torch.bool:
        buffer.copy_(allowed[:, None, None, :])
    else:
        zero = torch.zeros((), dtype=buffer.dtype, device=buffer.device)
        low = torch.tensor(torch.finfo(buffer.dtype).min, dtype=buffer.dtype, device=buffer.device)
        buffer.copy_(torch.where(allowed, zero, low)[:, None, None, :])


def _decode_static(model, ids, mask, config, eos_ids, pad_id, device, opts, graphs) -> Decoded:
    n_rows, width = ids.shape
    rows = -(-n_rows // 8) * 8  # a few batch shapes only: CUDA graphs are captured per shape
    if rows > n_rows:  # dummy rows repeat row 0; their tokens are dropped
        extra = rows - n_rows
        ids, mask = torch.cat([ids, ids[:1].expand(extra, -1)]), torch.cat([mask, mask[:1].expand(extra, -1)])
    ids, mask = ids.to(device), mask.to(device)
    length = -(-(width + config.max_new_tokens) // 128) * 128
    runner = graphs.runner(model, rows, length) if graphs is not None else None
    cache = runner.cache if runner is not None else allocated_static_cache(model, rows, length, device)
    prefix = _first_cache(model, ids, mask, opts, device, [None] * rows)
    start = width - 1 if prefix is not None else 0
    _load_prefix(cache, prefix)
    keys, mask4 = _static_mask(model, mask, length)
    lens = mask.sum(-1)
    done = torch.zeros(rows, dtype=torch.bool, device=device)
    eos_t = torch.tensor(eos_ids, device=device)
    out = Decoded([[] for _ in range(n_rows)], [[] for _ in range(n_rows)], [False] * n_rows)
    toks: list[torch.Tensor] = []
    lps: list[torch.Tensor] = []
    if prefix is None:  # a row with a one-token prompt: prefill the whole prompt into the static cache
        full = keys[:, None, :width].expand(-1, width, -1) & torch.ones(width, width, dtype=torch.bool, device=device).tril()
        full = full | torch.eye(width, dtype=torch.bool, device=device)  # pad queries see themselves (no NaN)
        full = F.pad(full, (0, length - width))[:, None]
        if mask4.dtype != torch.bool:
            full = torch.where(full, 0.0, torch.finfo(mask4.dtype).min).to(mask4.dtype)
        res = model(input_ids=ids, attention_mask=full, position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
                    use_cache=True, logits_to_keep=1, **{CACHE_KW: cache})  # fmt: skip
        logits = res.logits[:, -1, :].float()
        column = width
    else:
        step_ids, positions, column = ids[:, -1:], (lens - 1).unsqueeze(-1), start
        logits = None
    for step in range(config.max_new_tokens):
        if logits is None:
            _fill_mask(mask4, keys, column)
            if runner is not None:
                logits = runner.step(step_ids, positions, mask4)
            else:
                res = model(input_ids=step_ids, attention_mask=mask4, position_ids=positions, use_cache=True,
                            logits_to_keep=1, **{CACHE_KW: cache})  # fmt: skip
                logits = res.logits[:, -1, :].float()
            column += 1
        tokens, logp = pick(logits, config)
        logits = None
        tokens = torch.where(done, torch.full_like(tokens, pad_id), tokens)
        done = done | torch.isin(tokens, eos_t)
        toks.append(tokens)
        lps.append(logp)
        if step + 1 == config.max_new_tokens or ((step + 1) % opts.check_every == 0 and bool(done[:n_rows].all())):
            break
        step_ids, positions = tokens.unsqueeze(-1), (lens + step).unsqueeze(-1)
    _collect(list(range(n_rows)), torch.stack(toks, 1)[:n_rows], torch.stack(lps, 1)[:n_rows], set(eos_ids), out)
    return out


def _load_prefix(cache: StaticCache, prefix: Any) -> None:
    """Copy the dynamic ``prefix`` cache (or nothing) into the allocated static ``cache``; its write position after it."""
    n = 0 if prefix is None else prefix.layers[0].keys.shape[-2]
    for k, layer in enumerate(cache.layers):
        if prefix is not None:
            layer.keys[:, :, :n].copy_(prefix.layers[k].keys)
            layer.values[:, :, :n].copy_(prefix.layers[k].values)
        layer.cumulative_length.fill_(n)
