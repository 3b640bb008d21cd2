"""TRL bridge over every registered task: ``rollout_func`` with every seat in the dataset trains a step.

A seat the episode never asks to act (planner/worker's undispatched worker, a tree-search seat the
selection never picks) is normal: it gets a row whose every token is masked out (no gradient), flagged
``acted=False``, and training goes on.
"""

from __future__ import annotations

import math
import warnings

import pytest

import llm_marl_envs
from tests.bridges.conftest import need

pytest.importorskip("torch")

@pytest.mark.parametrize("task", llm_marl_envs.list_envs())
def test_every_seat_of_every_task_trains_one_step(task, tmp_path, monkeypatch):
    need("trl")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from baselines.bridges.tiny import build_task_tiny_model
    from baselines.bridges.trl import episode_dataset, make_rollout_func, team_return_reward

    kwargs = dict(llm_marl_envs.spec(task).test_kwargs)
    seats = llm_marl_envs.make(task, **kwargs).possible_agents
    path = build_task_tiny_model(task, tmp_path / "tiny", env_kwargs=kwargs, seed=0)
    tokenizer = AutoTokenizer.from_pretrained(path)
    args = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, beta=0.0, report_to="none", save_strategy="no",
                      max_steps=1, num_generations=2, per_device_train_batch_size=2 * len(seats),
                      max_completion_length=4, logging_steps=1, disable_tqdm=True, seed=0)
    rollout = make_rollout_func(task, env_kwargs=kwargs)
    outputs: list[dict] = []

    def recording_rollout(prompts, trainer):  # the bridge's rollout, its output kept for the checks below
        outputs.append(rollout(prompts, trainer))
        return outputs[-1]

    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(path), processing_class=tokenizer, args=args,
                          reward_funcs=team_return_reward, rollout_func=recording_rollout,
                          train_dataset=episode_dataset(task, [0], env_kwargs=kwargs))  # every seat (the default)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    (out,) = outputs
    assert sorted(out["seat"]) == sorted(seats * 2) and len(out["acted"]) == len(out["seat"])
    for acted, ids, mask in zip(out["acted"], out["completion_ids"], out["env_mask"]):
        assert len(ids) == len(mask) > 0
        if not acted:  # an idle seat's row: one EOS, masked out of the loss
            assert ids == [tokenizer.eos_token_id] and mask == [0]
    if task == "search/planner_worker_v0":  # the untrained planner dispatches no worker: idle rows, no error
        assert out["acted"].count(False) > 0
    assert trainer.state.global_step == 1
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert losses and all(math.isfinite(x) for x in losses)

