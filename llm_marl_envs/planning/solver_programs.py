'''Reference tool programs for ``planning/grid_v0``: optimal solvers that read the puzzle on stdin.

These are what the scripted best tool agent writes (as an LLM would, in a fenced block). They
run in the sandbox like any model-written program, read the state rendered by the puzzle
(first line the puzzle kind, then the grid) and print an optimal move sequence, space
separated. BFS for Plan-Path and Sokoban, backtracking for Sudoku.
'''

from __future__ import annotations

__all__ = ["SOLVER_PROGRAMS", "solver_answer"]

_BFS = """\
import sys
from collections import deque

lines = [l for l in sys.stdin.read().split("\\n") if l.strip()]
kind, grid = lines[0].strip(), [l.strip() for l in lines[1:]]
D = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
cells = {(r, c): ch for r, row in enumerate(grid) for c, ch in enumerate(row)}
"""

PLAN_PATH = _BFS + """\
start = next(p for p, ch in cells.items() if ch == "A")
goal = next(p for p, ch in cells.items() if ch == "G")
prev = {start: None}
queue = deque([start])
while queue:
    cur = queue.popleft()
    if cur == goal:
        break
    for m, (dr, dc) in D.items():
        nxt = (cur[0] + dr, cur[1] + dc)
        if cells.get(nxt, "#") != "#" and nxt not in prev:
            prev[nxt] = (cur, m)
            queue.append(nxt)
path = []
cur = goal
while prev.get(cur):
    cur, m = prev[cur]
    path.append(m)
print(" ".join(reversed(path)))
"""

SOKOBAN = _BFS + """\
walls = {p for p, ch in cells.items() if ch == "#"}
targets = frozenset(p for p, ch in cells.items() if ch in "T*+")
boxes = frozenset(p for p, ch in cells.items() if ch in "$*")
player = next(p for p, ch in cells.items() if ch in "@+")
start = (player, boxes)
prev = {start: None}
queue = deque([start])
end = None
while queue:
    state = queue.popleft()
    if state[1] == targets:
        end = state
        break
    (pr, pc), bx = state
    for m, (dr, dc) in D.items():
        nxt = (pr + dr, pc + dc)
        if nxt in walls:
            continue
        nb = bx
        if nxt in bx:
            beyond = (nxt[0] + dr, nxt[1] + dc)
            if beyond in walls or beyond in bx:
                continue
            nb = (bx - {nxt}) | {beyond}
        new = (nxt, nb)
        if new not in prev:
            prev[new] = (state, m)
            queue.append(new)
path = []
while end is not None and prev[end] is not None:
    end, m = prev[end]
    path.append(m)
print(" ".join(reversed(path)))
"""

SUDOKU = """\
import sys

lines = [l.strip() for l in sys.stdin.read().split("\\n") if l.strip()]
grid = [[0 if ch == "." else int(ch) for ch in row] for row in lines[1:5]]
start = [row[:] for row in grid]


def ok(r, c, v):
    if any(grid[r][j] == v for j in range(4)) or any(grid[i][c] == v for i in range(4)):
        return False
    br, bc = 2 * (r // 2), 2 * (c // 2)
    return all(grid[i][j] != v for i in range(br, br + 2) for j in range(bc, bc + 2))


def solve(k=0):
    if k == 16:
        return True
    r, c = divmod(k, 4)
    if grid[r][c]:
        return solve(k + 1)
    for v in range(1, 5):
        if ok(r, c, v):
            grid[r][c] = v
            if solve(k + 1):
                return True
            grid[r][c] = 0
    return False


if solve():
    print(" ".join(f"r{r + 1}c{c + 1}={grid[r][c]}" for r in range(4) for c in range(4) if not start[r][c]))
"""

SOLVER_PROGRAMS: dict[str, str] = {"plan_path": PLAN_PATH, "sokoban": SOKOBAN, "sudoku": SUDOKU}


def solver_answer(kind: str) -> str:
    """The best tool agent's answer for ``kind``: the solver program in a fenced block."""
    return f"```python\n{SOLVER_PROGRAMS[kind]}```"
