"""``python -m baselines.evaluate`` on a tiny local model: definitions, held-out split, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from baselines import evaluate
from baselines.evaluate_core import HELD_OUT_SEEDS, held_out_kwargs, held_out_tasks


def test_report_figures_follow_their_definitions(tiny_paths, tmp_path, capsys):
    [report] = evaluate.main(["--env", "toy/signal_game_v0", "--model", tiny_paths["word"], "--episodes", "6",
                              "--samples", "3", "--max-new-tokens", "2", "--no-progress", "--out", str(tmp_path)])
    lines = [json.loads(x) for x in (tmp_path / "toy_signal_game_v0.transcripts.jsonl").read_text().splitlines()]
    assert len(lines) == 18 == report.episodes
    by_task: dict[str, list[dict]] = {}
    for ep in lines:
        by_task.setdefault(ep["task"], []).append(ep)
    task_means = [np.mean([e["return"] for e in eps]) for eps in by_task.values()]
    assert report.mean_return == pytest.approx(np.mean(task_means))
    assert report.ci95 == pytest.approx(1.959964 * np.std(task_means, ddof=1) / np.sqrt(6))
    assert report.avg_at_k == pytest.approx(np.mean([np.mean([e["passed"] for e in eps]) for eps in by_task.values()]))
    assert report.pass_at_k == pytest.approx(np.mean([any(e["passed"] for e in eps) for eps in by_task.values()]))
    assert report.oracle_return == pytest.approx(1.0)  # the scripted speaker+listener win every round
    assert set(report.agents) == {"speaker", "listener"}
    assert all(0 <= s.format_error_rate <= 1 for s in report.agents.values())
    out = capsys.readouterr().out
    assert "| 6 x 3 |" in out and "avg@3" in out and "format-error rate" in out


def test_held_out_seeds_and_eval_split():
    tasks = held_out_tasks(50, seed=0)
    assert len({t.seed for t in tasks}) == 50
    assert all(HELD_OUT_SEEDS[0] <= t.seed < HELD_OUT_SEEDS[1] for t in tasks)  # never a training seed
    assert held_out_kwargs("code/helper_main_v0", {})["split"] == "eval"
    assert held_out_kwargs("code/helper_main_v0", {"split": "train"})["split"] == "train"  # asked for
    assert "split" not in held_out_kwargs("toy/signal_game_v0", {})  # no problem split to choose
    assert held_out_kwargs("planning/grid_v0", {})["split"] == "test"  # the task names its held-out split


def test_bad_input_fails_before_loading_a_model(tiny_paths):
    with pytest.raises(KeyError, match="unknown environment"):
        evaluate.main(["--env", "toy/nope_v0", "--model", tiny_paths["word"]])
    with pytest.raises(ValueError, match="unknown agents"):
        evaluate.main(["--env", "toy/signal_game_v0", "--model", tiny_paths["word"], "--agent-model",
                       f"teacher={tiny_paths['word']}", "--episodes", "1"])
    with pytest.raises(ValueError, match="key=value"):
        evaluate.main(["--env", "toy/signal_game_v0", "--model", tiny_paths["word"], "--kw", "n_rounds"])
    with pytest.raises(SystemExit):
        evaluate.main(["--env", "toy/signal_game_v0"])  # no model at all
