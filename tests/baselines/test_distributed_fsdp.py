"""FSDP training on CPU (``distributed.fsdp=true``): 2 gloo ranks launched by ``torchrun`` / ``accelerate launch``.

- one FSDP step on 2 ranks equals one step of 1 process on the same tasks, for the three kinds of
  trained parameter set: the shared model fully fine-tuned, one model per agent, LoRA adapters on
  a (sharded, frozen) base. As in ``test_distributed.py`` the 1-process trainer is given the sample
  table the ranks gathered. Compared: the weights, AdamW's first and second moments (they hold the
  clipped gradients themselves, so a wrong reduction or a wrong global clipping norm shows there
  even where AdamW's first step, ~lr * sign(g), would hide it), and the logged per-agent and
  per-set gradient norms. The LoRA run also recomputes pi_old and uses minibatches of 3 rows, so a
  rank often has no row of an agent and runs FSDP's weight-0 pass (11 AdamW steps: the weights then
  agree to ~lr/25, the moments and norms to ~1e-6, see ``WEIGHT_ATOL``; the fully fine-tuned
  models' weights to lr, as float noise in ~eps gradients allows);
- the models were sharded: rank 0 holds about half of the parameters and of the AdamW state;
- a checkpoint written by 2 FSDP ranks is a full state dict: resumed by 2 ranks (relaunched with
  ``accelerate launch``) it gives the uninterrupted run's step 2 bit for bit, and a 1-process
  trainer loads it and trains on.

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
from baselines.samples import SampleTable
from baselines.step_metrics import step_metrics
from baselines.trainer import Trainer
from tests.baselines.distributed_runs import check_resumed_step_2, launch, torchrun

pytestmark = pytest.mark.slow  # four launches of 2 processes: 54-115 s each with the 2 cores under load 10-19
# (the DDP launches of test_distributed.py took 55-61 s at the same time); ~30 s of CPU per launch

BASE = ["scheme=dr_mas", "rollout.tasks_per_step=4", "rollout.group_size=4", "optim.epochs=1",
        "optim.minibatch_size=0", "log.tensorboard=false", "log.plot=false", "log.progress=false",
        "log.save_every=1", "log.save_samples=true", "distributed.fsdp=true"]


#: per mode, what else it exercises: a sharded frozen KL reference; pi_old recomputed and minibatches of 3
#: rows, so that a rank often has no row of an agent and runs the weight-0 pass FSDP needs
EXTRA = {"shared": [], "separate": ["loss.kl_coef=0.05"],
         "lora": ["optim.recompute_old_logprobs=true", "optim.minibatch_size=3"]}

WEIGHT_ATOL = {"shared": 1e-3, "separate": 1e-3, "lora": 1e-4}  # lr 1e-3: see check_step_equals_one_process


def overrides(sharing: str) -> list[str]:
    return [*BASE, f"model.sharing={sharing}", *EXTRA[sharing]]


def run_fsdp(out: Path, sharing: str, steps: int) -> Path:
    launch(torchrun(), ["--out", str(out), "--name", sharing, "--steps", str(steps), "--no-eval", *overrides(sharing)])
    return out / sharing


@pytest.fixture(scope="module")
def shared_run(tmp_path_factory) -> Path:
    """2 FSDP ranks, 2 steps, the shared model fully fine-tuned."""
    return run_fsdp(tmp_path_factory.mktemp("fsdp"), "shared", 2)


def metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def check_step_equals_one_process(run: Path, sharing: str, tmp_path: Path) -> None:
    cfg = load_config(overrides=[*overrides(sharing), f"model.tiny_dir={tmp_path / 'tiny'}"])
    single = Trainer(cfg, tmp_path / "single")  # one process: the same tiny model and initial weights
    assert not single.sharding.enabled
    before = {p: {n: v.clone() for n, v in t.items()} for p, t in single.team.state_dict().items()}
    table = SampleTable.from_jsonl(run / "samples" / "step_1.jsonl")
    assert sorted(set(table.task)) == sorted({t.id for t in single.next_tasks()})
    adv = compute_advantages(table, cfg.scheme, cfg.advantage)
    update = single.update(table, adv)
    ckpt = load_checkpoint(run / "checkpoints" / "step_1.pt")
    moved = 0.0
    for policy, tensors in single.team.state_dict().items():
        for name, value in tensors.items():
            # AdamW's step is ~lr * m / (sqrt(v) + eps): a gradient component of ~eps (an embedding row of a
            # token barely used; a LoRA A matrix while B is still ~0) turns float noise into up to ~lr.
            # Seen: 7e-6 after one step, 4e-5 after lora's 11 minibatch steps (lr 1e-3); since the scoring
            # forward shares the prefix of the rows one pass holds (one process and a rank then add in different
            # orders) up to 1.8e-4 after one step of a fully fine-tuned model, whose barely used embedding rows
            # have ~eps gradients: a weight's first step is bounded by lr, its tolerance. The moments below hold
            # the gradients themselves and agree to ~3e-6: they are the check a wrong reduction fails
            torch.testing.assert_close(ckpt["team"][policy][name], value, rtol=1e-5, atol=WEIGHT_ATOL[sharing],
                                       msg=(policy, name))
            moved = max(moved, float((value - before[policy][name]).abs().max()))
    assert moved > 1e-4  # the step moved the weights
    for pset in single.param_sets:
        ours = pset.optimizer.state_dict()["state"]
        theirs = ckpt["optimizers"][str(pset.key)]["state"]
        assert set(ours) == set(theirs)
        for moment in ("exp_avg", "exp_avg_sq"):  # relative L2 distance over the whole set
            diff = sum(float((theirs[pid][moment] - s[moment]).pow(2).sum()) for pid, s in ours.items())
            norm = sum(float(s[moment].pow(2).sum()) for s in ours.values())
            assert norm > 0 and (diff / norm) ** 0.5 < 1e-4, (pset.key, moment, (diff / norm) ** 0.5)
    logged = metrics(run)[0]
    expected = step_metrics(_result(table), adv, update, single.agents, cfg.advantage)
    if sharing == "lora":
        assert logged["fsdp/idle_passes"] > 0  # the weight-0 passes did run
    norms = [k for k in expected if k.endswith("grad_norm")]
    assert any(k.startswith("policy/") for k in norms) and any(k.startswith("agent/") for k in norms)
    for key in norms:
        assert logged[key] == pytest.approx(expected[key], rel=1e-5), key
    assert max(v for k, v in logged.items() if k.startswith("policy/")) > cfg.optim.max_grad_norm  # clipping acted


def _result(table: SampleTable):
    from baselines.rollout.base import RolloutResult
    from baselines.rollout.common import GenStats

    return RolloutResult(table=table, returns=[], gen=GenStats(), info={})


def test_fsdp_step_of_the_shared_model_equals_one_process(shared_run, tmp_path):
    check_step_equals_one_process(shared_run, "shared", tmp_path)


@pytest.mark.parametrize("sharing", ["separate", "lora"])
def test_fsdp_step_equals_one_process(sharing, tmp_path):
    check_step_equals_one_process(run_fsdp(tmp_path / "runs", sharing, 1), sharing, tmp_path)


def test_fsdp_shards_parameters_and_optimizer_state(shared_run, tmp_path):
    assert [rec["step"] for rec in metrics(shared_run) if "reward" in rec] == [1, 2]  # only rank 0 logs
    logged = metrics(shared_run)[0]
    cfg = load_config(overrides=[*overrides("shared"), f"model.tiny_dir={tmp_path / 'tiny'}"])
    single = Trainer(cfg, tmp_path / "single")
    params = sum(p.numel() * p.element_size() for p in single.team.trainable_parameters().values()) / 2**20
    state = sum(2 * p.numel() * p.element_size() for p in single.team.trainable_parameters().values()) / 2**20
    # rank 0's shard: half of the weights and of AdamW's two moments (+ a layer's rounding)
    assert logged["memory/params_mb"] == pytest.approx(params / 2, rel=0.05)
    assert logged["memory/optimizer_mb"] == pytest.approx(state / 2, rel=0.05)
    # while generating: its shards plus the whole weights
    assert logged["memory/generation_params_mb"] == pytest.approx(params * 1.5, rel=0.05)


def test_fsdp_checkpoint_resumes_on_two_ranks_and_in_one_process(shared_run, tmp_path):
    check_resumed_step_2(shared_run, tmp_path)
    # one process reads the same full checkpoint (the weights, every AdamW moment) and trains on
    cfg = load_config(overrides=[*overrides("shared"), f"model.tiny_dir={tmp_path / 'tiny'}"])
    single = Trainer(cfg, tmp_path / "single")
    single.load(shared_run / "checkpoints" / "step_1.pt")
    state = single.state()
    ckpt = load_checkpoint(shared_run / "checkpoints" / "step_1.pt")
    for policy, tensors in ckpt["team"].items():
        for name, value in tensors.items():
            assert torch.equal(value, state["team"][policy][name]), (policy, name)
    assert state["optimizers"]["shared"]["state"].keys() == ckpt["optimizers"]["shared"]["state"].keys()
    single.train_step()
    assert single.step == 2
