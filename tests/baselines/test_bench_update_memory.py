"""``python -m baselines.bench.update_memory`` runs every variant on the same rows, in fresh processes."""

from __future__ import annotations

from baselines.bench import update_memory


def test_every_variant_updates_the_same_rows(capsys):
    results = update_memory.main(["--completion-tokens", "8", "--threads", "1", "--micro", "0", "8", "--",
                                  "rollout.tasks_per_step=8", "rollout.group_size=4",
                                  "model.mask_to_action_words=false"])
    assert [r["micro"] for r in results] == [0, 8]
    assert results[0]["rows"] == results[1]["rows"] == 64  # 8 tasks x 4 episodes x 2 agents
    assert results[0]["tokens"] == results[1]["tokens"] > 64 * 8
    assert all(r["peak_growth"] >= 0 and r["seconds"] > 0 for r in results)
    out = capsys.readouterr().out
    assert "| one pass |" in out and "| 8 |" in out
