"""Held-out evaluation of a training run: the final one, and ``eval.every_steps`` during training.

Both play one sampled episode per held-out task (seeds from ``[2**31 - 1, 2**32 - 1)``, disjoint from
the training seeds), at the training temperature, with their own seeded generation backend, so
evaluating never changes the training run's random streams. With several ranks each rank plays
its share of the tasks (a collective call).

During training (:class:`PeriodicEval`) the split is FIXED: the same ``eval.episodes`` tasks (drawn
once from ``eval.seed``), on the task's held-out problem split where it has one
(:func:`baselines.evaluate_core.held_out_kwargs`, whatever the training ``split``), sampled with
the same generation seed every time, so the curve moves only with the policy. Logged as
``eval/heldout_reward`` (mean joint return) at step 0 and every ``eval.every_steps`` steps (and the
last): in ``metrics.jsonl``, TensorBoard, ``curves.png`` and the report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import torch

import llm_marl_envs
from baselines import rollout
from baselines.config import TrainConfig
from baselines.evaluate_core import held_out_kwargs, held_out_tasks
from baselines.generation import GenerationConfig, TransformersBackend
from baselines.policies import Team
from baselines.step_metrics import mean


class Run(Protocol):
    """What an evaluation needs from a training run (a :class:`~baselines.trainer.Trainer` is one)."""

    config: TrainConfig
    team: Team
    gen_config: GenerationConfig
    dist: Any
    sharding: Any

    def backend_options(self) -> dict: ...


def play_heldout(trainer: Run, pool: rollout.EnvPool, tasks: Sequence[rollout.Task], seed: int) -> list[float]:
    """The joint return of one sampled episode of every task (all ranks' shares, gathered)."""
    backend = TransformersBackend(trainer.team, dataclasses.replace(trainer.gen_config, seed=seed + trainer.dist.rank),
                                  **trainer.backend_options())
    with torch.no_grad(), trainer.sharding.gathered():
        result = rollout.sample("episodes", pool, trainer.dist.shard(list(tasks)), backend, group_size=1,
                                max_steps=trainer.config.rollout.max_steps_per_episode)
    return [r for part in trainer.dist.all_gather_object(result.returns) for r in part]


def final_tasks(n_episodes: int, seed: int) -> list[rollout.Task]:
    """The final evaluation's held-out seeds (drawn with replacement, as it always did)."""
    rng = np.random.default_rng(seed)
    return [rollout.Task(int(s)) for s in rng.integers(2**31 - 1, 2**32 - 1, size=n_episodes)]


class PeriodicEval:
    """``eval.every_steps``: the fixed held-out split of a run, evaluated on demand (module docstring)."""

    def __init__(self, trainer: Run) -> None:
        cfg = trainer.config
        self.trainer = trainer
        self.every = cfg.eval.every_steps
        kwargs = {k: v for k, v in cfg.env.kwargs.items() if k != "split"}
        self.kwargs = held_out_kwargs(cfg.env.name, kwargs, "eval")
        self.pool = rollout.EnvPool(lambda: llm_marl_envs.make(cfg.env.name, **self.kwargs))
        self.tasks = held_out_tasks(cfg.eval.episodes, cfg.eval.seed)
        self.seed = cfg.eval.seed
        self.last_step: int | None = None

    def due(self, step: int, final: bool = False) -> bool:
        """Whether ``step`` is evaluated: step 0, every ``every`` steps, and the run's last step."""
        return self.last_step != step and (step % self.every == 0 or final)

    def run(self, step: int) -> dict[str, float]:
        """``{"eval/heldout_reward": mean joint return on the fixed split}`` (collective with several ranks)."""
        self.last_step = step
        returns = play_heldout(self.trainer, self.pool, self.tasks, self.seed)
        return {"eval/heldout_reward": mean(returns), "eval/heldout_reward_std": float(np.std(returns))}
