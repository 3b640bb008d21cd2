"""Training configuration: nested dataclasses, a YAML file, and ``key=value`` overrides.

Precedence (lowest first): the dataclass defaults (the embedded default run), the YAML file
(``--config file.yaml``), the command-line flags (``--env``, ``--scheme``...), and finally
``key=value`` overrides with dotted keys::

    python -m baselines.train --config baselines/configs/signal_game.yaml optim.lr=2e-3 \
        rollout.group_size=8 env.kwargs.n_candidates=4 advantage.scale_by_std=false

Values are parsed as YAML scalars (``1e-3`` -> float, ``true`` -> bool, ``[a, b]`` -> list,
``null`` -> None). Unknown keys raise a ``ValueError`` that lists the known ones, so a typo
never silently does nothing. The advantage and loss sections are the schemes' own
:class:`~baselines.advantages.AdvantageConfig` and :class:`~baselines.loss.LossConfig`.

This module holds :class:`TrainConfig` and the loading of a run's config; the other sections are
in :mod:`baselines.config_sections`, the dict/override parsing in :mod:`baselines.config_parsing`.
Every name of those is importable from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from baselines.advantages import ADVANTAGE_SCHEMES, CRITIC_SCHEMES, AdvantageConfig
from baselines.config_parsing import apply_override, from_dict, merge_layer, parse_override, to_dict
from baselines.config_sections import (
    DEFAULT_WORDS,
    SCHEME_ROLLOUT,
    AgentModelConfig,
    CriticConfig,
    DistributedConfig,
    EnvConfig,
    EvalConfig,
    GenerationSettings,
    LogConfig,
    ModelConfig,
    OptimConfig,
    RayConfig,
    RolloutConfig,
)
from baselines.loss import LossConfig

__all__ = [
    "DEFAULT_WORDS",
    "SCHEME_ROLLOUT",
    "AgentModelConfig",
    "CriticConfig",
    "DistributedConfig",
    "EnvConfig",
    "EvalConfig",
    "GenerationSettings",
    "LogConfig",
    "ModelConfig",
    "OptimConfig",
    "RayConfig",
    "RolloutConfig",
    "TrainConfig",
    "apply_override",
    "from_dict",
    "load_config",
    "merge_layer",
    "parse_override",
    "save_config",
    "to_dict",
]


@dataclass
class TrainConfig:
    """Everything one training run needs. The defaults ARE the embedded default run."""

    scheme: str = "grpo"
    steps: int = 120
    seed: int = 0
    device: str = "cpu"
    #: stop early once the mean reward of the last 3 steps reaches this (None = never)
    target_reward: float | None = None
    env: EnvConfig = field(default_factory=EnvConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    advantage: AdvantageConfig = field(default_factory=AdvantageConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    critic: CriticConfig = field(default_factory=CriticConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    log: LogConfig = field(default_factory=LogConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)

    def __post_init__(self) -> None:
        if self.scheme not in ADVANTAGE_SCHEMES:
            raise ValueError(f"unknown scheme {self.scheme!r}; known: {sorted(ADVANTAGE_SCHEMES)}")
        if self.steps < 0:
            raise ValueError(f"steps must be >= 0, got {self.steps}")
        if self.rollout.group_size < 1 or self.rollout.tasks_per_step < 1:
            raise ValueError("rollout.group_size and rollout.tasks_per_step must be >= 1")
        if self.optim.epochs < 1:
            raise ValueError(f"optim.epochs must be >= 1, got {self.optim.epochs}")
        if self.optim.micro_batch_rows < 0:
            raise ValueError(f"optim.micro_batch_rows must be >= 0 (0 = one pass), got {self.optim.micro_batch_rows}")
        if self.optim.micro_batch_rows and self.distributed.fsdp:
            raise ValueError("optim.micro_batch_rows is not supported with distributed.fsdp (every rank must run "
                             "the same passes); set it to 0")
        if self.scheme in ("remax", *CRITIC_SCHEMES) and self.rollout_mode != "episodes":
            raise ValueError(f"scheme {self.scheme} needs rollout.mode=episodes (it plays ReMax's greedy episode / "
                             f"records the steps and turn rewards GAE runs over), not {self.rollout_mode!r}")
        if self.loss.tis_cap is not None and not self.optim.recompute_old_logprobs:
            raise ValueError(
                f"loss.tis_cap={self.loss.tis_cap} corrects pi_old (training forward) against the sampler's "
                "log-probs, but optim.recompute_old_logprobs=false makes pi_old the sampler's log-probs, so the "
                "weight would always be 1: set optim.recompute_old_logprobs=true, or loss.tis_cap=null"
            )

    @property
    def rollout_mode(self) -> str:
        """The resolved sampling mode."""
        return SCHEME_ROLLOUT[self.scheme] if self.rollout.mode == "auto" else self.rollout.mode

    def to_dict(self) -> dict[str, Any]:
        """The config as plain dicts/lists (YAML/JSON friendly)."""
        return to_dict(self)


# ---------------------------------------------------------------------------- loading
def load_config(
    path: str | Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    base: dict[str, Any] | None = None,
) -> TrainConfig:
    """Defaults <- YAML file <- ``base`` (flag values) <- ``key=value`` overrides."""
    data = to_dict(TrainConfig())
    default_env = data["env"]["name"]
    layers = []
    if path is not None:
        loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: a config file must hold a mapping at the top level")
        layers.append(loaded)
    layers.append(base or {})
    parsed = [parse_override(item) for item in overrides]
    _reject_rollout_gamma(layers, parsed)
    kwargs_given = any(isinstance(layer.get("env"), dict) and "kwargs" in layer["env"] for layer in layers) or any(
        keys[:2] == ["env", "kwargs"] for keys, _ in parsed
    )
    for layer in layers:
        merge_layer(data, layer)
    env_name = next((v for k, v in reversed(parsed) if k == ["env", "name"]), data["env"]["name"])
    if env_name != default_env and not kwargs_given:
        data["env"]["kwargs"] = {}  # the default kwargs belong to the default environment
    for keys, value in parsed:
        apply_override(data, keys, value)
    return from_dict(TrainConfig, data)


def _reject_rollout_gamma(layers: list[dict[str, Any]], parsed: list[tuple[list[str], Any]]) -> None:
    """``rollout.gamma`` was a second MAGRPO discount that the scheme ignored: say where it went."""
    in_layers = any(isinstance(layer.get("rollout"), dict) and "gamma" in layer["rollout"] for layer in layers)
    if in_layers or any(keys == ["rollout", "gamma"] for keys, _ in parsed):
        raise ValueError("rollout.gamma was merged into advantage.gamma, the one discount of MAGRPO's "
                         "return-to-go (the sampler and the scheme both use it): set advantage.gamma")


def save_config(config: TrainConfig, path: str | Path) -> None:
    """Write ``config`` as YAML (what ``--config`` reads back)."""
    Path(path).write_text(yaml.safe_dump(config.to_dict(), sort_keys=False), encoding="utf-8")
