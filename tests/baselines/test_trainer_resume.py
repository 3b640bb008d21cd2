"""Exact resume: checkpoint at step k, resume, step k+1 == the uninterrupted run's step k+1."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from baselines.checkpoint import load_checkpoint
from baselines.config import load_config
from baselines.trainer import Trainer
from tests.baselines.test_rollout import build_signal_model, signal_kwargs


@pytest.fixture(scope="module")
def namer_dir(tmp_path_factory) -> Path:
    return build_signal_model(tmp_path_factory.mktemp("namer"), signal_kwargs(), imitate_steps=25)


@pytest.mark.parametrize("scheme,sharing", [("dr_mas", "shared"), ("at_grpo", "lora"), ("maac", "shared")])
def test_resume_gives_the_same_next_step(scheme, sharing, namer_dir, tmp_path):
    cfg = load_config(overrides=[f"scheme={scheme}", f"model.sharing={sharing}", "rollout.tasks_per_step=4",
                                 "rollout.group_size=4", "optim.epochs=2", "optim.minibatch_size=12",
                                 "log.tensorboard=false", f"model.path={namer_dir}"])
    straight = Trainer(cfg, tmp_path / "straight")
    straight.train_step()
    ckpt = straight.save()
    metrics_straight = straight.train_step()
    params_straight = straight.team.state_dict()

    resumed = Trainer(cfg, tmp_path / "resumed")
    resumed.load(ckpt)
    assert resumed.step == 1
    metrics_resumed = resumed.train_step()
    params_resumed = resumed.team.state_dict()

    for policy, tensors in params_straight.items():
        for name, value in tensors.items():
            assert torch.equal(value, params_resumed[policy][name]), (policy, name)
    keys = ("reward", "agent/speaker/grad_norm", "agent/listener/kl", "agent/listener/clip_frac")
    for key in keys + (("critic/loss", "critic/loss_after") if scheme == "maac" else ()):  # the critic resumes too
        assert metrics_straight[key] == metrics_resumed[key], key
    # the comparison has teeth: restoring only the weights (no optimizer/RNG/step state) differs
    partial = Trainer(cfg, tmp_path / "partial")
    partial.team.load_state_dict(load_checkpoint(ckpt)["team"])
    partial.train_step()
    params_partial = partial.team.state_dict()
    assert any(not torch.equal(v, params_partial[p][n]) for p, t in params_straight.items() for n, v in t.items())
