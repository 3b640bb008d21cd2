"""CUDA graphs of the team decode step: captured once per shape and sampling setting, replayed every step.

A decode step of a small model is hundreds of tiny kernels; launched one by one from Python, the GPU
waits on the host. :class:`DecodeGraphs` keeps, per (decoder, rows, cache length), a **slot**: a KV
cache and a :class:`~baselines.generation.decode_state.DecodeState` at fixed addresses. For each
slot it captures :func:`~baselines.generation.decode_state.team_step` -- the forward of the whole
team, the sampling, the stop flags, the next position and column, the output record -- as one
``torch.cuda.CUDAGraph``, and a decode replays it once per token.

A graph is keyed by everything that decides what it computes: the slot (decoder, rows, length), the
sampling settings (greedy, temperature, top-k, top-p), the addresses of every weight the step reads
(a weight replaced rather than updated in place gets a new capture; in-place updates -- optimizer
steps, ``load_state_dict``, the stacked adapters' refresh -- are seen by the replay as they are) and
the output layer's hooks (a vocabulary mask added later) and the active adapter (a mask may
depend on it). All graphs share one memory pool (they
never run at once, and none has outputs outside its slot). Rows are padded to :func:`row_bucket`
and lengths to :func:`length_bucket`, so a training run captures a handful of graphs.

The counts are kept (:meth:`DecodeGraphs.summary`): captures, replays, and why graphs are off
when a capture failed -- then every later call decodes the same step eagerly, and says so.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Any

import torch

from baselines.generation.decode_state import DecodeState, team_step
from baselines.generation.team_decoder import KVCache, TeamDecoder
from baselines.generation.types import GenerationConfig


def row_bucket(rows: int) -> int:
    """Rows padded to a power of two (at least 8) up to 256, then to a multiple of 128."""
    if rows > 256:
        return -(-rows // 128) * 128
    return max(8, 1 << (rows - 1).bit_length())


def length_bucket(length: int) -> int:
    """Cache columns padded to a multiple of 256."""
    return -(-length // 256) * 256


def sampling_key(config: GenerationConfig) -> tuple:
    return ("greedy",) if config.greedy else (config.temperature, config.top_k, config.top_p)


class Slot:
    """A cache and a decode state for ``rows`` x ``length``, and the graphs captured on them."""

    def __init__(self, decoder: TeamDecoder, rows: int, length: int):
        self.decoder = decoder
        self.cache: KVCache = decoder.new_cache(rows, length)
        self.state = DecodeState.allocate(decoder, rows, length)
        self.graphs: dict[tuple, Any] = {}


class DecodeGraphs:
    """Slots and their captured steps (see the module docstring); ``capture=False`` keeps the slots and runs
    the step eagerly (the CPU check of the bookkeeping)."""

    def __init__(self, max_slots: int = 4, capture: bool = True):
        self.max_slots = max_slots
        self.capture = capture
        self._slots: OrderedDict[tuple[int, int, int], Slot] = OrderedDict()
        self._pool = None
        self.captures = 0
        self.replays = 0
        self.failure: str | None = None  #: why capturing failed (graphs are then off for this object)

    def slot(self, decoder: TeamDecoder, rows: int, length: int) -> Slot:
        """The slot for this shape (allocated now if new; the least recently used dropped beyond ``max_slots``)."""
        key = (id(decoder), rows, length)
        slot = self._slots.get(key)
        if slot is None or slot.decoder is not decoder:
            while len(self._slots) >= self.max_slots:
                self._slots.popitem(last=False)
            slot = self._slots[key] = Slot(decoder, rows, length)
        self._slots.move_to_end(key)
        return slot

    def _key(self, slot: Slot, config: GenerationConfig) -> tuple:
        weights = tuple(t.data_ptr() for t in slot.decoder.weights())
        hooks = tuple(id(h) for h in slot.decoder.head._forward_hooks.values())
        active = str(getattr(slot.decoder.model, "active_adapter", None))  # a hook may mask by the active adapter
        return (sampling_key(config), weights, hooks, active)

    def graph(self, slot: Slot, config: GenerationConfig) -> Any | None:
        """The captured step of ``slot`` for ``config`` (captured now if new); None when graphs are off.
        Capturing resets the slot's state: call before loading the prompts."""
        if not self.capture or self.failure is not None:
            return None
        key = self._key(slot, config)
        graph = slot.graphs.get(key)
        if graph is None:
            if any(k[1] != key[1] for k in slot.graphs):
                slot.graphs.clear()  # weights moved: every graph of the slot reads stale addresses
            try:
                graph = slot.graphs[key] = self._capture(slot, config)
            except Exception as err:  # noqa: BLE001 -- any capture failure: decode eagerly, say why, keep going
                self.failure = f"{type(err).__name__}: {err}"
                warnings.warn(f"CUDA graph capture failed, decoding without graphs: {self.failure}", stacklevel=2)
                return None
            self.captures += 1
        return graph

    def _capture(self, slot: Slot, config: GenerationConfig) -> Any:
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        slot.state.reset()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.no_grad():
            for _ in range(2):  # kernels chosen, workspaces allocated outside the capture
                team_step(slot.decoder, slot.cache, slot.state, config)
        torch.cuda.current_stream().wait_stream(stream)
        slot.state.reset()
        graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(graph, pool=self._pool):
            team_step(slot.decoder, slot.cache, slot.state, config)
        slot.state.reset()
        return graph

    def run(self, slot: Slot, graph: Any | None, config: GenerationConfig) -> None:
        """One step of ``slot``: a replay of ``graph``, or the step run eagerly when there is none."""
        if graph is None:
            team_step(slot.decoder, slot.cache, slot.state, config)
        else:
            graph.replay()
            self.replays += 1

    def summary(self) -> dict[str, Any]:
        """What the graphs did: ``{"mode": "on" | "off: <why>", "captures", "replays", "slots"}``; "on" only
        when at least one graph was captured and replayed."""
        if not self.capture:
            mode = "off: capture disabled"
        elif self.failure is not None:
            mode = f"off: {self.failure}"
        elif self.captures == 0 or self.replays == 0:
            mode = "off: nothing captured"
        else:
            mode = "on"
        return {"mode": mode, "captures": self.captures, "replays": self.replays, "slots": len(self._slots)}
