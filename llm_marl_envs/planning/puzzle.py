"""What every grid puzzle of ``planning/grid_v0`` provides, and the shared move parsing and search.

A puzzle is an immutable state: :meth:`Puzzle.render` is the text both agents see (and the
tool program reads on stdin), :meth:`Puzzle.apply` executes one move (None when the move is
not legal), :meth:`Puzzle.solved`, :meth:`Puzzle.distance` (the optimal number of moves
left, None when the puzzle can no longer be solved) and :meth:`Puzzle.solution` (an
optimal move sequence). Moves are words: ``U D L R`` for the walking puzzles, ``r<row>c<col>=<digit>``
for Sudoku.

:func:`parse_moves` reads a plan agent's answer: the content of its last ``<moves>...</moves>``
tag, or the whole answer when it has none, split on whitespace and commas; ``up``/``down``/
``left``/``right`` are accepted for ``U D L R``. Unknown words are reported, never executed.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from typing import Protocol, TypeVar

__all__ = ["DIRECTIONS", "Puzzle", "bfs_path", "parse_moves"]

#: the walking puzzles' moves: word -> (row delta, column delta)
DIRECTIONS: dict[str, tuple[int, int]] = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
_ALIASES = {"UP": "U", "DOWN": "D", "LEFT": "L", "RIGHT": "R"}
_MOVES_TAG = re.compile(r"<moves>(.*?)</moves>", re.DOTALL | re.IGNORECASE)
_SPLIT = re.compile(r"[\s,;]+")
_SUDOKU_MOVE = re.compile(r"^r([1-9])c([1-9])=([0-9])$", re.IGNORECASE)


class Puzzle(Protocol):
    """The interface of a puzzle state (see the module docstring)."""

    kind: str

    def render(self) -> str: ...
    def apply(self, move: str) -> Puzzle | None: ...
    def solved(self) -> bool: ...
    def distance(self) -> int | None: ...
    def solution(self) -> list[str] | None: ...
    def move_words(self) -> tuple[str, ...]: ...


def parse_moves(text: str, kind: str, max_moves: int) -> tuple[list[str], list[str]]:
    """``(moves, issues)`` read from a plan answer (module docstring); at most ``max_moves``."""
    tags = _MOVES_TAG.findall(text)
    body = tags[-1] if tags else text
    moves: list[str] = []
    unknown: list[str] = []
    for token in _SPLIT.split(body.strip()):
        if not token:
            continue
        move = _normalize(token, kind)
        if move is None:
            unknown.append(token)
        else:
            moves.append(move)
    issues = []
    if unknown:
        shown = " ".join(unknown[:5])[:80]
        issues.append(f"{len(unknown)} word(s) that are not moves ignored: {shown}")
    if not moves:
        issues.append("no moves found")
    if len(moves) > max_moves:
        issues.append(f"{len(moves)} moves cut to {max_moves}")
        moves = moves[:max_moves]
    return moves, issues


def _normalize(token: str, kind: str) -> str | None:
    if kind == "sudoku":
        m = _SUDOKU_MOVE.match(token)
        return f"r{m.group(1)}c{m.group(2)}={m.group(3)}" if m else None
    word = token.upper().strip(".")
    word = _ALIASES.get(word, word)
    return word if word in DIRECTIONS else None


S = TypeVar("S", bound=Hashable)


def bfs_path(start: S, done: Callable[[S], bool], neighbors: Callable[[S], Iterable[tuple[str, S]]],
             limit: int = 200_000) -> list[str] | None:
    """A shortest move sequence from ``start`` to a state where ``done`` holds (None: unreachable)."""
    if done(start):
        return []
    parent: dict[S, tuple[S, str] | None] = {start: None}
    queue = deque([start])
    while queue and len(parent) <= limit:
        state = queue.popleft()
        for move, nxt in neighbors(state):
            if nxt in parent:
                continue
            parent[nxt] = (state, move)
            if done(nxt):
                path = []
                cur: S = nxt
                while parent[cur] is not None:
                    prev, mv = parent[cur]  # type: ignore[misc]
                    path.append(mv)
                    cur = prev
                return path[::-1]
            queue.append(nxt)
    return None
