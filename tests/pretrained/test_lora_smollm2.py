"""One training step of a SmolLM2 team with one LoRA adapter per agent changes only the adapters."""

from __future__ import annotations

import torch

from baselines.config import load_config
from baselines.trainer import Trainer
from tests.pretrained.conftest import PRESET


def test_one_lora_step_changes_only_the_adapters(smollm2_env, tmp_path):
    config = load_config(overrides=[
        f"model.path={PRESET}", "model.sharing=lora", "model.lora_r=4", "rollout.tasks_per_step=1",
        "rollout.group_size=4", "generation.max_new_tokens=2", "optim.lr=1e-2", "log.progress=false",
    ])
    trainer = Trainer(config, tmp_path / "run")
    model = trainer.team.base_model(trainer.team.policy_key("speaker"))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    adapters = {n for n in before if "lora_" in n}
    assert adapters and all(("agent_speaker" in n) != ("agent_listener" in n) for n in adapters)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == adapters  # the 134.5M base weights are frozen
    metrics = trainer.train_step()
    assert metrics["n_trained_rows"] > 0
    after = dict(model.named_parameters())
    changed = {n for n in before if not torch.equal(before[n], after[n].detach())}
    assert changed and changed <= adapters
    for agent in ("speaker", "listener"):  # each agent's own adapter moved
        assert any(f"agent_{agent}" in n for n in changed), agent
