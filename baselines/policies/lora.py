"""LoRA adapters: one peft adapter per agent on a shared frozen base model, and their names."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from torch import nn

from baselines.policies.loading import eval_mode

if TYPE_CHECKING:
    from baselines.policies.team_config import TeamConfig


def adapter_name(agent: str) -> str:
    """The adapter name of ``agent``: peft stores adapters in ModuleDicts, so names must be valid
    attribute-like keys (``"agent_" + agent`` with non-word characters replaced by ``_``)."""
    return "agent_" + re.sub(r"\W", "_", agent)


def add_lora_adapters(base: nn.Module, config: TeamConfig, names: Sequence[str]) -> nn.Module:
    """Wrap ``base`` with one LoRA adapter per name (peft ``get_peft_model`` then ``add_adapter``),
    every adapter trainable, the base frozen; returned in eval mode."""
    from peft import LoraConfig, get_peft_model

    def lora() -> LoraConfig:
        return LoraConfig(
            r=config.lora_r,
            lora_alpha=config.lora_alpha,
            lora_dropout=config.lora_dropout,
            target_modules=list(config.lora_target_modules),
            bias="none",
            task_type="CAUSAL_LM",
        )

    model = get_peft_model(base, lora(), adapter_name=names[0])
    for name in names[1:]:
        model.add_adapter(name, lora())
    model.set_requires_grad(list(names), requires_grad=True)
    return eval_mode(model)  # (a plain .eval() would switch gradient checkpointing off)
