"""IAC and MAAC: their critics converge on a task whose returns are known, and both learn the signal game."""

from __future__ import annotations

import numpy as np
import pytest

from baselines.advantages import AdvantageConfig, compute_advantages
from baselines.config import TrainConfig
from baselines.critic import CentralCritic, PerAgentCritic
from baselines.policies import Team, TeamConfig
from baselines.rollout import Task, sample
from baselines.trainer import Trainer
from tests.baselines.test_rollout import make_backend, pool_for, signal_kwargs, target_of

PAYING = ("apple", "boat")  # the known returns: an episode pays 1 when its target is one of these


def known_return_table(model_dir):
    """Signal-game episodes of a tiny model (the default run's kind: init std 0.3, 4-position window)
    whose turn reward is replaced by a known function of the target (only the speaker's observation
    shows the target)."""
    team, backend = make_backend(model_dir, max_new_tokens=1)
    table = sample("episodes", pool_for(signal_kwargs()), [Task(s) for s in range(12)], backend, group_size=4).table
    target = {(t, e): target_of(team, table.prompt_ids[i]) for i, (t, e) in enumerate(zip(table.task, table.episode))
              if table.agent[i] == "speaker"}
    paid = np.array([float(target[(t, e)] in PAYING) for t, e in zip(table.task, table.episode)])
    assert 0 < paid.mean() < 1
    return table.replace(turn_reward=paid), paid


@pytest.mark.parametrize("scheme", ["iac", "maac"])
def test_the_critic_converges_to_known_returns(scheme, tiny_paths):
    table, paid = known_return_table(tiny_paths["windowed"])
    team = Team.from_config(TeamConfig(mode="shared", model=tiny_paths["windowed"]), ["speaker", "listener"])
    critic = (PerAgentCritic if scheme == "iac" else CentralCritic)(team, ["speaker", "listener"], lr=3e-3, epochs=8)
    for _ in range(60):
        values = critic.values(table)
        adv = compute_advantages(table.replace(value=values), scheme, AdvantageConfig())
        np.testing.assert_allclose(adv.values, paid)  # one turn: the GAE target is the return itself
        stats = critic.update(adv.values)
    error = np.abs(critic.values(table) - paid)
    speaker = table.agent == "speaker"
    assert error[speaker].max() < 0.05, error[speaker].max()  # the speaker sees the target
    if scheme == "maac":  # the central critic sees the speaker's observation on the listener's rows too
        assert error.max() < 0.05 and stats["critic/r2"] > 0.99
    else:  # the listener's own observation does not show the target: its critic cannot know the return
        assert error[~speaker].max() > 0.3


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["iac", "maac"])
def test_actor_critic_learns_the_signal_game(scheme, tmp_path):
    config = TrainConfig(scheme=scheme, steps=15)
    config.rollout.tasks_per_step = 16
    config.log.tensorboard = config.log.progress = config.log.plot = False
    trainer = Trainer(config, tmp_path)
    start = trainer.evaluate(128)
    rewards = [trainer.train_step()["reward"] for _ in range(config.steps)]
    final = trainer.evaluate(128)
    assert start < 0.45 and final >= 0.9, (start, rewards, final)
