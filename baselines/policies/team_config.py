"""What a team is made of: :class:`TeamConfig` (how to build it) and :class:`PolicyKey` (which weights
serve an agent). Plain dataclasses: :mod:`baselines.policies.team` builds and runs the team."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Mode = Literal["shared", "lora", "separate"]
DEFAULT_LORA_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass
class TeamConfig:
    """How the team is built.

    Args:
        mode: "shared", "lora" or "separate" (see :mod:`baselines.policies.team`).
        model: checkpoint (local path, hub id, or a preset of :mod:`baselines.models` such as
            ``"smollm2-135m-instruct"``) of the shared model / LoRA base; in "separate"
            mode the fallback for agents missing from ``models``.
        models: agent -> checkpoint, for "separate" mode.
        shared_adapter: "lora" mode with ONE adapter that plays every agent (the single-model
            baseline, ``model.sharing: single_model``): one set of trained weights for the team.
        lora_r, lora_alpha, lora_dropout, lora_target_modules: LoRA settings ("lora" mode).
        dtype: "float32", "bfloat16" or "float16".
        device: torch device string.
        devices: agent -> torch device, for "separate" mode (each agent's model on its own device;
            agents not named use ``device``).
        reference: keep a frozen reference policy for KL (a frozen copy of each model; in LoRA
            mode the base model with the adapter disabled, which costs nothing).
        gradient_checkpointing: recompute decoder-layer activations in the backward pass of
            :meth:`Team.sequence_logprobs` (less memory, ~30% more compute); generation is
            unaffected (it runs with the KV cache, see :meth:`Team.generating`).
    """

    mode: Mode = "shared"
    model: str | None = None
    models: dict[str, str] = field(default_factory=dict)
    shared_adapter: bool = False
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    lora_target_modules: tuple[str, ...] = DEFAULT_LORA_TARGETS
    dtype: str = "float32"
    device: str = "cpu"
    devices: dict[str, str] = field(default_factory=dict)
    reference: bool = False
    gradient_checkpointing: bool = False

    def device_of(self, agent: str) -> str:
        """The device ``agent``'s model lives on."""
        return self.devices.get(agent, self.device)


@dataclass(frozen=True)
class PolicyKey:
    """Identifies the weights that serve an agent: a model slot and, in LoRA mode, an adapter."""

    model: str
    adapter: str | None = None

    def __str__(self) -> str:
        return self.model if self.adapter is None else f"{self.model}+{self.adapter}"
