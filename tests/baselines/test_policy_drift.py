"""``baselines.experiments.policy_drift``: how far a run moved each agent's policy from its start."""

from __future__ import annotations

import pytest
import torch

from baselines.config import TrainConfig
from baselines.experiments.policy_drift import drift, snapshot, summarize
from baselines.trainer import Trainer


def _trainer(tmp_path, sharing: str) -> Trainer:
    config = TrainConfig(steps=3)
    config.rollout.tasks_per_step, config.rollout.group_size = 4, 4
    config.model.sharing = sharing
    config.optim.lr = 1e-2
    config.log.tensorboard = config.log.progress = config.log.plot = False
    return Trainer(config, tmp_path)


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k].keys() == b[k].keys() and all(torch.equal(a[k][n], b[k][n]) for n in a[k]) for k in a)


@pytest.mark.parametrize("sharing", ["shared", "separate"])
def test_an_untrained_team_has_not_moved(tmp_path, sharing):
    trainer = _trainer(tmp_path, sharing)
    start = snapshot(trainer.team)
    moved = drift(trainer.team, start, trainer.collect(trainer.next_tasks()).table)
    assert set(moved) == set(trainer.team.agents)
    for agent, v in moved.items():
        assert v["weight_change"] == 0.0, agent
        assert abs(v["kl"]) < 1e-6 and abs(v["logp_change"]) < 1e-6, (agent, v)
        assert v["tokens"] > 0


@pytest.mark.parametrize("sharing", ["shared", "separate"])
def test_training_moves_every_agent_and_drift_leaves_the_trained_weights(tmp_path, sharing):
    trainer = _trainer(tmp_path, sharing)
    start = snapshot(trainer.team)
    for _ in range(3):
        trainer.train_step()
    trained = snapshot(trainer.team)
    table = trainer.collect(trainer.next_tasks()).table
    moved = drift(trainer.team, start, table)

    assert _same(snapshot(trainer.team), trained)  # scored under the start weights, then put back
    assert not _same(trained, start)
    for agent, v in moved.items():
        assert v["weight_change"] > 0 and v["kl"] > 0, (agent, v)
    overall = summarize(moved)
    assert overall["kl"] == pytest.approx(sum(v["kl"] for v in moved.values()) / len(moved))
    # the trained policy sampled these completions, so it gives them more probability than the start did
    assert overall["logp_change"] > 0


def test_a_saved_run_is_measured_from_its_rebuilt_start(tmp_path, capsys):
    from baselines.experiments import policy_drift

    trainer = _trainer(tmp_path / "run", "separate")
    start = snapshot(trainer.team)
    trainer.fit(eval_episodes=0)
    assert _same(snapshot(_trainer(tmp_path / "again", "separate").team), start)  # the start is rebuilt exactly

    [result] = policy_drift.main([str(trainer.run_dir), "--tasks", "2", "--out", str(tmp_path / "drift.json")])
    trained = snapshot(trainer.team)
    expected = {a: float(torch.sqrt(sum(((trained[str(trainer.team.policy_key(a))][n] -
                                          start[str(trainer.team.policy_key(a))][n]) ** 2).sum()
                                        for n in start[str(trainer.team.policy_key(a))])))
                for a in trainer.team.agents}
    for agent, v in result["per_agent"].items():
        key = str(trainer.team.policy_key(agent))
        size = float(torch.sqrt(sum((t**2).sum() for t in start[key].values())))
        assert v["weight_change"] == pytest.approx(expected[agent] / size, rel=1e-5)
        assert v["kl"] > 0 and v["tokens"] > 0
    assert f"{trainer.run_dir} [speaker]: KL(trained || start)" in capsys.readouterr().out
    assert (tmp_path / "drift.json").exists()
