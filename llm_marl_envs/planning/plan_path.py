"""Plan-Path: walk from ``A`` to ``G`` on a square grid with walls ``#`` (AT-GRPO's Plan-Path).

Generation (solvable by construction): walls are drawn with density ``wall_density``; the
start and goal are drawn among free cells until the goal is reachable at least
``min_distance`` steps away (BFS); after ``tries`` failed draws the walls are thinned out.
Render (also the tool program's stdin)::

    plan_path
    #..#.
    .A...
    ..#G.

A move into a wall or off the grid is illegal (not executed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llm_marl_envs.planning.puzzle import DIRECTIONS, bfs_path

__all__ = ["PlanPath", "generate_plan_path"]


@dataclass(frozen=True)
class PlanPath:
    """A Plan-Path state: grid ``size``, ``walls``, the agent's and the goal's (row, col)."""

    size: int
    walls: frozenset[tuple[int, int]]
    agent: tuple[int, int]
    goal: tuple[int, int]
    kind: str = "plan_path"

    def render(self) -> str:
        rows = []
        for r in range(self.size):
            row = ""
            for c in range(self.size):
                cell = (r, c)
                row += "A" if cell == self.agent else "G" if cell == self.goal else "#" if cell in self.walls else "."
            rows.append(row)
        return "plan_path\n" + "\n".join(rows)

    def _free(self, cell: tuple[int, int]) -> bool:
        r, c = cell
        return 0 <= r < self.size and 0 <= c < self.size and cell not in self.walls

    def apply(self, move: str) -> PlanPath | None:
        if move not in DIRECTIONS:
            return None
        dr, dc = DIRECTIONS[move]
        nxt = (self.agent[0] + dr, self.agent[1] + dc)
        return PlanPath(self.size, self.walls, nxt, self.goal) if self._free(nxt) else None

    def solved(self) -> bool:
        return self.agent == self.goal

    def solution(self) -> list[str] | None:
        def neighbors(cell):
            for move, (dr, dc) in DIRECTIONS.items():
                nxt = (cell[0] + dr, cell[1] + dc)
                if self._free(nxt):
                    yield move, nxt

        return bfs_path(self.agent, lambda cell: cell == self.goal, neighbors)

    def distance(self) -> int | None:
        path = self.solution()
        return None if path is None else len(path)

    def move_words(self) -> tuple[str, ...]:
        return tuple(DIRECTIONS)


def generate_plan_path(rng: np.random.Generator, size: int, wall_density: float = 0.25,
                       min_distance: int | None = None, tries: int = 50) -> PlanPath:
    """A solvable Plan-Path instance (module docstring); ``min_distance`` defaults to ``size``."""
    if size < 3:
        raise ValueError(f"plan_path needs size >= 3, got {size}")
    if not 0 <= wall_density < 0.6:
        raise ValueError(f"wall_density must be in [0, 0.6), got {wall_density}")
    want = size if min_distance is None else min_distance
    density = wall_density
    cells = [(r, c) for r in range(size) for c in range(size)]
    for attempt in range(10 * tries):
        if attempt and attempt % tries == 0:
            density *= 0.5
        walls = frozenset(cell for cell in cells if rng.random() < density)
        free = [cell for cell in cells if cell not in walls]
        if len(free) < 2:
            continue
        a, g = rng.choice(len(free), size=2, replace=False)
        puzzle = PlanPath(size, walls, free[int(a)], free[int(g)])
        d = puzzle.distance()
        if d is not None and d >= min(want, 2 * (size - 1)):
            return puzzle
    raise RuntimeError(f"could not generate a plan_path of size {size} with distance >= {want}")
