"""Every agent's LoRA adapter in one batch: the base matmul shared by all rows, each row's own low-rank delta.

A LoRA team's adapters sit on one frozen base model. To decode the whole team in one forward, each
adapted ``Linear`` of the sampling step computes (the multi-LoRA scheme of S-LoRA / Punica, written
as two dense matmuls instead of a gather)::

    y = W x  +  B_all ((A_all x) * s_row)        A_all: (sum of ranks) x in, every adapter's A stacked
                                                 B_all: out x (sum of ranks), every adapter's B side by side
                                                 s_row: the row's adapter scaling on its own rank block, 0 elsewhere

so a row sees exactly ``W x + scaling * B_a A_a x`` of its adapter ``a``: the delta is never rounded
into ``W`` (merging ``W + s B A`` in bf16 drops every element below half an ulp of ``W``; here the
delta is computed in the adapter's own dtype and added to the base output as peft itself does, so
the smallest update reaches the sampler). The row -> adapter routing is a (rows x sum of ranks)
tensor, an input of the step like the token ids, so one captured CUDA graph serves any mix of agents.

:class:`StackedLoRA` holds the stacked copies for every adapted layer of a peft model, with fixed
addresses; :meth:`StackedLoRA.refresh` copies the adapters' current weights into them (a few MB,
done at the start of every generate call: never stale, whatever changed the weights).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn


def lora_layers(model: nn.Module) -> dict[str, nn.Module]:
    """Every peft LoRA layer of ``model`` by module name (empty for a plain model)."""
    try:
        from peft.tuners.lora import LoraLayer
    except ImportError:  # peft is optional for plain models
        return {}
    return {n: m for n, m in model.named_modules() if isinstance(m, LoraLayer)}


def stackable(model: nn.Module) -> bool:
    """Whether every LoRA layer of ``model`` is a plain LoRA ``Linear`` (no DoRA or other variant, no LoRA
    bias, no embedding or convolution LoRA): the layers :class:`StackedLoRA` computes exactly."""
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


class StackedLinear:
    """One adapted layer for the team's rows: the base ``Linear`` plus every adapter's delta (see the module docstring)."""

    def __init__(self, layer: nn.Module, adapters: Sequence[str], routing: RowRouting):
        self.layer = layer
        self.base = layer.get_base_layer()
        self.adapters = list(adapters)
        self.routing = routing
        first = layer.lora_A[adapters[0]].weight
        ranks = [layer.lora_A[a].weight.shape[0] for a in adapters]
        self.a = torch.zeros(sum(ranks), first.shape[1], dtype=first.dtype, device=first.device)
        self.b = torch.zeros(layer.lora_B[adapters[0]].weight.shape[0], sum(ranks), dtype=first.dtype,
                             device=first.device)  # fmt: skip

    def sources(self) -> tuple[list[Tensor], list[Tensor]]:
        """(destinations, sources): the stacks' blocks and the adapters' weights copied into them."""
        src = [self.layer.lora_A[a].weight for a in self.adapters] + [self.layer.lora_B[a].weight for a in self.adapters]
        dst, start = [], 0
        for a in self.adapters:
            r = self.layer.lora_A[a].weight.shape[0]
            dst.append(self.a[start : start + r])
            start += r
        start = 0
        for a in self.adapters:
            r = self.layer.lora_B[a].weight.shape[1]
            dst.append(self.b[:, start : start + r])
            start += r
        return dst, src

    def __call__(self, x: Tensor) -> Tensor:
        result = self.base(x)
        low = torch.matmul(x.to(self.a.dtype), self.a.t()) * self.routing.scales.unsqueeze(-2)
        return (result + torch.matmul(low, self.b.t())).to(result.dtype)


class RowRouting:
    """Which adapter each row of the batch uses: a (rows x sum of ranks) scale tensor, ``scaling`` on the row's
    adapter's rank block and 0 elsewhere. ``scales`` is replaced per call (eager) or copied into a captured
    graph's own buffer (see :meth:`fill`)."""

    def __init__(self, adapters: Sequence[str], ranks: Sequence[int], scalings: Sequence[float], dtype, device):
        self.adapters = list(adapters)
        self.index = {a: k for k, a in enumerate(self.adapters)}
        self.table = torch.zeros(len(adapters), sum(ranks), dtype=dtype, device=device)
        start = 0
        for k, (r, s) in enumerate(zip(ranks, scalings)):
            self.table[k, start : start + r] = s
            start += r
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
        """Route the next forwards with ``scales`` (rows x sum of ranks)."""
        self.scales = scales


class StackedLoRA:
    """Every adapted layer of a peft model, stacked over all its adapters, and the routing they share."""

    def __init__(self, peft_model: nn.Module):
        if not stackable(peft_model):
            raise ValueError("only plain LoRA Linear adapters can be stacked")
        self.peft_model = peft_model
        layers = lora_layers(peft_model)
        first = next(iter(layers.values()))
        self.adapters = sorted(first.lora_A.keys())
        ranks = [first.lora_A[a].weight.shape[0] for a in self.adapters]
        scalings = [float(first.scaling[a]) for a in self.adapters]
        for name, layer in layers.items():
            if sorted(layer.lora_A.keys()) != self.adapters or [float(layer.scaling[a]) for a in self.adapters] != scalings:
                raise ValueError(f"LoRA layer {name} differs in adapters or scaling from the others")
        weight = first.lora_A[self.adapters[0]].weight
        self.routing = RowRouting(self.adapters, ranks, scalings, weight.dtype, weight.device)
        self.layers = {id(m): StackedLinear(m, self.adapters, self.routing) for m in layers.values()}
        self.refresh()

    def linear(self, module: nn.Module):
        """The callable that computes ``module`` for the team's rows (the module itself when not adapted)."""
        return self.layers.get(id(module), module)

    def refresh(self) -> None:
        """Copy every adapter's current weights into the stacks (in place: addresses stay)."""
        dst, src = [], []
        for layer in self.layers.values():
            d, s = layer.sources()
            dst += d
            src += s
        with torch.no_grad():
            torch._foreach_copy_(dst, src)  # one fused launch per dtype/device group, not one per tensor
