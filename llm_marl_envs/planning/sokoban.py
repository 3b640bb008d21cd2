"""Sokoban: push every box ``$`` onto a target ``T`` (AT-GRPO's Sokoban).

Generation (solvable by construction, by reverse play): a walled ``size`` x ``size`` room
with a few inner walls; the boxes start on their targets and the player walks backwards
for ``reverse_steps`` random steps, pulling a box behind it now and then. Every pull
reversed is a legal push, so the resulting state is solvable; states closer than
``min_distance`` pushes-and-steps to the solution are rejected. Render (also the tool
program's stdin)::

    sokoban
    ######
    #.T..#
    #.$@.#
    #....#
    ######

``@`` player, ``$`` box, ``T`` target, ``*`` box on a target, ``+`` player on a target,
``#`` wall, ``.`` floor. A move into a wall, or pushing a box into a wall or another box,
is illegal (not executed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llm_marl_envs.planning.puzzle import DIRECTIONS, bfs_path

__all__ = ["Sokoban", "generate_sokoban"]

Cell = tuple[int, int]


@dataclass(frozen=True)
class Sokoban:
    """A Sokoban state: room ``size``, ``walls``, ``targets``, ``boxes`` and the ``player``."""

    size: int
    walls: frozenset[Cell]
    targets: frozenset[Cell]
    boxes: frozenset[Cell]
    player: Cell
    kind: str = "sokoban"

    def render(self) -> str:
        rows = []
        for r in range(self.size):
            row = ""
            for c in range(self.size):
                cell = (r, c)
                if cell in self.walls:
                    row += "#"
                elif cell == self.player:
                    row += "+" if cell in self.targets else "@"
                elif cell in self.boxes:
                    row += "*" if cell in self.targets else "$"
                else:
                    row += "T" if cell in self.targets else "."
            rows.append(row)
        return "sokoban\n" + "\n".join(rows)

    def _step(self, player: Cell, boxes: frozenset[Cell], move: str) -> tuple[Cell, frozenset[Cell]] | None:
        dr, dc = DIRECTIONS[move]
        nxt = (player[0] + dr, player[1] + dc)
        if nxt in self.walls:
            return None
        if nxt in boxes:
            beyond = (nxt[0] + dr, nxt[1] + dc)
            if beyond in self.walls or beyond in boxes:
                return None
            return nxt, (boxes - {nxt}) | {beyond}
        return nxt, boxes

    def apply(self, move: str) -> Sokoban | None:
        if move not in DIRECTIONS:
            return None
        out = self._step(self.player, self.boxes, move)
        return None if out is None else Sokoban(self.size, self.walls, self.targets, out[1], out[0])

    def solved(self) -> bool:
        return self.boxes == self.targets

    def solution(self) -> list[str] | None:
        def neighbors(state):
            player, boxes = state
            for move in DIRECTIONS:
                out = self._step(player, boxes, move)
                if out is not None:
                    yield move, out

        return bfs_path((self.player, self.boxes), lambda s: s[1] == self.targets, neighbors)

    def distance(self) -> int | None:
        path = self.solution()
        return None if path is None else len(path)

    def move_words(self) -> tuple[str, ...]:
        return tuple(DIRECTIONS)


def generate_sokoban(rng: np.random.Generator, size: int, n_boxes: int = 1, inner_walls: int = 2,
                     reverse_steps: int | None = None, min_distance: int = 3, tries: int = 200) -> Sokoban:
    """A solvable Sokoban instance by reverse play (module docstring)."""
    if size < 5:
        raise ValueError(f"sokoban needs size >= 5, got {size}")
    inner = [(r, c) for r in range(1, size - 1) for c in range(1, size - 1)]
    if not 1 <= n_boxes <= len(inner) // 4:
        raise ValueError(f"n_boxes must be in [1, {len(inner) // 4}] for size {size}, got {n_boxes}")
    border = frozenset((r, c) for r in range(size) for c in range(size) if r in (0, size - 1) or c in (0, size - 1))
    steps = reverse_steps if reverse_steps is not None else 4 * size * n_boxes
    for _ in range(tries):
        picks = rng.choice(len(inner), size=inner_walls + n_boxes + 1, replace=False)
        walls = border | {inner[int(i)] for i in picks[:inner_walls]}
        targets = frozenset(inner[int(i)] for i in picks[inner_walls:inner_walls + n_boxes])
        boxes, player = set(targets), inner[int(picks[-1])]
        for _ in range(steps):
            move = str(rng.choice(list(DIRECTIONS)))
            dr, dc = DIRECTIONS[move]
            nxt = (player[0] + dr, player[1] + dc)
            if nxt in walls or nxt in boxes:
                continue
            behind = (player[0] - dr, player[1] - dc)
            if behind in boxes and rng.random() < 0.8:
                boxes = (boxes - {behind}) | {player}
            player = nxt
        puzzle = Sokoban(size, walls, targets, frozenset(boxes), player)
        d = puzzle.distance()
        if d is not None and d >= min_distance:
            return puzzle
    raise RuntimeError(f"could not generate a sokoban of size {size} with {n_boxes} box(es)")
