"""Restricting a policy's output to a set of words: an action mask for text actions.

Tasks with a small set of meaningful answers (the signal game's candidate words) can have
the policy's next-token distribution restricted to those words and EOS, the text analogue
of PettingZoo's action masks. The mask is a forward hook on the model's output layer, so
sampling and the training forward see exactly the same distribution (the importance ratio
stays exact). Masked logits get a large negative value rather than ``-inf`` so entropies
stay finite.

In a LoRA team the agents share one base model, hence one output layer:
:func:`restrict_vocabulary_by_adapter` gives each adapter its own mask (or none), applied by the
hook according to the adapter active when the model runs. Every forward must then serve one agent:
no batch that mixes adapters (the trainer's backend gets ``mixed_adapters=False``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

MASKED_LOGIT = -1e9


def word_token_ids(tokenizer, words: Iterable[str], eos: bool = True) -> list[int]:
    """Ids of every single-token spelling of ``words`` (``"cat"`` and ``" cat"``) plus EOS (unless ``eos=False``:
    one-word answers, where ending at once is an empty answer rather than a choice)."""
    ids = {tokenizer.eos_token_id} if eos else set()
    for word in words:
        for spelling in (word, " " + word):
            pieces = tokenizer.encode(spelling, add_special_tokens=False)
            if len(pieces) == 1:
                ids.add(pieces[0])
        if not any(len(tokenizer.encode(s, add_special_tokens=False)) == 1 for s in (word, " " + word)):
            raise ValueError(f"{word!r} is not a single token of this tokenizer; it cannot be unmasked")
    return sorted(ids)


def restrict_vocabulary(model: nn.Module, allowed_ids: Iterable[int]) -> RemovableHandle:
    """Mask every output token of ``model`` except ``allowed_ids``; returns the hook handle."""
    head = model.get_output_embeddings()
    bias = _mask_bias(head, allowed_ids)
    placed: dict[tuple, torch.Tensor] = {}

    def add_mask(module: nn.Module, inputs: tuple, output: torch.Tensor) -> torch.Tensor:
        return output + _placed(placed, None, bias, output)

    return head.register_forward_hook(add_mask)


def restrict_vocabulary_by_adapter(
    peft_model: nn.Module, allowed_ids: Mapping[str, Iterable[int] | None]
) -> RemovableHandle:
    """Mask ``peft_model``'s outputs to ``allowed_ids[adapter]`` of the active adapter (None or an adapter
    not named: no mask). A forward with several active adapters is an error."""
    head = peft_model.get_output_embeddings()
    biases = {name: None if ids is None else _mask_bias(head, ids) for name, ids in allowed_ids.items()}
    placed: dict[tuple, torch.Tensor] = {}

    def add_mask(module: nn.Module, inputs: tuple, output: torch.Tensor) -> torch.Tensor:
        active = peft_model.active_adapter
        if not isinstance(active, str):
            raise RuntimeError(f"per-adapter vocabulary masks need one active adapter, got {active!r}")
        bias = biases.get(active)
        return output if bias is None else output + _placed(placed, active, bias, output)

    return head.register_forward_hook(add_mask)


def _placed(placed: dict[tuple, torch.Tensor], name: str | None, bias: torch.Tensor,
            output: torch.Tensor) -> torch.Tensor:
    """``bias`` on ``output``'s device and dtype, copied there once per (name, device, dtype) and kept in
    ``placed``: a host-to-device copy, never inside a CUDA graph capture (the warm-ups run first)."""
    key = (name, output.device, output.dtype)
    if key not in placed:
        placed[key] = bias.to(device=output.device, dtype=output.dtype)
    return placed[key]


def _mask_bias(head: nn.Module, allowed_ids: Iterable[int]) -> torch.Tensor:
    """0 at ``allowed_ids``, :data:`MASKED_LOGIT` elsewhere, over ``head``'s outputs."""
    allowed = torch.tensor(sorted(set(allowed_ids)), dtype=torch.long)
    if allowed.numel() == 0:
        raise ValueError("restrict_vocabulary needs at least one allowed token")
    bias = torch.full((head.weight.shape[0],), MASKED_LOGIT)
    bias[allowed] = 0.0
    return bias
