"""The AT-GRPO vs GRPO vs MAGRPO experiment on multi-turn Plan-Path (baselines.experiments.repro_at_grpo_grid).

One optimizer step per scheme (tiny model, few test puzzles): the command runs end to end, each
scheme's rollout generates what its sampling mode must generate for 8 tasks x group 4 over 4
one-move turns, and held-out success is a solved fraction. The learning curves themselves are
in docs/reproducing.md section 2(b) (minutes per run, not a test).
"""

from __future__ import annotations

import pytest

from baselines.experiments import repro_at_grpo_grid as grid_exp
from baselines.experiments.common import load_runs

TASKS, GROUP, TURNS = 8, 4, grid_exp.GRID_KWARGS["max_turns"]


@pytest.mark.slow
def test_one_step_per_scheme_counts_generations_and_scores_held_out_success(tmp_path):
    runs = grid_exp.main(["--seeds", "0", "--steps", "1", "--eval-every", "1", "--eval-episodes", "8",
                          "--final-episodes", "8", "--save", str(tmp_path / "runs.json")])
    by_scheme = {r.label: r for r in runs}
    assert set(by_scheme) == {"at_grpo", "grpo", "magrpo"}
    seqs = {s: r.metrics[0]["sequences"] for s, r in by_scheme.items()}
    # GRPO: G episodes per task, 3-4 turns each (a puzzle starts 3 or 4 moves away; solving ends it early)
    assert TASKS * GROUP <= seqs["grpo"] <= TASKS * GROUP * TURNS
    # AT-GRPO: K candidates per decision on one main branch per task, one decision per turn
    assert seqs["at_grpo"] % GROUP == 0 and TASKS * GROUP <= seqs["at_grpo"] <= TASKS * GROUP * TURNS
    # MAGRPO: G + G^2 nodes on the two branching turns alone, then one child per leaf
    assert seqs["magrpo"] >= TASKS * (GROUP + GROUP**2)
    assert seqs["magrpo"] <= TASKS * (GROUP + GROUP**2 * (TURNS - 1))
    for run in runs:
        for value in (run.extra["initial_success"], run.metrics[0]["heldout_success"], run.final_eval):
            assert 0.0 <= value <= 1.0 and value * 8 == int(value * 8)  # a fraction of 8 test puzzles
    assert load_runs([tmp_path / "runs.json"])[0].extra == runs[0].extra  # --load reports these runs


def test_held_out_success_refuses_a_setting_the_best_policy_cannot_solve(tmp_path, monkeypatch):
    # one 1-move turn cannot reach a goal 3-4 moves away: "return of the best policy" is then not "solved"
    monkeypatch.setitem(grid_exp.GRID_KWARGS, "max_turns", 1)
    with pytest.raises(ValueError, match="does not solve every test puzzle"):
        grid_exp.train_scheme("grpo", 0, 1, tmp_path, eval_every=1, eval_episodes=4, final_episodes=4, overrides=[])


def test_at_grpo_groups_on_multi_turn_plan_path_hold_k_candidates_of_one_state_per_turn(tmp_path):
    # point 2(a) on the task of 2(b2): every AT-GRPO group is the K candidates of one grid state
    from collections import defaultdict

    from baselines.config import EnvConfig, TrainConfig
    from baselines.trainer import Trainer

    config = TrainConfig(scheme="at_grpo", steps=1)
    config.env = EnvConfig(name=grid_exp.ENV, kwargs=dict(grid_exp.GRID_KWARGS))
    config.generation.max_new_tokens = 1
    config.rollout.tasks_per_step, config.rollout.group_size = 3, GROUP
    config.log.tensorboard = config.log.progress = config.log.plot = False
    trainer = Trainer(config, tmp_path)
    table = trainer.collect(trainer.next_tasks()).table
    groups: dict[str, list[int]] = defaultdict(list)
    for i in range(len(table)):
        groups[table.group[i]].append(i)
    turns_per_task: dict[str, set[int]] = defaultdict(set)
    for rows in groups.values():
        assert len(rows) == GROUP
        assert len({tuple(table.prompt_ids[i]) for i in rows}) == 1  # one state, one prompt
        assert len({(table.task[i], int(table.turn[i]), table.agent[i], int(table.parent[i])) for i in rows}) == 1
        turns_per_task[table.task[rows[0]]].add(int(table.turn[rows[0]]))
    # a puzzle starts 3-4 moves away and a turn is one move: at least 3 turns, one group each
    assert all(len(turns) >= 3 and turns == set(range(len(turns))) for turns in turns_per_task.values())
    # later turns grow from the chosen candidate: turn t > 0 groups' parent is a node of turn t - 1
    node_turn = {(table.task[i], int(table.node[i])): int(table.turn[i]) for i in range(len(table))}
    for i in range(len(table)):
        if table.turn[i] > 0:
            assert node_turn[(table.task[i], int(table.parent[i]))] == int(table.turn[i]) - 1
