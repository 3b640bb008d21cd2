"""The CPU learning collector: one record per seed, the cell's row with its 2-std verdict, the curves."""

from __future__ import annotations

import json

import pytest

from baselines.experiments import cpu_learning


def _seed(seed: int, before: float, after: float) -> dict:
    return {"seed": seed, "before": {"mean_return": before, "seconds": 3.0}, "after": {"mean_return": after,
            "seconds": 3.0}, "steps": 5, "step_s": 10.0 + seed, "train_wall_s": 50.0, "train_rewards": [0.1, 0.2],
            "zero_variance_fraction": [0.5, 0.25]}


def _cell(tmp_path, name: str, seeds: list[dict], loads: list[str] | None = None):
    for s in seeds:  # one heldout_training process per seed, as the cells run
        folder = tmp_path / name / f"s{s['seed']}" / name
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps([s]))
        if loads:
            (folder / "load.txt").write_text("\n".join(loads) + "\n")
    return str(tmp_path / name)


def test_cells_give_records_rows_and_the_two_std_verdict(tmp_path, capsys):
    learned = _cell(tmp_path, "a", [_seed(0, 0.2, 0.9), _seed(1, 0.25, 0.95), _seed(2, 0.2, 0.85)],
                    loads=["1.00 0.9 0.8 1/100 5", "3.00 1 1 1/100 6"])
    noisy = _cell(tmp_path, "b", [_seed(0, 0.2, 0.5), _seed(1, 0.25, 0.2), _seed(2, 0.2, 0.3)])
    out = tmp_path / "cpu_learning.json"
    records = cpu_learning.main(["--cell", "a", "at_grpo", learned, "--cell", "b", "grpo", noisy, "--out", str(out)])
    assert json.loads(out.read_text()) == records
    assert [(r["config"], r["seed"]) for r in records] == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("b", 2)]
    assert records[0]["change"] == pytest.approx(0.7) and records[0]["mean_load"] == 2.0
    assert records[0]["seconds_per_step"] == 10.0 and records[3]["mean_load"] is None
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| a") or line.startswith("| b")]
    assert "+0.683 ± 0.029" in rows[0] and "**yes**" in rows[0] and "| 2.0 |" in rows[0]
    assert "| no |" in rows[1]  # +0.117 ± 0.176: inside two standard deviations


def test_a_seed_without_its_after_evaluation_is_listed_and_left_out_of_the_figures(tmp_path, capsys):
    still_training = {"seed": 2, "before": {"mean_return": 0.1}, "steps": 3, "partial": True}
    cell = _cell(tmp_path, "a", [_seed(0, 0.2, 0.9), _seed(1, 0.25, 0.95), still_training])
    records = cpu_learning.main(["--cell", "a", "at_grpo", cell])
    assert records[2] == {"config": "a", "scheme": "at_grpo", "seed": 2, "before": 0.1, "steps": 3, "partial": True}
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| a"))
    assert row.startswith("| a (1 partial) | at_grpo | 2 (5/5 steps) |") and "0.225 → 0.925" in row


def test_curves_draw_every_agent(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    lines = [{"reward": 0.1 * k, "agent/speaker/kl_ref": 0.01 * k, "agent/listener/reward": 0.1 * k,
              "agent/speaker/reward": 0.1 * k, "agent/listener/zero_var_groups": 0.5} for k in range(3)]
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    png = tmp_path / "img" / "curves.png"
    cpu_learning.main(["--curves", str(run), "--png", str(png), "--title", "t"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
