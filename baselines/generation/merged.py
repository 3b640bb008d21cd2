"""Per-adapter sampling models: a LoRA team's adapters merged into plain weights for decoding.

In a LoRA team every agent's adapter sits on one frozen base model. Decoding through peft costs two
extra small matmuls per adapted layer per step, and a batch that mixes adapters is split into
per-adapter sub-batches inside every LoRA layer (many small kernels per step). For sampling,
:class:`MergedAdapters` gives each adapter its own plain model instead: the decoder's module tree is
copied shallowly, each LoRA-wrapped ``Linear`` replaced by a plain ``Linear`` holding
``W + scaling * B @ A`` (computed in float32), and every module without an adapter inside
(embeddings, output layer with its hooks, norms, MLPs not adapted) shared with the training model --
so an agent costs only the memory of its adapted layers' weights.

The merged weights are refreshed before a call whenever an adapter or base weight changed: every
tensor's in-place version counter (bumped by optimizer steps, ``load_state_dict``, ``copy_``) is
compared to the one seen at the last merge, and :meth:`MergedAdapters.invalidate` (called by the
backend's ``sync_weights``) forces a refresh for writes that bypass it (``.data`` assignments). The
refresh writes in place, so tensors keep their addresses (a captured CUDA graph stays valid).
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.nn.utils import skip_init


def _lora_layers(model: nn.Module) -> dict[str, nn.Module]:
    from peft.tuners.lora import LoraLayer

    return {n: m for n, m in model.named_modules() if isinstance(m, LoraLayer)}


def mergeable(peft_model: nn.Module) -> bool:
    """Whether every LoRA layer of ``peft_model`` is a plain LoRA ``Linear`` (no DoRA, no embedding/conv LoRA)."""
    from peft.tuners.lora import Linear as LoraLinear

    layers = _lora_layers(peft_model)
    return bool(layers) and all(
        type(m) is LoraLinear and not any(getattr(m, "use_dora", {}).values()) for m in layers.values()
    )


class _Merged:
    """One adapter's sampling model and the (plain linear, LoRA layer) pairs whose weights it merges."""

    def __init__(self, base: nn.Module, adapter: str):
        self.adapter = adapter
        layers = _lora_layers(base)
        lora_ids = {id(m) for m in layers.values()}
        holders = {id(base)}  # modules with a LoRA layer somewhere below them: copied, not shared
        for name in layers:
            parts = name.split(".")
            for k in range(1, len(parts)):
                holders.add(id(base.get_submodule(".".join(parts[:k]))))
        self.pairs: list[tuple[nn.Linear, nn.Module]] = []

        def clone(module: nn.Module) -> nn.Module:
            if id(module) in lora_ids:
                inner = module.get_base_layer()
                lin = skip_init(nn.Linear, inner.in_features, inner.out_features, bias=inner.bias is not None,
                                device=inner.weight.device, dtype=inner.weight.dtype)  # no RNG draw  # fmt: skip
                lin.weight.requires_grad_(False)
                if inner.bias is not None:
                    lin.bias = inner.bias  # shared: LoRA does not change the bias
                lin._forward_hooks = module._forward_hooks  # e.g. a vocabulary mask on an adapted output layer
                lin._forward_pre_hooks = module._forward_pre_hooks
                self.pairs.append((lin, module))
                return lin.eval()
            if id(module) not in holders:
                return module  # shared with the training model (hooks included)
            twin = copy.copy(module)
            twin._parameters = dict(module._parameters)
            twin._buffers = dict(module._buffers)
            twin._modules = {k: (clone(v) if v is not None else None) for k, v in module._modules.items()}
            twin.training = False  # no dropout, no gradient checkpointing while sampling
            return twin

        self.model = clone(base)
        self._seen: tuple[int, ...] | None = None

    def _versions(self) -> tuple[int, ...]:
        out = []
        for _, layer in self.pairs:
            out += [layer.get_base_layer().weight._version, layer.lora_A[self.adapter].weight._version,
                    layer.lora_B[self.adapter].weight._version]  # fmt: skip
        return tuple(out)

    def refresh(self, force: bool = False) -> bool:
        """Re-merge when a weight changed since the last merge (or ``force``); True when it merged."""
        versions = self._versions()
        if not force and versions == self._seen:
            return False
        with torch.no_grad():
            for lin, layer in self.pairs:
                w = layer.get_base_layer().weight
                delta = layer.get_delta_weight(self.adapter)
                lin.weight.copy_((w.float() + delta.float()).to(w.dtype))
        self._seen = versions
        return True


class MergedAdapters:
    """Plain sampling models, one per adapter of a peft model, merged lazily and kept fresh."""

    def __init__(self, peft_model: nn.Module):
        if not mergeable(peft_model):
            raise ValueError("only plain LoRA Linear adapters can be merged for sampling")
        self.peft_model = peft_model
        self._merged: dict[str, _Merged] = {}
        self._stale: set[str] = set()
        self.merges = 0  #: how many (re-)merges ran: the refresh is visible to tests and benchmarks

    def model(self, adapter: str) -> nn.Module:
        """``adapter``'s sampling model, its weights equal to the current base + adapter."""
        if adapter not in self.peft_model.peft_config:
            raise KeyError(f"unknown adapter {adapter!r}")
        merged = self._merged.get(adapter)
        if merged is None:
            merged = self._merged[adapter] = _Merged(self.peft_model.get_base_model(), adapter)
        if merged.refresh(force=adapter in self._stale):
            self.merges += 1
        self._stale.discard(adapter)
        return merged.model

    def invalidate(self) -> None:
        """Force a re-merge of every adapter before its next use."""
        self._stale = set(self._merged)
