"""Building a team's parts from a :class:`TeamConfig`: load each checkpoint and tokenizer, add the
LoRA adapters, make the frozen KL references, and map every agent to its :class:`PolicyKey`.

:meth:`baselines.policies.team.Team.from_config` assembles a team from what :func:`build_team_parts`
returns; this module holds only the loading and the checks of the config against the agents."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from torch import nn
from transformers import PreTrainedTokenizerBase

from baselines.models.presets import resolve_model
from baselines.policies.loading import frozen_copy, load_model, load_tokenizer
from baselines.policies.lora import adapter_name, add_lora_adapters
from baselines.policies.team_config import PolicyKey, TeamConfig

#: the adapter of a single-model team (``TeamConfig.shared_adapter``): every agent's policy
SHARED_ADAPTER = "team"


@dataclass
class TeamParts:
    """What a team holds: model slot -> model / tokenizer / frozen reference, agent -> policy key."""

    models: dict[str, nn.Module] = field(default_factory=dict)
    tokenizers: dict[str, PreTrainedTokenizerBase] = field(default_factory=dict)
    keys: dict[str, PolicyKey] = field(default_factory=dict)
    references: dict[str, nn.Module] = field(default_factory=dict)


def build_team_parts(config: TeamConfig, agents: Sequence[str]) -> TeamParts:
    """Load the checkpoints named by ``config`` for ``agents`` (see the modes of :mod:`baselines.policies.team`)."""
    agents = list(agents)
    if not agents or len(set(agents)) != len(agents):
        raise ValueError(f"agents must be a non-empty list of distinct names, got {agents}")
    unknown = sorted(set(config.devices) - set(agents))
    if unknown:
        raise ValueError(f"TeamConfig.devices names unknown agents {unknown}; agents: {agents}")
    if config.devices and config.mode != "separate":
        raise ValueError(f"per-agent devices need one model per agent (mode 'separate'), not {config.mode!r}: "
                         "one shared model lives on one device")
    if config.shared_adapter and config.mode != "lora":
        raise ValueError(f"shared_adapter (one adapter for every agent) is a LoRA option, mode is {config.mode!r}")
    if config.mode in ("shared", "lora"):
        return _one_base(config, agents)
    if config.mode == "separate":
        return _one_model_per_agent(config, agents)
    raise ValueError(f"unknown team mode {config.mode!r}; expected 'shared', 'lora' or 'separate'")


def _load(config: TeamConfig, checkpoint: str, device: str | None = None) -> tuple[nn.Module, PreTrainedTokenizerBase]:
    path = resolve_model(checkpoint)
    model = load_model(path, dtype=config.dtype, device=device or config.device,
                       gradient_checkpointing=config.gradient_checkpointing)
    return model, load_tokenizer(path)


def _one_base(config: TeamConfig, agents: list[str]) -> TeamParts:
    """"shared": one model for every agent; "lora": one frozen base with one adapter per agent (one
    adapter for every agent with ``shared_adapter``: the single-model baseline)."""
    if not config.model:
        raise ValueError(f"mode {config.mode!r} needs TeamConfig.model")
    parts = TeamParts()
    base, parts.tokenizers["shared"] = _load(config, config.model)
    if config.mode == "shared":
        parts.models["shared"] = base
        parts.keys = {a: PolicyKey("shared") for a in agents}
        if config.reference:
            parts.references["shared"] = frozen_copy(base)
        return parts
    if config.shared_adapter:
        parts.models["shared"] = add_lora_adapters(base, config, [SHARED_ADAPTER])
        parts.keys = {a: PolicyKey("shared", SHARED_ADAPTER) for a in agents}
        return parts
    names = [adapter_name(a) for a in agents]
    if len(set(names)) != len(names):
        raise ValueError(f"agent names {agents} collide as adapter names {names}")
    parts.models["shared"] = add_lora_adapters(base, config, names)
    parts.keys = {a: PolicyKey("shared", adapter_name(a)) for a in agents}
    return parts


def _one_model_per_agent(config: TeamConfig, agents: list[str]) -> TeamParts:
    """"separate": one full model per agent, each with its own tokenizer (and frozen reference)."""
    parts = TeamParts()
    for a in agents:
        path = config.models.get(a, config.model)
        if not path:
            raise ValueError(f"separate mode: no checkpoint for agent {a!r} (TeamConfig.models or .model)")
        parts.models[a], parts.tokenizers[a] = _load(config, path, config.device_of(a))
        parts.keys[a] = PolicyKey(a)
        if config.reference:
            parts.references[a] = frozen_copy(parts.models[a])
    unknown = set(config.models) - set(agents)
    if unknown:
        raise ValueError(f"TeamConfig.models names unknown agents {sorted(unknown)}; agents: {agents}")
    return parts
