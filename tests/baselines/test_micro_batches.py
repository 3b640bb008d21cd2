"""``optim.micro_batch_rows``: gradient accumulation over passes of a few rows gives the one-pass update."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from baselines.advantages import compute_advantages
from baselines.config import TrainConfig, load_config
from baselines.trainer import Trainer


def _config(micro: int, mode: str, sharing: str, recompute: bool) -> TrainConfig:
    return load_config(overrides=[
        "scheme=dr_mas", f"model.sharing={sharing}", "rollout.tasks_per_step=4", "rollout.group_size=4",
        "generation.max_new_tokens=4", "model.mask_to_action_words=false", "optim.epochs=2",
        "optim.minibatch_size=12", f"optim.micro_batch_rows={micro}", f"loss.loss_agg_mode={mode}",
        f"optim.recompute_old_logprobs={str(recompute).lower()}", "optim.entropy_coef=0.05",
        "log.tensorboard=false", "log.progress=false", "log.plot=false"])


def _ragged(table):
    """The same rows with completions cut to 1..4 tokens, so rows weigh differently per mode."""
    cut = [1 + i % 4 for i in range(len(table))]
    return dataclasses.replace(
        table, completion_ids=[c[:k] for c, k in zip(table.completion_ids, cut)],
        old_logprobs=[lp[:k] for lp, k in zip(table.old_logprobs, cut)])


def _recording(trainer: Trainer) -> list[list[torch.Tensor]]:
    """Record the gradient of every optimizer step of ``trainer`` (each parameter set's, in order)."""
    seen: list[list[torch.Tensor]] = []
    for pset in trainer.param_sets:
        step = pset.optimizer.step

        def recorded(*args, _step=step, _pset=pset, **kwargs):
            seen.append([p.grad.clone() for p in _pset.params if p.grad is not None])
            return _step(*args, **kwargs)

        pset.optimizer.step = recorded
    return seen


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
@pytest.mark.parametrize(("sharing", "recompute"), [("shared", False), ("lora", True)])
def test_micro_batches_give_the_one_pass_update(tmp_path, mode, sharing, recompute):
    whole = Trainer(_config(0, mode, sharing, recompute), tmp_path / "whole")
    table = _ragged(whole.collect(whole.next_tasks()).table)
    assert len({len(c) for c in table.completion_ids}) == 4
    adv = compute_advantages(table, "dr_mas", whole.config.advantage)
    start = {k: {n: t.clone() for n, t in v.items()} for k, v in whole.team.state_dict().items()}
    grads_whole = _recording(whole)
    one = whole.update(table, adv)

    micro = Trainer(_config(3, mode, sharing, recompute), tmp_path / "micro")
    for key, tensors in micro.team.state_dict().items():  # the same start
        assert all(torch.equal(t, start[key][n]) for n, t in tensors.items())
    grads_micro = _recording(micro)
    three = micro.update(table, adv)

    # The first optimizer step's gradient is the one-pass gradient up to summation order; later
    # steps start from weights that differ by that rounding, which Adam magnifies where g ~ 0.
    assert len(grads_micro) == len(grads_whole) >= 2
    for a, b in zip(grads_micro[0], grads_whole[0]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)
    moved = 0.0
    for key, tensors in whole.team.state_dict().items():
        for name, value in tensors.items():
            torch.testing.assert_close(micro.team.state_dict()[key][name], value, rtol=1e-3, atol=1e-4)
            moved = max(moved, float((value - start[key][name]).abs().max()))
    assert moved > 1e-3  # the update moved the weights, so the comparison has teeth
    for agent in ("speaker", "listener"):
        assert three["per_agent"][agent]["n_tokens"] == one["per_agent"][agent]["n_tokens"]
        first = (three["per_agent"][agent]["grad_norm"][0], one["per_agent"][agent]["grad_norm"][0])
        assert first[0] == pytest.approx(first[1], rel=1e-4)


def test_micro_batches_are_refused_with_fsdp_and_below_zero():
    with pytest.raises(ValueError, match="micro_batch_rows is not supported with distributed.fsdp"):
        load_config(overrides=["optim.micro_batch_rows=2", "distributed.fsdp=true"])
    with pytest.raises(ValueError, match="micro_batch_rows must be >= 0"):
        load_config(overrides=["optim.micro_batch_rows=-1"])


def test_gradient_checkpointing_from_the_config_gives_the_same_first_gradient(tmp_path):
    from baselines.policies.loading import checkpointed_layers

    plain = Trainer(_config(0, "token-mean", "lora", False), tmp_path / "plain")
    table = _ragged(plain.collect(plain.next_tasks()).table)
    adv = compute_advantages(table, "dr_mas", plain.config.advantage)
    config = _config(2, "token-mean", "lora", False)
    config.model.gradient_checkpointing = True
    saving = Trainer(config, tmp_path / "saving")
    assert all(checkpointed_layers(m) for m in saving.team.all_models())
    assert not any(checkpointed_layers(m) for m in plain.team.all_models())
    grads = [_recording(plain), _recording(saving)]
    plain.update(table, adv)
    saving.update(table, adv)
    for a, b in zip(grads[1][0], grads[0][0]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)
