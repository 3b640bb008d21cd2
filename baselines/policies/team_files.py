"""A team on disk: ``team.json`` (config + agents) with one safetensors file of trained weights per
policy, read back by :meth:`baselines.policies.team.Team.load`, and the Hugging Face export for serving.

The :class:`~baselines.policies.team.Team` methods ``save``, ``load`` and ``export_pretrained``
call these functions."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from safetensors.torch import load_file, save_file
from torch import Tensor

from baselines.policies.team_config import TeamConfig

if TYPE_CHECKING:
    from baselines.policies.team import Team

TEAM_FILE = "team.json"


def write_team(
    directory: str | Path, config: TeamConfig, agents: list[str], state: Mapping[str, Mapping[str, Tensor]]
) -> Path:
    """Write ``team.json`` and one ``policy_<i>.safetensors`` per policy of ``state``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    files = {}
    for i, (name, tensors) in enumerate(state.items()):
        files[name] = f"policy_{i}.safetensors"
        save_file(tensors, str(directory / files[name]))
    meta = {"config": asdict(config), "agents": agents, "files": files}
    (directory / TEAM_FILE).write_text(json.dumps(meta, indent=2))
    return directory


def read_team(
    directory: str | Path, **overrides: Any
) -> tuple[TeamConfig, list[str], dict[str, dict[str, Tensor]]]:
    """The config (``overrides`` replace its fields), agents and trained weights written by :func:`write_team`."""
    directory = Path(directory)
    meta = json.loads((directory / TEAM_FILE).read_text())
    cfg = meta["config"]
    cfg["lora_target_modules"] = tuple(cfg["lora_target_modules"])
    cfg.update(overrides)
    state = {name: load_file(str(directory / f)) for name, f in meta["files"].items()}
    return TeamConfig(**cfg), meta["agents"], state


def export_pretrained(team: Team, directory: str | Path) -> dict[str, Path]:
    """Save each policy of ``team`` in Hugging Face format (full model + tokenizer, or peft adapters).

    Returns policy key string -> directory."""
    directory = Path(directory)
    out: dict[str, Path] = {}
    for key in team.policy_keys():
        target = directory / re.sub(r"\W", "_", str(key))
        agent = team.agents_of(key)[0]
        model = team.base_model(key)
        if key.adapter is None:
            model.save_pretrained(target)
        else:
            model.save_pretrained(target, selected_adapters=[key.adapter])
        team.tokenizer(agent).save_pretrained(target)
        out[str(key)] = target
    return out
