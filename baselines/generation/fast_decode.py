"""A lean decode loop: sampling and the sampled token's log-prob in one place, no ``generate`` machinery.

:func:`decode` continues a left-padded batch of prompts for ``max_new_tokens`` tokens. Every step
takes the last position's logits in float32, records ``log_softmax(logits / temperature)`` at the
sampled token (the numbers :class:`~baselines.generation.transformers_backend.SampledLogprobs`
records), and samples as ``generate`` does -- ``argmax`` when greedy, else ``logits / temperature``,
transformers' own top-k / top-p warpers, ``softmax`` -- drawing with the exponential race
(:mod:`baselines.generation.sampling`: the same distribution as ``torch.multinomial``, no host sync).
Rows that stopped (EOS) get padding; completions are cut after their first EOS.

Two engines:

* **team** (Llama / Mistral / Qwen2 layouts; :mod:`baselines.generation.team_decoder`): every row of
  every agent in ONE forward per token -- the base weights shared, each row's own LoRA delta -- on a
  pre-allocated KV cache with grouped-query attention over it as it is. The whole step, sampling and
  bookkeeping included, lives on the device (:mod:`baselines.generation.decode_state`); on CUDA it
  is captured as a CUDA graph and replayed (:mod:`baselines.generation.cuda_graphs`), and the "all
  rows stopped?" check reads a flag copied asynchronously, so the host never waits inside the loop.
  On a CPU it runs eagerly, attends only to the columns written so far and drops stopped rows every
  ``segment`` steps.
* **dynamic** (any other model): the model's own forward with transformers' dynamic KV cache, the
  rows' adapters applied by peft (``adapter_names``), stopped rows dropped every ``segment`` steps.

Prompts are prefilled once per distinct prompt and adapter (a GRPO group's copies share it) and in
length buckets (``prefill_padding``) by both engines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from baselines.generation.cuda_graphs import DecodeGraphs, length_bucket, row_bucket
from baselines.generation.decode_state import DecodeState, prefill_prompts, team_step
from baselines.generation.prefill import CACHE_KW, _forward, prefill_cache
from baselines.generation.sampling import pick
from baselines.generation.team_decoder import TeamDecoder
from baselines.generation.types import GenerationConfig


@dataclass
class DecodeOptions:
    """How :func:`decode` runs (see the module docstring)."""

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


def decode(
    engine: nn.Module | TeamDecoder,
    ids: torch.Tensor,
    mask: torch.Tensor,
    config: GenerationConfig,
    eos_ids: list[int],
    pad_id: int,
    device: Any,
    opts: DecodeOptions,
    graphs: DecodeGraphs | None = None,
    adapters: list | None = None,
    forced: torch.Tensor | None = None,
) -> Decoded:
    """Decode ``config.max_new_tokens`` tokens for the left-padded prompts ``ids`` (``mask``: 1 = real).

    ``engine``: a :class:`TeamDecoder` (the team engine; ``graphs`` to capture its step on CUDA) or a
    model (the dynamic engine). ``adapters``: each row's LoRA adapter name (None: the model as it is).
    ``forced`` (rows x max_new_tokens, padded after a row's EOS): feed these tokens instead of drawing --
    the sampler's own log-probs of given completions (eagerly, never through a graph)."""
    adapters = list(adapters) if adapters is not None else [None] * ids.shape[0]
    if forced is not None:
        forced = forced.to(device)
        graphs = None
    if isinstance(engine, TeamDecoder):
        return _decode_team(engine, ids, mask, config, eos_ids, pad_id, opts, graphs, adapters, forced)
    if len(set(adapters)) == 1:
        adapters = [None] * ids.shape[0]  # one adapter: the model's active one
    return _decode_dynamic(engine, ids, mask, config, eos_ids, pad_id, device, opts, adapters, forced)


def _decode_team(decoder: TeamDecoder, ids, mask, config, eos_ids, pad_id, opts, graphs, adapters, forced) -> Decoded:
    n_rows, width = ids.shape
    out = Decoded([[] for _ in range(n_rows)], [[] for _ in range(n_rows)], [False] * n_rows)
    length = width + config.max_new_tokens
    captured = graphs is not None
    rows = row_bucket(n_rows) if captured else n_rows
    if rows > n_rows:  # padding rows repeat row 0; their tokens are dropped
        extra = rows - n_rows
        ids, mask = torch.cat([ids, ids[:1].expand(extra, -1)]), torch.cat([mask, mask[:1].expand(extra, -1)])
        adapters = adapters + adapters[:1] * extra
    ids, mask = ids.to(decoder.device), mask.to(decoder.device)
    decoder.refresh()
    if captured:
        slot = graphs.slot(decoder, rows, length_bucket(length))
        graph = graphs.graph(slot, config)
        cache, state = slot.cache, slot.state
    else:
        cache, state = decoder.new_cache(rows, length), DecodeState.allocate(decoder, rows, length)
    prefill_prompts(decoder, cache, ids, mask, adapters, opts.share_prompts, opts.prefill_padding)
    state.start(ids, mask, eos_ids, pad_id, decoder.route(adapters))
    alive = list(range(n_rows))  # the eager loop's batch row -> original row
    alive_index = torch.arange(n_rows, device=decoder.device)
    flag = _AllStopped(state.done, n_rows) if captured else None
    steps = 0
    for step in range(config.max_new_tokens):
        if captured:
            graphs.run(slot, graph, config)
        else:
            team_step(decoder, cache, state, config, upto=width + step,
                      forced=None if forced is None else forced[alive_index, step])
        steps += 1
        if (step + 1) % opts.check_every and step + 1 < config.max_new_tokens:
            continue
        if flag is not None:
            if flag.poll():
                break
        elif (step + 1) % opts.segment == 0 or bool(state.done.all()):
            finished = state.done.tolist()
            if not any(finished):
                continue
            keep = [k for k, f in enumerate(finished) if not f]
            _record(state, [(k, alive[k]) for k, f in enumerate(finished) if f], steps, eos_ids, out)
            if not keep:
                return out
            index = torch.tensor(keep, device=decoder.device)
            cache.select(index)
            state = state.select(index)
            alive = [alive[k] for k in keep]
            alive_index = alive_index[index]
    _record(state, [(k, r) for k, r in enumerate(alive) if r < n_rows], steps, eos_ids, out)
    return out


class _AllStopped:
    """Whether every real row stopped, read without waiting on CUDA: each poll copies the flag to pinned host
    memory asynchronously and answers with the copy of the poll before (a few steps late, never a sync).
    Elsewhere (the slots run eagerly on a CPU) it reads the flag directly."""

    def __init__(self, done: torch.Tensor, n_rows: int):
        self.done, self.n_rows = done, n_rows
        self.cuda = done.device.type == "cuda"
        self.host = torch.zeros((), dtype=torch.bool, pin_memory=self.cuda)
        self.event = torch.cuda.Event() if self.cuda else None
        self.pending = False

    def poll(self) -> bool:
        if not self.cuda:
            return bool(self.done[: self.n_rows].all())
        if self.pending and self.event.query() and bool(self.host):
            return True
        self.host.copy_(self.done[: self.n_rows].all(), non_blocking=True)
        self.event.record()
        self.pending = True
        return False


def _record(state: DecodeState, rows: list[tuple[int, int]], steps: int, eos_ids: list[int], out: Decoded) -> None:
    """Copy the outputs of batch rows ``rows`` ((batch row, original row) pairs) to ``out``, cut after EOS."""
    if not rows:
        return
    index = torch.tensor([k for k, _ in rows], device=state.tokens.device)
    tokens = state.tokens.index_select(0, index)[:, :steps].tolist()
    logps = state.logps.index_select(0, index)[:, :steps].tolist()
    eos = set(eos_ids)
    for (_, r), row, lps in zip(rows, tokens, logps):
        stop = next((j for j, t in enumerate(row) if t in eos), None)
        cut = len(row) if stop is None else stop + 1
        out.completions[r], out.logprobs[r], out.stopped[r] = row[:cut], lps[:cut], stop is not None


def _first_cache(
    model: nn.Module, ids: torch.Tensor, mask: torch.Tensor, opts: DecodeOptions, device: Any, adapters: list
):
    """The dynamic cache of ``ids[:, :-1]`` (None when a row has nothing before its last token)."""
    if ids.shape[1] < 2 or not bool(mask[:, :-1].any(dim=1).all()):
        return None
    cache = prefill_cache(model, ids, mask, adapters, device, share=opts.share_prompts, max_padding=opts.prefill_padding)
    return cache if cache is not None else _forward(model, ids[:, :-1], mask[:, :-1], adapters, device)


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


def _decode_dynamic(model, ids, mask, config, eos_ids, pad_id, device, opts, adapters, forced) -> Decoded:
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
        given = None if forced is None else forced[torch.tensor(rows, device=device), step]
        tokens, logp = pick(res.logits[:, -1, :].float(), config, given)
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
