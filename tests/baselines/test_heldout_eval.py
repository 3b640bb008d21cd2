"""``eval.every_steps``: held-out evaluation during training on a fixed split, in every output of the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from baselines.config import load_config
from baselines.heldout import PeriodicEval
from baselines.plotting import reward_lines
from baselines.report.data import collect
from baselines.train import main
from baselines.trainer import Trainer
from tests.baselines.test_rollout import build_signal_model, signal_kwargs


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_signal_model(tmp_path_factory.mktemp("tiny"), signal_kwargs())


def test_every_steps_evaluates_a_fixed_split_into_metrics_tensorboard_curves_and_report(model_dir, tmp_path):
    out = main(["--steps", "3", "--eval-episodes", "8", "--out", str(tmp_path), "--name", "run",
                f"model.path={model_dir}", "eval.every_steps=2", "eval.episodes=12", "rollout.tasks_per_step=4",
                "rollout.group_size=4", "log.progress=false", "optim.lr=0.02"])
    run = Path(out["run_dir"])
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    heldout = {r["step"]: r["eval/heldout_reward"] for r in records if "eval/heldout_reward" in r}
    assert sorted(heldout) == [0, 2, 3]  # before training, every 2 steps, and the last step
    assert len(set(heldout.values())) > 1  # the policy moved, and the curve with it
    tb = EventAccumulator(str(run / "tb"))
    tb.Reload()
    assert [e.step for e in tb.Scalars("eval/heldout_reward")] == [0, 2, 3]
    assert [p[0] for p in reward_lines(records)["held-out (fixed split, eval.every_steps)"]] == [0, 2, 3]
    assert (run / "curves.png").stat().st_size > 0
    data = collect(run)
    assert data["curves"]["series"]["eval/heldout_reward"][0] == heldout[0]
    assert data["summary"]["held-out during training (fixed split)"] == \
        f"{heldout[0]:.3f} (step 0) -> {heldout[3]:.3f} (step 3)"
    # the split is fixed: the trained team, evaluated again on its own, gives the last logged value
    again = Trainer(load_config(run / "config.yaml"), tmp_path / "again")
    again.load(run)
    assert PeriodicEval(again).run(3)["eval/heldout_reward"] == heldout[3]


def test_the_fixed_split_is_the_tasks_held_out_problems(tmp_path):
    config = load_config(overrides=["env.name=planning/grid_v0", "env.kwargs={size: 3, tool: false, split: train}",
                                    "log.tensorboard=false", "eval.every_steps=1", "model.tiny_layers=1"])
    evaluation = PeriodicEval(Trainer(config, tmp_path))
    assert evaluation.kwargs["split"] == "test"  # whatever split training uses
    assert len({t.seed for t in evaluation.tasks}) == config.eval.episodes
