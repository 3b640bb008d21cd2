"""Scripted players of ``planning/grid_v0``: optimal, greedy and random.

- :func:`best_policy`: the tool writes the optimal solver program
  (:mod:`~llm_marl_envs.planning.solver_programs`, run in the sandbox like any answer); the
  plan agent plays the moves the tool printed (read from its own observation), falling back
  to the environment's optimal solution when there is no tool. Reaches the maximum return.
- :func:`greedy_policy`: no tool program; the plan agent repeats the legal move that most
  lowers a simple heuristic (Manhattan distance to the goal; boxes-to-targets plus player-
  to-box for Sokoban; for Sudoku, the smallest digit that fits each empty cell, no
  backtracking) and stops when no move lowers it -- it fails behind walls and dead ends,
  which is what a tool program is for.
- :func:`random_policy`: the tool picks among the solver program, prose and a program printing
  random moves; the plan agent emits 1 to 2 * size random moves.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from llm_marl_envs.core.cycles import noop_when_idle
from llm_marl_envs.planning.puzzle import DIRECTIONS, parse_moves
from llm_marl_envs.planning.solver_programs import solver_answer

__all__ = ["best_policy", "greedy_moves", "greedy_policy", "random_policy"]

_PRINTED = "The tool program printed:\n"


def _moves_answer(moves: list[str]) -> str:
    return f"<moves>{' '.join(moves)}</moves>"


@noop_when_idle
def best_policy(env: Any, agent: str) -> str:
    inner = env.unwrapped
    if agent == "tool":
        return solver_answer(inner.kind)
    last = inner.observe_chat(agent)[-1]["content"]
    if inner.tool and last.startswith(_PRINTED):
        moves, issues = parse_moves(last[len(_PRINTED):], inner.kind, inner.max_moves_per_turn)
        if moves and not issues:
            return _moves_answer(moves)
    return _moves_answer(inner.puzzle.solution() or [])


def _heuristic(puzzle: Any) -> int:
    if puzzle.kind == "plan_path":
        return abs(puzzle.agent[0] - puzzle.goal[0]) + abs(puzzle.agent[1] - puzzle.goal[1])
    loose = [b for b in puzzle.boxes if b not in puzzle.targets]
    free = [t for t in puzzle.targets if t not in puzzle.boxes]
    boxes = sum(min(abs(b[0] - t[0]) + abs(b[1] - t[1]) for t in free) for b in loose)
    reach = min((abs(puzzle.player[0] - b[0]) + abs(puzzle.player[1] - b[1]) for b in loose), default=0)
    return 10 * boxes + reach


def greedy_moves(puzzle: Any, limit: int) -> list[str]:
    """The greedy move sequence from ``puzzle`` (module docstring), at most ``limit`` moves."""
    moves: list[str] = []
    if puzzle.kind == "sudoku":
        for r in range(4):
            for c in range(4):
                if puzzle.grid[r][c] == 0:
                    for v in range(1, 5):
                        nxt = puzzle.apply(f"r{r + 1}c{c + 1}={v}")
                        if nxt is not None:
                            puzzle = nxt
                            moves.append(f"r{r + 1}c{c + 1}={v}")
                            break
        return moves[:limit]
    while len(moves) < limit and not puzzle.solved():
        options = [(m, puzzle.apply(m)) for m in DIRECTIONS]
        scored = [(_heuristic(nxt), m, nxt) for m, nxt in options if nxt is not None]
        if not scored:
            break
        h, move, nxt = min(scored, key=lambda x: x[0])
        if h >= _heuristic(puzzle):
            break
        moves.append(move)
        puzzle = nxt
    return moves


@noop_when_idle
def greedy_policy(env: Any, agent: str) -> str:
    inner = env.unwrapped
    if agent == "tool":
        return "No program: the plan agent plays greedily."
    return _moves_answer(greedy_moves(inner.puzzle, inner.max_moves_per_turn))


@noop_when_idle
def random_policy(env: Any, agent: str, rng: np.random.Generator) -> str:
    inner = env.unwrapped
    words = inner.puzzle.move_words()
    picks = [str(words[int(i)]) for i in rng.integers(len(words), size=int(rng.integers(1, 2 * inner.size + 1)))]
    if agent == "tool":
        choices = [solver_answer(inner.kind), "I would search the grid.",
                   f"```python\nprint({' '.join(picks)!r})\n```"]
        return choices[int(rng.integers(len(choices)))]
    return _moves_answer(picks)
