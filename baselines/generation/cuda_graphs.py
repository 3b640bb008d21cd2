"""CUDA-graph capture of the static-cache decode step (CUDA only).

A decode step of a small model is hundreds of tiny kernels; launched one by one from Python the GPU
waits on the host. :class:`GraphRunner` captures one step -- the model forward of one token per row
onto a ``StaticCache``, the last position's logits in float32 -- as a ``torch.cuda.CUDAGraph`` and
replays it: the inputs (token ids, positions, the 4-D attention mask) are copied into static
buffers, the cache is written in place at its own device-side position counter, and the logits come
out of a static buffer. Sampling stays outside the graph (it draws from the process's CUDA RNG).

:class:`DecodeGraphs` keeps one runner (and its cache) per (model, rows, cache length), the few
shapes the static path produces (rows padded to a multiple of 8, length to a multiple of 128), at
most ``max_graphs`` of them (least recently used dropped). A runner holds the model it was captured
for, so it stays valid as long as that model's weights are updated in place (see
:class:`~baselines.generation.merged.MergedAdapters`).
"""

from __future__ import annotations

import warnings
from collections import OrderedDict

import torch
from torch import nn

from baselines.generation.fast_decode import allocated_static_cache, mask_dtype
from baselines.generation.prefill import CACHE_KW


class GraphRunner:
    """One captured decode step for ``rows`` rows and a static cache of ``length`` columns."""

    def __init__(self, model: nn.Module, rows: int, length: int, warmup: int = 2, capture: bool = True):
        self.model = model
        device = model.get_output_embeddings().weight.device
        if capture and device.type != "cuda":
            raise RuntimeError("CUDA graphs need a model on a CUDA device")
        self.cache = allocated_static_cache(model, rows, length, device)
        self.ids = torch.zeros(rows, 1, dtype=torch.long, device=device)
        self.positions = torch.zeros(rows, 1, dtype=torch.long, device=device)
        self.mask = torch.zeros(rows, 1, 1, length, dtype=mask_dtype(model), device=device)
        if self.mask.dtype == torch.bool:
            self.mask[..., 0] = True
        self.logits: torch.Tensor | None = None
        self.graph: torch.cuda.CUDAGraph | None = None
        if capture:
            self._capture(warmup)

    def _capture(self, warmup: int) -> None:
        saved = [layer.cumulative_length.clone() for layer in self.cache.layers]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.no_grad():
            for _ in range(warmup):  # kernels picked, workspaces allocated outside the capture
                self._forward()
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(self.graph):
            self.logits = self._forward()
        for layer, n in zip(self.cache.layers, saved):
            layer.cumulative_length.copy_(n)

    def _forward(self) -> torch.Tensor:
        out = self.model(input_ids=self.ids, attention_mask=self.mask, position_ids=self.positions,
                         use_cache=True, logits_to_keep=1, **{CACHE_KW: self.cache})  # fmt: skip
        return out.logits[:, -1, :].float()

    def step(self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The logits of one decode step (a view of the graph's output buffer: use before the next step)."""
        self.ids.copy_(ids)
        self.positions.copy_(positions)
        self.mask.copy_(mask)
        if self.graph is None:  # capture=False: the same static-buffer step, run eagerly
            self.logits = self._forward()
        else:
            self.graph.replay()
        assert self.logits is not None
        return self.logits


class DecodeGraphs:
    """Captured decode steps per (model, rows, length), least recently used dropped beyond ``max_graphs``."""

    def __init__(self, max_graphs: int = 4, capture: bool = True):
        self.max_graphs = max_graphs
        self.capture = capture  #: False: runners run their static-buffer step eagerly (the CPU check of them)
        self._runners: OrderedDict[tuple[int, int, int], GraphRunner] = OrderedDict()
        self.captures = 0
        self.failure: str | None = None  #: why capturing failed (then every call decodes without graphs)

    def runner(self, model: nn.Module, rows: int, length: int) -> GraphRunner | None:
        """The captured step for this shape (captured now if new); None once a capture has failed."""
        if self.failure is not None:
            return None
        key = (id(model), rows, length)
        runner = self._runners.get(key)
        if runner is None or runner.model is not model:
            while len(self._runners) >= self.max_graphs:
                self._runners.popitem(last=False)
            try:
                runner = GraphRunner(model, rows, length, capture=self.capture)
            except Exception as err:  # noqa: BLE001 -- any capture failure: fall back, say why, keep going
                self.failure = f"{type(err).__name__}: {err}"
                warnings.warn(f"CUDA graph capture failed, decoding without graphs: {self.failure}", stacklevel=2)
                return None
            self._runners[key] = runner
            self.captures += 1
        self._runners.move_to_end(key)
        return runner
