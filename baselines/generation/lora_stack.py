"""Every agent's LoRA adapter in one batch: the base matmul shared by all rows, each row's own low-rank delta.

To decode a whole LoRA team in one forward, the projections of a decoder layer that read the same
input (q/k/v; gate/up) are computed as ONE :class:`FusedLinear`: their base weights side by side,
and every adapter of every one of them stacked (the multi-LoRA scheme of S-LoRA / Punica, written
as two dense matmuls instead of a gather)::

    y = W_all x  +  B_all ((A_all x) * s_row)     W_all: the modules' weights, stacked by output
                                                  A_all: (modules x adapters x rank) x in, every A stacked
                                                  B_all: out x (modules x adapters x rank), block-diagonal
                                                  s_row: the row's adapter scaling on its own rank blocks

so a row sees exactly ``W x + scaling * B_a A_a x`` of its adapter ``a`` in every module. The delta is
never rounded into ``W`` (merging ``W + s B A`` in bf16 drops every element below half an ulp of
``W``; here the delta is computed on its own in the adapters' dtype -- float32 under a bf16 base, as
peft keeps them -- and added to the base output, as peft itself does), so the smallest update
reaches the sampler. The
row -> adapter routing (:class:`RowRouting`) is a (rows x ranks) tensor, an input of the step like
the token ids, so one captured CUDA graph serves any mix of agents.

:meth:`FusedLinear.refresh` copies the modules' current weights into the stacks in place (the
adapters' every call -- a few MB --, the base weights when they changed), so addresses stay fixed
and nothing is stale whatever changed the weights.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

#: the most modules one :class:`FusedLinear` stacks (q/k/v); the routing repeats each row's scales this often
MAX_FUSED = 3


def lora_layers(model: nn.Module) -> dict[str, nn.Module]:
    """Every peft LoRA layer of ``model`` by module name (empty for a plain model)."""
    try:
        from peft.tuners.lora import LoraLayer
    except ImportError:  # peft is optional for plain models
        return {}
    return {n: m for n, m in model.named_modules() if isinstance(m, LoraLayer)}


def stackable(model: nn.Module) -> bool:
    """Whether every LoRA layer of ``model`` is a plain LoRA ``Linear`` (no DoRA or other variant, no LoRA
    bias, no embedding or convolution LoRA): the layers :class:`FusedLinear` computes exactly."""
    from peft.tuners.lora import Linear as LoraLinear

    layers = lora_layers(model)
    return bool(layers) and all(
        type(m) is LoraLinear
        and not getattr(m, "lora_variant", {})
        and not any(getattr(m, "use_dora", {}).values())
        and not any(getattr(m, "lora_bias", {}).values())
        and not getattr(m, "fan_in_fan_out", False)
        for m in layers.values()
    )


class RowRouting:
    """Which adapter each row uses: a (rows x ``MAX_FUSED`` * sum of ranks) scale tensor -- the adapter's scaling
    on its own rank block, 0 elsewhere, repeated once per fused module. ``scales`` is set per call (eager) or is
    a captured graph's own buffer (see :class:`~baselines.generation.decode_state.DecodeState`)."""

    def __init__(self, adapters: Sequence[str], ranks: Sequence[int], scalings: Sequence[float], dtype, device):
        self.adapters = list(adapters)
        self.ranks = list(ranks)
        self.index = {a: k for k, a in enumerate(self.adapters)}
        one = torch.zeros(len(adapters), sum(ranks), dtype=dtype, device=device)
        start = 0
        for k, (r, s) in enumerate(zip(ranks, scalings)):
            one[k, start : start + r] = s
            start += r
        self.table = one.repeat(1, MAX_FUSED)
        self.scales = self.table[:1]

    def rows(self, adapters: Sequence[str | None]) -> Tensor:
        """The scale rows of ``adapters`` (one name per row; None: the base model, no delta)."""
        known = [self.index.get(a, -1) if a is not None else -1 for a in adapters]
        for a, k in zip(adapters, known):
            if a is not None and k < 0:
                raise KeyError(f"unknown adapter {a!r}; adapters: {self.adapters}")
        index = torch.tensor(known, device=self.table.device)
        return torch.where((index >= 0)[:, None], self.table[index.clamp(min=0)], torch.zeros_like(self.table[:1]))

    def use(self, scales: Tensor) -> None:
        """Route the next forwards with ``scales`` (rows x table width)."""
        self.scales = scales


