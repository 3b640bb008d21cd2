"""The GPU window's helpers on the CPU: the time budget of ``heldout_training``, the learning collector,
the speed check and the per-step decode profile (tiny model, a few tokens: smoke runs, not timings)."""

from __future__ import annotations

import json
import math
import time

from baselines.bench import decode_profile, gpu_generation
from baselines.experiments import gpu_learning, heldout_training

CONFIG = "baselines/configs/signal_game.yaml"


ARGS = ["--config", CONFIG, "--seeds", "0", "--eval-episodes", "2", "steps=4", "rollout.tasks_per_step=2",
        "rollout.group_size=2", "log.tensorboard=false"]


def test_no_step_starts_that_the_budget_cannot_hold_and_the_after_evaluation_still_runs(tmp_path):
    results = heldout_training.main([*ARGS, "--out", str(tmp_path / "a"), "--train-seconds", "0"])
    assert results[0]["steps"] == 0 and results[0]["train_rewards"] == []
    assert 0.0 <= results[0]["after"]["mean_return"] <= 1.0
    # a deadline already passed: no step either, and the after-evaluation still runs
    results = heldout_training.main([*ARGS, "--out", str(tmp_path / "b"), "--deadline", str(time.time())])
    assert results[0]["steps"] == 0 and "after" in results[0]


def test_the_record_is_written_after_the_before_evaluation_and_every_step(tmp_path):
    seen: list[dict] = []
    budget = heldout_training.Budget(deadline=time.time() + 600)
    final = heldout_training.run_seed(CONFIG, ARGS[6:], 0, tmp_path, 2, 12_345, budget, report=seen.append)
    assert [r["steps"] for r in seen] == [0, 1, 2, 3, 4] and all(r["partial"] and "after" not in r for r in seen)
    assert [len(r["train_rewards"]) for r in seen] == [0, 1, 2, 3, 4]
    assert final["steps"] == 4 and "after" in final and "partial" not in final


def test_partial_seeds_are_listed_and_left_out_of_the_verdict():
    partial = {"seed": 3, "before": {"mean_return": 0.1}, "steps": 2, "partial": True}
    v = gpu_learning.verdict([_seed(0, 0.1, 0.3), _seed(1, 0.2, 0.41), partial])
    assert v["seeds"] == 2 and v["partial"] == 1
    assert heldout_training.summary_lines("x", [partial])[0].startswith("x seed 3: partial")


def _seed(seed: int, before: float, after: float) -> dict:
    return {"seed": seed, "before": {"mean_return": before}, "after": {"mean_return": after}, "steps": 3}


def test_collector_lists_seeds_per_scheme_and_applies_the_two_std_rule(tmp_path, capsys):
    for scheme, seeds in {"grpo": [(0, 0.1, 0.3), (1, 0.2, 0.41), (2, 0.1, 0.32)],
                          "magrpo": [(0, 0.1, 0.3), (1, 0.2, 0.1), (2, 0.1, 0.2)]}.items():  # fmt: skip
        for s, b, a in seeds:
            folder = tmp_path / scheme / f"seed{s}" / "cfg"
            folder.mkdir(parents=True)
            (folder / "results.json").write_text(json.dumps([_seed(s, b, a)]))
    out = tmp_path / "gpu_learning.json"
    verdicts = gpu_learning.main(["--scheme", "grpo", str(tmp_path / "grpo"), "--scheme", "magrpo",
                                  str(tmp_path / "magrpo"), "--out", str(out)])  # fmt: skip
    table = json.loads(out.read_text())
    assert set(table) == {"grpo", "magrpo"} and [r["seed"] for r in table["grpo"]] == [0, 1, 2]
    assert math.isclose(verdicts["grpo"]["change"], (0.2 + 0.21 + 0.22) / 3)
    assert verdicts["grpo"]["learned"]  # +0.21 +- 0.01: well above 2 std
    assert not verdicts["magrpo"]["learned"]  # +0.2, -0.1, +0.1: the spread swallows it
    assert "grpo, 3 seed(s)" in capsys.readouterr().out
    assert gpu_learning.verdict([_seed(0, 0.0, 1.0)])["learned"] is False  # one seed never counts


def test_decode_profile_reports_every_engine(tmp_path, capsys):
    path = tmp_path / "profile.json"
    decode_profile.main(["--tasks", "2", "--group", "2", "--steps", "4", "--repeats", "1", "--json", str(path)])
    engines = json.loads(path.read_text())["engines"]
    assert [e["engine"] for e in engines] == ["backend fast", "backend fast, model forward (peft per-row adapters)",
                                              "plain generate (one adapter)",
                                              "backend generate (mixed adapters)"]  # fmt: skip
    assert all(e["ops_per_step"] > 0 for e in engines)


def test_gpu_speed_check_writes_its_figures_and_finds_the_fast_path_faithful(tmp_path):
    """The speed check's CPU try-out: the issue's JSON keys, and the fast path checked against the model it samples."""
    out = tmp_path / "gpu_generation.json"
    gpu_generation.main(["--tiny", "--device", "cpu", "--dtype", "fp32", "--tasks", "2", "--group", "2",
                         "--max-new-tokens", "12", "--repeats", "1", "--share-steps", "0", "--out", str(out)])  # fmt: skip
    result = json.loads(out.read_text())
    assert result["rows"] == 4 and result["new_tokens"] == 12  # 2 tasks x G=2
    assert result["before_tokens_per_s"] > 0 and result["after_tokens_per_s"] > 0 and result["bound_tokens_per_s"] > 0
    check = result["fidelity"]
    assert check["passed"] and not result["partial"]
    assert check["logprob_abs_diff_max"] < 1e-4  # fp32 on the CPU: the sampling policy's own log-probs
