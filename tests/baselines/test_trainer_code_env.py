"""One real training step on ``code/helper_main_v0`` with a BPE tiny model (real sandbox scoring)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import llm_marl_envs
from baselines.advantages import compute_advantages
from baselines.config import load_config
from baselines.policies import build_tiny_model
from baselines.trainer import Trainer, env_texts

ENV = "code/helper_main_v0"


@pytest.fixture(scope="module")
def bpe_dir(tmp_path_factory):
    spec = llm_marl_envs.spec(ENV)
    env = spec.make(**spec.test_kwargs)
    path = tmp_path_factory.mktemp("bpe")
    return build_tiny_model(path, texts=env_texts(env, spec.load(), n_episodes=4), tokenizer="bpe", bpe_vocab_size=600)


@pytest.mark.parametrize("scheme", ["grpo", "magrpo"])
def test_one_step_on_helper_main(scheme, bpe_dir, tmp_path):
    spec = llm_marl_envs.spec(ENV)
    kwargs = {**spec.test_kwargs, "max_turns": 1}
    cfg = load_config(overrides=[f"scheme={scheme}", "rollout.tasks_per_step=2", "rollout.group_size=2",
                                 "generation.max_new_tokens=12", "log.tensorboard=false", f"model.path={bpe_dir}",
                                 "optim.entropy_coef=0"],
                      base={"env": {"name": ENV, "kwargs": kwargs}})
    trainer = Trainer(cfg, tmp_path)
    assert trainer.agents == ["helper", "main"]
    result = trainer.collect(trainer.next_tasks())
    table = result.table
    assert len(table) == 2 * 2 * 2 and set(table.agent.tolist()) == {"helper", "main"}
    assert np.all(np.isfinite(table.reward)) and np.all((table.reward >= 0) & (table.reward <= 4))
    assert all("score" in c for c in table.reward_components)  # scored by the env's real reward
    adv = compute_advantages(table, scheme, cfg.advantage)
    before = {n: p.detach().clone() for n, p in trainer.team.trainable_parameters(None).items()}
    update = trainer.update(table, adv)
    assert update["skipped"] == 0 and update["rows"] == len(table)
    changed = any(not torch.equal(before[n], p.detach()) for n, p in trainer.team.trainable_parameters(None).items())
    # a random model rarely writes code: parameters move exactly when some advantage is non-zero
    # (entropy bonus off, so the policy gradient is the only update)
    assert changed == bool(np.any(adv.advantages != 0))
