"""4x4 Sudoku: fill the grid so every row, column and 2x2 box holds 1-4 (AT-GRPO's Sudoku).

Generation (solvable by construction, unique solution): a valid full grid is made by
shuffling a canonical one (digit relabelling, row/column swaps within bands and stacks,
band/stack swaps, transposition); cells are then emptied in random order, each removal
kept only while the puzzle still has exactly one solution, up to ``n_holes`` holes.
Render (also the tool program's stdin), ``.`` for an empty cell::

    sudoku
    1.3.
    ..1.
    2...
    .3.1

A move ``r<row>c<col>=<digit>`` (1-based) writes a digit; ``=0`` clears a cell. It is
illegal on a given cell, outside the grid, or when the digit already appears in the
cell's row, column or box. The distance is the number of cells that differ from the
unique solution (each takes one move).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Sudoku", "count_solutions", "generate_sudoku"]

N = 4
_CANONICAL = ((1, 2, 3, 4), (3, 4, 1, 2), (2, 1, 4, 3), (4, 3, 2, 1))
Grid = tuple[tuple[int, ...], ...]


def _conflicts(grid: Grid, r: int, c: int, v: int) -> bool:
    if any(grid[r][j] == v for j in range(N) if j != c) or any(grid[i][c] == v for i in range(N) if i != r):
        return True
    br, bc = 2 * (r // 2), 2 * (c // 2)
    return any(grid[i][j] == v for i in range(br, br + 2) for j in range(bc, bc + 2) if (i, j) != (r, c))


def count_solutions(grid: Grid, limit: int = 2) -> int:
    """Number of completions of ``grid`` (0 = empty cell), counting up to ``limit``."""
    cells = [(r, c) for r in range(N) for c in range(N) if grid[r][c] == 0]
    if not cells:
        return int(all(not _conflicts(grid, r, c, grid[r][c]) for r in range(N) for c in range(N)))
    rows = [list(row) for row in grid]
    count = 0

    def search(k: int) -> None:
        nonlocal count
        if count >= limit:
            return
        if k == len(cells):
            count += 1
            return
        r, c = cells[k]
        for v in range(1, N + 1):
            if not _conflicts(tuple(map(tuple, rows)), r, c, v):
                rows[r][c] = v
                search(k + 1)
                rows[r][c] = 0

    search(0)
    return count


@dataclass(frozen=True)
class Sudoku:
    """A 4x4 Sudoku state: the ``grid`` (0 = empty), the ``givens`` mask and the unique ``answer``."""

    grid: Grid
    givens: tuple[tuple[bool, ...], ...]
    answer: Grid
    kind: str = "sudoku"

    def render(self) -> str:
        return "sudoku\n" + "\n".join("".join(str(v) if v else "." for v in row) for row in self.grid)

    def apply(self, move: str) -> Sudoku | None:
        try:
            cell, value = move[1:].split("=")
            r, c = (int(x) - 1 for x in cell.split("c"))
            v = int(value)
        except ValueError:
            return None
        if not (0 <= r < N and 0 <= c < N and 0 <= v <= N) or self.givens[r][c]:
            return None
        if v and _conflicts(self.grid, r, c, v):
            return None
        rows = [list(row) for row in self.grid]
        rows[r][c] = v
        return Sudoku(tuple(map(tuple, rows)), self.givens, self.answer)

    def solved(self) -> bool:
        return all(v for row in self.grid for v in row) and count_solutions(self.grid) == 1

    def solution(self) -> list[str]:
        return [f"r{r + 1}c{c + 1}={self.answer[r][c]}"
                for r in range(N) for c in range(N) if self.grid[r][c] != self.answer[r][c]]

    def distance(self) -> int:
        return len(self.solution())

    def move_words(self) -> tuple[str, ...]:
        return tuple(f"r{r}c{c}={v}" for r in range(1, N + 1) for c in range(1, N + 1) for v in range(N + 1))


def generate_sudoku(rng: np.random.Generator, n_holes: int = 10) -> Sudoku:
    """A 4x4 Sudoku with a unique solution and up to ``n_holes`` empty cells (module docstring)."""
    if not 1 <= n_holes <= 16:
        raise ValueError(f"n_holes must be in [1, 16], got {n_holes}")
    digits = [0, *(int(d) for d in rng.permutation(N) + 1)]
    grid = [[digits[v] for v in row] for row in _CANONICAL]
    bands = [list(rng.permutation(2) + 2 * b) for b in rng.permutation(2)]
    grid = [grid[r] for band in bands for r in band]
    stacks = [list(rng.permutation(2) + 2 * s) for s in rng.permutation(2)]
    grid = [[row[c] for s in stacks for c in s] for row in grid]
    if rng.random() < 0.5:
        grid = [list(col) for col in zip(*grid)]
    answer: Grid = tuple(map(tuple, grid))
    holes = 0
    for k in rng.permutation(N * N):
        if holes >= n_holes:
            break
        r, c = divmod(int(k), N)
        saved, grid[r][c] = grid[r][c], 0
        if count_solutions(tuple(map(tuple, grid))) == 1:
            holes += 1
        else:
            grid[r][c] = saved
    givens = tuple(tuple(v != 0 for v in row) for row in grid)
    return Sudoku(tuple(map(tuple, grid)), givens, answer)
