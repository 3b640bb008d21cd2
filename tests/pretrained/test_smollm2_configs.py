"""The CPU learning configs of the real model load, train one step and move every agent's own adapter.

One step each with fewer tasks than the configs train on (8 signal tasks, 4 Plan-Path grids: fewer, and
every group can tie by chance and leave no gradient) and the configs' own group sizes and answer lengths (a
signal answer is one word): what the configs name -- the preset, one LoRA adapter per agent, each agent's
word mask, the scheme's rollout -- is what runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from baselines.config import load_config
from baselines.trainer import Trainer
from tests.pretrained.conftest import PRESET

CONFIGS = Path(__file__).resolve().parents[2] / "baselines" / "configs"
CPU_CONFIGS = ("signal_code_smollm2.yaml", "signal_code_at_grpo_smollm2.yaml", "plan_path_smollm2.yaml",
               "plan_path_at_grpo_smollm2.yaml")


@pytest.mark.parametrize("name", CPU_CONFIGS)
def test_config_trains_one_step_and_moves_every_adapter(name, smollm2_env, tmp_path):
    config = load_config(CONFIGS / name, [f"rollout.tasks_per_step={8 if 'signal' in name else 4}",
                                          "log.progress=false", "log.plot=false",
                                          "optim.lr=0.01"])
    assert config.model.path == PRESET and config.model.sharing == "lora"
    trainer = Trainer(config, tmp_path / "run")
    adapters = {a: {n: p.detach().clone() for n, p in trainer.team.trainable_parameters(a).items()}
                for a in trainer.agents}
    metrics = trainer.train_step()
    assert metrics["n_trained_rows"] > 0
    for agent, before in adapters.items():
        now = trainer.team.trainable_parameters(agent)
        moved = [n for n, p in before.items() if not torch.equal(p, now[n].detach())]
        assert moved, f"{name}: the adapter of {agent} did not move"
        assert metrics[f"agent/{agent}/grad_norm"] > 0
