"""Data-parallel training on CPU: 2 gloo ranks launched by ``torchrun`` and ``accelerate launch``.

- one step on 2 ranks equals one step of 1 process on the same tasks: the 1-process trainer draws
  the same task seeds, is given the sample table the 2 ranks gathered (each rank sampled its own
  half with its own random stream, so a 1-process rollout would sample other completions), and its
  advantages + update give the AdamW moments (the gradients) and the parameters the 2 ranks wrote,
  within float tolerance. The step is
  one AdamW step (one minibatch): the summed gradients agree to ~1e-7, but after several AdamW
  steps a gradient component that is ~0 in both runs is divided by sqrt(v) + eps ~ 1e-8, so
  float noise there moves a weight by up to ~lr, which no tolerance tighter than lr could absorb;
- a 2-rank run resumed from its step-1 checkpoint (relaunched with ``accelerate launch``) ends
  with the same weights and optimizer state as the uninterrupted 2-rank run;
- only rank 0 writes: one metrics line per step.

Every launch binds a free loopback port (127.0.0.1, gloo on ``lo``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from baselines.advantages import compute_advantages
from baselines.checkpoint import load_checkpoint
from baselines.config import load_config
from baselines.distributed import DistContext
from baselines.samples import SampleTable
from baselines.trainer import Trainer
from tests.baselines.distributed_runs import check_resumed_step_2, launch, torchrun

pytestmark = pytest.mark.slow  # two launches of 2 processes each (about a minute on a loaded machine)

OVERRIDES = ["scheme=dr_mas", "model.sharing=lora", "rollout.tasks_per_step=4", "rollout.group_size=4",
             "optim.epochs=1", "optim.minibatch_size=0", "log.tensorboard=false", "log.plot=false",
             "log.progress=false", "log.save_every=1", "log.save_samples=true"]


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> Path:
    """A 2-rank run of 2 steps (tiny model built by rank 0, LoRA adapter per agent, Dr. MAS)."""
    out = tmp_path_factory.mktemp("dist")
    launch(torchrun(), ["--out", str(out), "--name", "straight", "--steps", "2", "--eval-episodes", "8",
                        *OVERRIDES])
    return out / "straight"


def test_two_ranks_equal_one_process_on_the_same_tasks(straight, tmp_path):
    cfg = load_config(overrides=[*OVERRIDES, f"model.tiny_dir={tmp_path / 'tiny'}"])
    single = Trainer(cfg, tmp_path / "single")  # builds the same tiny model, same LoRA init as rank 0
    before = {p: {n: v.clone() for n, v in t.items()} for p, t in single.team.state_dict().items()}
    table = SampleTable.from_jsonl(straight / "samples" / "step_1.jsonl")
    tasks = single.next_tasks()
    assert sorted(set(table.task)) == sorted({t.id for t in tasks})  # the 2 ranks covered exactly these tasks
    assert len(table) == 4 * 4 * 2  # 4 tasks x 4 episodes x 2 agents, each rank rolled out 2 tasks
    adv = compute_advantages(table, cfg.scheme, cfg.advantage)
    single.update(table, adv)
    after = single.team.state_dict()
    ckpt = load_checkpoint(straight / "checkpoints" / "step_1.pt")
    moved = 0.0
    for policy, tensors in after.items():
        for name, value in tensors.items():
            # AdamW's first step is ~lr * g / (|g| + eps): where g is ~eps (a LoRA A matrix while B is ~0), the
            # float noise of a different summation order moves a weight by a fraction of lr -- and the scoring
            # forward shares the prefix of the rows one pass holds, so one process (all rows) and a rank (its
            # half) add in different orders. Seen: 6.8e-5 (lr 1e-3). The moments below hold the gradients.
            torch.testing.assert_close(ckpt["team"][policy][name], value, rtol=1e-5, atol=cfg.optim.lr / 4,
                                       msg=(policy, name))
            moved = max(moved, float((value - before[policy][name]).abs().max()))
    assert moved > 1e-4  # the step did move the weights, so the comparison has teeth
    for pset in single.param_sets:  # AdamW's moments: the (clipped, all-reduced) gradients themselves
        ours, theirs = pset.optimizer.state_dict()["state"], ckpt["optimizers"][str(pset.key)]["state"]
        assert set(ours) == set(theirs)
        for moment in ("exp_avg", "exp_avg_sq"):  # relative L2 distance over the whole set
            diff = sum(float((theirs[pid][moment] - s[moment]).pow(2).sum()) for pid, s in ours.items())
            norm = sum(float(s[moment].pow(2).sum()) for s in ours.values())
            assert norm > 0 and (diff / norm) ** 0.5 < 1e-5, (pset.key, moment, (diff / norm) ** 0.5)


def test_only_rank_zero_writes(straight):
    lines = [json.loads(line) for line in (straight / "metrics.jsonl").read_text().splitlines()]
    assert [rec["step"] for rec in lines if "reward" in rec] == [1, 2]
    assert sum("eval/reward" in rec for rec in lines) == 1
    ckpt = load_checkpoint(straight / "checkpoints" / "step_2.pt")
    assert ckpt["world_size"] == 2 and len(ckpt["generation_calls_per_rank"]) == 2


def test_resumed_two_rank_run_equals_the_uninterrupted_one(straight, tmp_path):
    a, b = check_resumed_step_2(straight, tmp_path)
    assert a["generation_calls_per_rank"] == b["generation_calls_per_rank"]


def test_shards_cover_every_task_once_in_order():
    items = list(range(10))
    for world in (1, 2, 3, 4, 16):
        shares = [DistContext(rank=r, world_size=world).shard(items) for r in range(world)]
        assert [x for share in shares for x in share] == items
        assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_padded_length_normalization_is_refused_across_ranks(tmp_path):
    cfg = load_config(overrides=["loss.loss_agg_mode=seq-mean-token-sum-norm", "log.tensorboard=false"])
    with pytest.raises(ValueError, match="norm_len"):
        Trainer(cfg, tmp_path, dist=DistContext(rank=0, world_size=2))
