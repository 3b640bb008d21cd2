"""The device-side state of a team decode and the one step that advances it (the body of a CUDA graph).

A :class:`DecodeState` holds everything a decode step reads and writes, as fixed device tensors:
the current token and position of every row, the cache column being written, which key columns each
row may attend to, which rows stopped, the step counter, and the output buffers that collect every
step's tokens and log-probs. :func:`team_step` is one step: mark the new column, run the decoder,
pick the tokens (:func:`~baselines.generation.sampling.pick`), replace the tokens of stopped rows by
padding, record, advance. Nothing in it reads a value back to the host, so it can be captured once
and replayed (:mod:`baselines.generation.cuda_graphs`); on a CPU the same function runs eagerly.

:func:`prefill_prompts` writes the prompts' keys and values (all but their last token) into the
cache: once per distinct prompt (a GRPO group's copies share it), in length buckets so a short
prompt is not processed padded to the longest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch
from torch import Tensor

from baselines.generation.prefill import length_buckets
from baselines.generation.sampling import pick
from baselines.generation.team_decoder import KVCache, TeamDecoder
from baselines.generation.types import GenerationConfig

#: room for this many stop tokens in a state (unused places repeat the first; a tokenizer rarely has more than 3)
EOS_SLOTS = 16


@dataclass
class DecodeState:
    """Per-row device buffers of one decode (``rows`` x ``length`` cache columns)."""

    ids: Tensor  #: (rows,) the token fed at this step
    positions: Tensor  #: (rows,) its position (counted from the row's first real token)
    keys: Tensor  #: (rows, length) bool: the cache columns each row attends to
    done: Tensor  #: (rows,) bool: the row emitted EOS
    tokens: Tensor  #: (rows, length) every step's token
    logps: Tensor  #: (rows, length) float32: every step's log-prob
    column: Tensor  #: (1,) the cache column this step writes
    step: Tensor  #: (1,) the step's index
    eos: Tensor  #: (k,) the stop tokens
    pad: Tensor  #: (1,) the token of rows that stopped
    routing: Tensor | None  #: (rows, sum of ranks) the LoRA routing (None: no adapters)

    @classmethod
    def allocate(cls, decoder: TeamDecoder, rows: int, length: int) -> DecodeState:
        dev = decoder.device
        long = dict(dtype=torch.long, device=dev)
        routing = decoder.route([None] * rows)
        return cls(ids=torch.zeros(rows, **long), positions=torch.zeros(rows, **long),
                   keys=torch.zeros(rows, length, dtype=torch.bool, device=dev),
                   done=torch.zeros(rows, dtype=torch.bool, device=dev), tokens=torch.zeros(rows, length, **long),
                   logps=torch.zeros(rows, length, dtype=torch.float32, device=dev), column=torch.zeros(1, **long),
                   step=torch.zeros(1, **long), eos=torch.zeros(EOS_SLOTS, **long), pad=torch.zeros(1, **long),
                   routing=routing)  # fmt: skip

    def reset(self) -> None:
        """Harmless values (column 0, nothing stopped) for a warm-up or capture run."""
        for t in (self.ids, self.positions, self.column, self.step, self.tokens):
            t.zero_()
        self.keys.zero_()
        self.keys[:, 0] = True
        self.done.zero_()

    def start(self, ids: Tensor, mask: Tensor, eos_ids: Sequence[int], pad_id: int, routing: Tensor | None) -> None:
        """Load left-padded prompts (``ids``, ``mask``: rows x width, on the device): every row continues from its
        last prompt token, written at column ``width - 1`` (the prefill wrote the columns before it)."""
        width = ids.shape[1]
        self.ids.copy_(ids[:, -1])
        self.positions.copy_(mask.sum(-1) - 1)
        self.keys.zero_()
        self.keys[:, :width] = mask.bool()
        self.done.zero_()
        self.column.fill_(width - 1)
        self.step.zero_()
        eos = list(eos_ids)
        if not 0 < len(eos) <= EOS_SLOTS:
            raise ValueError(f"between 1 and {EOS_SLOTS} stop tokens are supported, got {len(eos)}")
        self.eos.copy_(torch.tensor(eos + eos[:1] * (EOS_SLOTS - len(eos))))
        self.pad.fill_(pad_id)
        if routing is not None and self.routing is not None:
            self.routing.copy_(routing)

    def select(self, index: Tensor) -> DecodeState:
        """The rows ``index`` only (new tensors: the eager loop drops rows that stopped)."""
        per_row = {"ids", "positions", "keys", "done", "tokens", "logps", "routing"}
        return DecodeState(**{f.name: (getattr(self, f.name).index_select(0, index)
                                       if f.name in per_row and getattr(self, f.name) is not None
                                       else getattr(self, f.name)) for f in fields(self)})  # fmt: skip


def team_step(decoder: TeamDecoder, cache: KVCache, state: DecodeState, config: GenerationConfig,
              upto: int | None = None, forced: Tensor | None = None) -> None:  # fmt: skip
    """One decode step on the device (see the module docstring); ``upto``: attend to that many columns only;
    ``forced``: this step's tokens, given instead of drawn (rows,)."""
    decoder.use_routing(state.routing)
    state.keys.index_fill_(1, state.column, True)
    logits = decoder.step(cache, state.ids, state.positions, state.keys, state.column, upto)
    tokens, logp = pick(logits, config, forced)
    tokens = torch.where(state.done, state.pad, tokens)
    state.tokens.index_copy_(1, state.step, tokens[:, None])
    state.logps.index_copy_(1, state.step, logp[:, None])
    state.done |= (tokens[:, None] == state.eos[None, :]).any(-1)  # (isin may sort, and sorting may sync)
    state.ids.copy_(tokens)
    state.positions += 1
    state.column += 1
    state.step += 1


def prefill_prompts(decoder: TeamDecoder, cache: KVCache, ids: Tensor, mask: Tensor, adapters: Sequence[str | None],
                    share: bool = True, max_padding: float | None = 1.25) -> None:  # fmt: skip
    """Write the keys and values of every row's prompt but its last token into ``cache`` (rows of ``ids``; see
    the module docstring). ``adapters``: each row's adapter (rows of one prompt and adapter share a prefill)."""
    width = ids.shape[1] - 1
    if width < 1:
        return
    first: dict[tuple, int] = {}
    distinct: list[int] = []  # the first row of each distinct prompt
    of_row: list[int] = []  # row -> its distinct prompt
    for i, (a, row) in enumerate(zip(adapters, ids[:, :-1].tolist())):
        key = (a, *row) if share else (i,)
        if key not in first:
            first[key] = len(distinct)
            distinct.append(i)
        of_row.append(first[key])
    real = mask[:, :-1].sum(-1).tolist()
    lengths = [int(real[r]) for r in distinct]
    order = sorted(range(len(distinct)), key=lambda j: lengths[j])
    buckets = [order] if max_padding is None else length_buckets(order, lengths, max_padding, cap=len(distinct))
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    device = ids.device
    for bucket in buckets:
        w = max(lengths[j] for j in bucket)
        if w == 0:
            continue  # one-token prompts: nothing before their last token
        place = {j: k for k, j in enumerate(bucket)}
        targets = [i for i, j in enumerate(of_row) if j in place]
        sel = [distinct[j] for j in bucket]
        span = slice(width - w, width)
        decoder.use_routing(decoder.route([adapters[r] for r in sel]))
        decoder.prefill(cache, ids[sel, span], positions[sel, span], mask[sel, span].bool(), width - w,
                        torch.tensor(targets, device=device), torch.tensor([place[of_row[i]] for i in targets],
                                                                           device=device))  # fmt: skip
