"""Loading checkpoints: ``from_pretrained`` for models and tokenizers, dtypes, gradient checkpointing.

Used by :class:`baselines.policies.team.Team`; a local folder never touches the network.
"""

from __future__ import annotations

import copy
import os

import torch
from torch import nn
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase

_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
           "float16": torch.float16, "fp16": torch.float16}  # fmt: skip


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of a config name ("float32", "bf16"...)."""
    try:
        return _DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; expected one of {sorted(_DTYPES)}") from None


def load_model(
    path: str, *, dtype: str = "float32", device: str = "cpu", gradient_checkpointing: bool = False
) -> nn.Module:
    """``AutoModelForCausalLM.from_pretrained`` (local directories never touch the network), in eval mode.

    With ``gradient_checkpointing`` the decoder layers (only them, not their dropout-carrying
    submodules) are flagged as training so transformers checkpoints them in forward passes.
    """
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch_dtype(dtype), local_files_only=os.path.isdir(path)
    )
    model = model.to(device).eval()
    if gradient_checkpointing:
        kwargs = {"use_reentrant": False}
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    return eval_mode(model)


def eval_mode(model: nn.Module) -> nn.Module:
    """``model.eval()`` (no dropout) except the layers transformers checkpoints, flagged as training
    (non-recursively: their attention/MLP submodules stay in eval mode) so that it does."""
    model.eval()
    for layer in checkpointed_layers(model):
        layer.training = True
    return model


def checkpointed_layers(model: nn.Module) -> list[nn.Module]:
    """Modules transformers checkpoints when they are in training mode (decoder layers / the decoder)."""
    return [m for m in model.modules() if getattr(m, "gradient_checkpointing", False) is True]


def load_tokenizer(path: str) -> PreTrainedTokenizerBase:
    """``AutoTokenizer.from_pretrained``; a tokenizer without a pad token pads with EOS."""
    tok = AutoTokenizer.from_pretrained(path, local_files_only=os.path.isdir(path))
    if tok.pad_token_id is None:
        if tok.eos_token_id is None:
            raise ValueError(f"tokenizer of {path!r} has neither a pad nor an EOS token")
        tok.pad_token = tok.eos_token
    if not tok.chat_template:
        raise ValueError(f"tokenizer of {path!r} has no chat template")
    return tok


def frozen_copy(model: nn.Module) -> nn.Module:
    """A deep copy in eval mode, without gradients or gradient checkpointing (a KL reference)."""
    ref = copy.deepcopy(model).eval()
    ref.requires_grad_(False)
    for layer in checkpointed_layers(ref):
        layer.gradient_checkpointing = False
    return ref
