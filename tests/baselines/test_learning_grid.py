"""The tiny model learns planning/grid_v0 on CPU: GRPO from random init on 3x3 Plan-Path.

The plan agent plays alone (no tool: a 0.1M-parameter model cannot write a BFS program),
emits up to 4 moves in one turn (its output restricted to U D L R by the env's
``action_words``) and is rewarded ``solved + progress`` (``shaping=1.0``, max 2.0). From
random init it starts near the random-walk level (~0.2); measured in 30 steps it reached
~0.9 (docs/tasks/grid.md). The test runs 12 steps and asks for a clear rise.
"""

from __future__ import annotations

import numpy as np
import pytest

from baselines.config import EnvConfig, TrainConfig
from baselines.trainer import Trainer

GRID_KWARGS = {"puzzle": "plan_path", "size": 3, "wall_density": 0.0, "tool": False, "max_turns": 1,
               "max_moves_per_turn": 4, "shaping": 1.0}


@pytest.mark.slow
def test_tiny_model_learns_plan_path(tmp_path):
    config = TrainConfig(steps=12)
    config.env = EnvConfig(name="planning/grid_v0", kwargs=dict(GRID_KWARGS))
    config.generation.max_new_tokens = 4
    config.rollout.tasks_per_step, config.rollout.group_size = 16, 8
    config.optim.lr = 3e-3
    config.log.tensorboard = config.log.progress = config.log.plot = False
    trainer = Trainer(config, tmp_path)
    rewards = [trainer.train_step()["reward"] for _ in range(config.steps)]
    assert np.mean(rewards[:2]) < 0.35, rewards
    assert np.mean(rewards[-4:]) >= np.mean(rewards[:2]) + 0.3, rewards
