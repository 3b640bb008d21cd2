"""planning/grid_v0: puzzles solvable by construction, move parsing, the tool/plan loop, rewards."""

from __future__ import annotations

import numpy as np
import pytest

from llm_marl_envs.data.seed_splits import split_of_seed
from llm_marl_envs.planning import grid_v0 as grid
from llm_marl_envs.planning.plan_path import PlanPath, generate_plan_path
from llm_marl_envs.planning.puzzle import parse_moves
from llm_marl_envs.planning.sokoban import generate_sokoban
from llm_marl_envs.planning.sudoku import count_solutions, generate_sudoku
from llm_marl_envs.testing import play_episode


def _replay(puzzle, moves):
    for move in moves:
        puzzle = puzzle.apply(move)
        assert puzzle is not None, move
    return puzzle


@pytest.mark.parametrize("seed", range(15))
def test_generated_puzzles_are_solvable_by_construction(seed):
    rng = np.random.default_rng(seed)
    path = generate_plan_path(rng, 8)
    assert path.distance() >= 8 and _replay(path, path.solution()).solved()
    box = generate_sokoban(rng, 6, n_boxes=2)
    assert not box.solved() and _replay(box, box.solution()).solved()
    sudoku = generate_sudoku(rng, n_holes=10)
    assert count_solutions(sudoku.grid) == 1 and _replay(sudoku, sudoku.solution()).solved()


def test_illegal_moves_are_refused():
    p = PlanPath(3, frozenset({(0, 1)}), (0, 0), (2, 2))
    assert p.apply("R") is None and p.apply("U") is None and p.apply("D").agent == (1, 0)
    s = generate_sudoku(np.random.default_rng(0))
    given = next((r, c) for r in range(4) for c in range(4) if s.givens[r][c])
    assert s.apply(f"r{given[0] + 1}c{given[1] + 1}=1") is None
    r, c = next((r, c) for r in range(4) for c in range(4) if not s.givens[r][c])
    clash = next(v for v in range(1, 5) if v in s.grid[r])
    assert s.apply(f"r{r + 1}c{c + 1}={clash}") is None


def test_parse_moves():
    assert parse_moves("<moves>U, r left Down</moves>", "plan_path", 10) == (["U", "R", "L", "D"], [])
    moves, issues = parse_moves("go U then R", "sokoban", 10)
    assert moves == ["U", "R"] and "not moves" in issues[0]
    assert parse_moves("R1C2=3 r4c4=1", "sudoku", 10)[0] == ["r1c2=3", "r4c4=1"]
    moves, issues = parse_moves("U " * 9, "plan_path", 4)
    assert len(moves) == 4 and any("cut" in i for i in issues)
    assert parse_moves("", "plan_path", 4) == ([], ["no moves found"])


def test_moves_execute_and_illegal_ones_are_counted():
    env = grid.env(puzzle="plan_path", size=5, tool=False, max_turns=2)
    env.reset(seed=0)
    inner = env.unwrapped
    inner.puzzle = inner.start = PlanPath(5, frozenset({(0, 1)}), (0, 0), (4, 4))
    inner.initial_distance = 8
    env.step("<moves>R D D</moves>")  # R hits the wall
    turn = inner.record.turns[0]
    assert turn.components["illegal_moves"] == 1 and turn.components["moves"] == 3
    assert inner.puzzle.agent == (2, 0) and turn.reward == 0.0
    assert "Current state" in env.observe_chat("plan")[-1]["content"]
    env.step("<moves>R R R R D D</moves>")
    assert inner.record.terminated and inner.record.total_reward == 1.0


def test_tool_program_output_is_what_the_plan_agent_sees():
    env = grid.env(puzzle="sokoban", max_turns=1, timeout_s=5.0)
    env.reset(seed=2)
    env.step(grid.best_policy(env, "tool"))
    seen = env.observe_chat("plan")[-1]["content"]
    assert seen.startswith("The tool program printed:\n")
    env.step(grid.best_policy(env, "plan"))
    turn = env.unwrapped.record.turns[0]
    assert turn.agent_components["tool"] == {"tool_ran": 1.0, "tool_solves": 1.0}
    assert turn.reward == 1.0
    env.reset(seed=2)
    env.step("```python\nprint(undefined_name)\n```")
    assert "NameError" in env.observe_chat("plan")[-1]["content"]


@pytest.mark.parametrize("puzzle", grid.PUZZLES)
def test_best_beats_greedy_beats_nothing(puzzle):
    env = grid.env(puzzle=puzzle, tool=True, timeout_s=5.0)
    best = [play_episode(env, grid.best_policy, seed=s) for s in range(3)]
    greedy = [play_episode(env, grid.greedy_policy, seed=s) for s in range(20)]
    assert best == [1.0, 1.0, 1.0]
    assert np.mean(greedy) < 0.8  # without the tool's search the long-horizon puzzles fail often
    assert play_episode(env, lambda e, a: "", seed=0) == 0.0


def test_shaping_is_potential_based():
    env = grid.env(puzzle="plan_path", size=6, tool=False, max_turns=3, shaping=0.5)
    assert env.unwrapped.return_range() == (0.0, 1.5)
    assert play_episode(env, grid.best_policy, seed=0) == pytest.approx(1.5)
    total = play_episode(env, grid.greedy_policy, seed=0)  # greedy gets stuck a third of the way
    phi = env.unwrapped.record.turns[-1].components["progress"]
    assert 0 < phi < 1 and not env.unwrapped.puzzle.solved()
    assert total == pytest.approx(0.5 * phi)
    off = grid.env(puzzle="plan_path", size=6, tool=False, max_turns=3)
    assert play_episode(off, grid.greedy_policy, seed=0) == 0.0
    assert {t.components["shaping"] for t in off.unwrapped.record.turns} == {0.0}


def test_splits_and_action_words():
    for split in ("train", "test"):
        env = grid.env(puzzle="sudoku", split=split, tool=False)
        env.reset(seed=4)
        assert split_of_seed(env.unwrapped.puzzle_seed) == split
    env = grid.env(puzzle="plan_path", size=5)
    assert env.unwrapped.action_words("plan") == ("U", "D", "L", "R") and env.unwrapped.action_words("tool") is None
    env.reset(seed=0, options={"puzzle_seed": 7})
    twin = grid.env(puzzle="plan_path", size=5)
    twin.reset(seed=99, options={"puzzle_seed": 7})
    assert env.unwrapped.puzzle == twin.unwrapped.puzzle
    assert grid.env(puzzle="sudoku").unwrapped.action_words("plan") == ("r", "c", "=", "0", "1", "2", "3", "4")
    with pytest.raises(ValueError, match="4x4"):
        grid.env(puzzle="sudoku", size=6)
