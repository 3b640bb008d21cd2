"""A team on disk: ``team.json`` (config + agents) with one safetensors file of trained weights per
policy, read back by :meth:`baselines.policies.team.Team.load`.

The :class:`~baselines.policies.team.Team` methods ``save`` and ``load`` call these functions; this
module knows only the config and plain tensors, never the team object (no import cycle)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from safetensors.torch import load_file, save_file
from torch import Tensor

from baselines.policies.team_config import TeamConfig

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
