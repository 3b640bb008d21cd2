"""``baselines.experiments.heldout_training``: seeds trained in separate runs, then merged with ``--combine``."""

from __future__ import annotations

import json

import pytest

from baselines.experiments import heldout_training

CONFIG = "baselines/configs/signal_game.yaml"
FAST = ["steps=2", "rollout.tasks_per_step=4", "rollout.group_size=4", "log.tensorboard=false"]


def test_seeds_run_apart_merge_into_one_table(tmp_path, capsys):
    for seed in (1, 0):
        heldout_training.main(["--config", CONFIG, "--seeds", str(seed), "--eval-episodes", "4",
                               "--out", str(tmp_path / f"run{seed}"), *FAST])
    parts = [str(tmp_path / f"run{seed}" / "signal_game" / "results.json") for seed in (1, 0)]
    merged = heldout_training.main(["--combine", *parts, "--out", str(tmp_path / "all")])

    assert [r["seed"] for r in merged] == [0, 1]
    for r in merged:
        assert len(r["train_rewards"]) == 2 and len(r["zero_variance_fraction"]) == 2
        assert 0.0 <= r["before"]["mean_return"] <= 1.0 and 0.0 <= r["after"]["mean_return"] <= 1.0
        assert set(r["drift"]["per_agent"]) == {"speaker", "listener"}
        assert all(v["weight_change"] > 0 and v["kl"] >= 0 for v in r["drift"]["per_agent"].values())
    assert json.loads((tmp_path / "all" / "signal_game" / "results.json").read_text()) == merged
    assert (tmp_path / "all" / "signal_game" / "curves.png").stat().st_size > 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    before = sum(r["before"]["mean_return"] for r in merged) / 2
    after = sum(r["after"]["mean_return"] for r in merged) / 2
    assert last.startswith(f"signal_game, 2 seeds: held-out {before:.3f} -> {after:.3f}, change {after - before:+.3f}")


def test_a_seed_merged_twice_is_refused(tmp_path):
    part = tmp_path / "results.json"
    part.write_text(json.dumps([{"seed": 0}]))
    with pytest.raises(ValueError, match="seed 0 appears twice"):
        heldout_training.combine([str(part), str(part)])


def test_config_and_combine_are_exclusive(tmp_path):
    with pytest.raises(SystemExit):
        heldout_training.main(["--out", str(tmp_path)])