class FusedLinear:
    """Linear modules that read the same input, computed as one (see the module docstring); ``__call__`` returns
    their outputs side by side (split them by :attr:`splits`)."""

    def __init__(self, modules: Sequence[nn.Module], routing: RowRouting | None):
        if len(modules) > MAX_FUSED:
            raise ValueError(f"at most {MAX_FUSED} modules fuse, got {len(modules)}")
        self.modules = list(modules)
        adapted = [hasattr(m, "get_base_layer") for m in modules]
        self.bases = [m.get_base_layer() if a else m for m, a in zip(modules, adapted)]
        self.splits = [b.out_features for b in self.bases]
        first = self.bases[0].weight
        biased = [b.bias is not None for b in self.bases]
        if len(modules) == 1:  # the module's own tensors: nothing to copy
            self.weight, self.bias = first, self.bases[0].bias
            self._base_sources: list[tuple[Tensor, Tensor]] = []
        else:
            self.weight = torch.zeros(sum(self.splits), first.shape[1], dtype=first.dtype, device=first.device)
            self.bias = torch.zeros(sum(self.splits), dtype=first.dtype, device=first.device) if any(biased) else None
            self._base_sources = self._placed([b.weight for b in self.bases], self.weight)
            if self.bias is not None:
                self._base_sources += [(dst, b.bias) for dst, b in zip(self.bias.split(self.splits), self.bases)
                                       if b.bias is not None]  # fmt: skip
        self._seen: list | None = None
        self.routing = routing if any(adapted) else None
        self.a = self.b = None
        self._lora_sources: list[tuple[Tensor, Tensor]] = []
        if self.routing is not None:
            self._stack_adapters(modules, adapted, first)
        self.refresh()

    @staticmethod
    def _placed(sources: list[Tensor], into: Tensor) -> list[tuple[Tensor, Tensor]]:
        pairs, start = [], 0
        for s in sources:
            pairs.append((into[start : start + s.shape[0]], s))
            start += s.shape[0]
        return pairs

    def _stack_adapters(self, modules, adapted, first: Tensor) -> None:
        """A: every module's adapters' A, module by module; B: block-diagonal (module rows x module's rank block)."""
        assert self.routing is not None
        names = self.routing.adapters
        width = self.routing.table.shape[1] // MAX_FUSED  # sum of ranks of one module
        dtype = self.routing.table.dtype  # the adapters' own (peft keeps them in float32 under a bf16 base)
        self.a = torch.zeros(width * len(modules), first.shape[1], dtype=dtype, device=first.device)
        self.b = torch.zeros(sum(self.splits), width * len(modules), dtype=dtype, device=first.device)
        row = 0
        for j, (m, is_lora, out) in enumerate(zip(modules, adapted, self.splits)):
            col = j * width
            for name, rank in zip(names, self.routing.ranks):
                if is_lora:  # (a module without adapters keeps zero blocks: no delta)
                    self._lora_sources.append((self.a[col : col + rank], m.lora_A[name].weight))
                    self._lora_sources.append((self.b[row : row + out, col : col + rank], m.lora_B[name].weight))
                col += rank
            row += out

    def refresh(self) -> None:
        """Copy the adapters' current weights into the stacks, and the base weights where they changed."""
        with torch.no_grad():
            pairs = list(self._lora_sources)
            seen = [(s.data_ptr(), s._version) for _, s in self._base_sources]
            if seen != self._seen:
                pairs += self._base_sources
                self._seen = seen
            if pairs:
                torch._foreach_copy_([d for d, _ in pairs], [s for _, s in pairs])

    def __call__(self, x: Tensor) -> Tensor:
        lead = x.shape[:-1]
        flat = x.reshape(-1, x.shape[-1])
        y = F.linear(flat, self.weight, self.bias)
        if self.a is not None:  # in the adapters' dtype, added to the base output there, then cast back (as peft)
            scales = self.routing.scales[:, : self.a.shape[0]]
            if scales.shape[0] != flat.shape[0]:  # a prompt's tokens: each row's scales once per token
                scales = scales.repeat_interleave(flat.shape[0] // scales.shape[0], dim=0)
            low = torch.matmul(flat.to(self.a.dtype), self.a.t()) * scales
            y = torch.addmm(y.to(self.a.dtype), low, self.b.t()).to(y.dtype)
        return y.view(*lead, y.shape[-1])


def team_routing(model: nn.Module) -> RowRouting | None:
    """The routing of ``model``'s adapters (sorted by name; in their dtype), or None for a model without LoRA."""
    layers = lora_layers(model)
    if not layers:
        return None
    if not stackable(model):
        raise ValueError("only plain LoRA Linear adapters can be stacked")
    first = next(iter(layers.values()))
    adapters = sorted(first.lora_A.keys())
    ranks = [first.lora_A[a].weight.shape[0] for a in adapters]
    scalings = [float(first.scaling[a]) for a in adapters]
    for name, layer in layers.items():
        if sorted(layer.lora_A.keys()) != adapters or [layer.lora_A[a].weight.shape[0] for a in adapters] != ranks \
                or [float(layer.scaling[a]) for a in adapters] != scalings:  # fmt: skip
            raise ValueError(f"LoRA layer {name} differs in adapters, ranks or scaling from the others")
    weight = first.lora_A[adapters[0]].weight
    return RowRouting(adapters, ranks, scalings, weight.dtype, weight.device)
