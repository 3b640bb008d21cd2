"""The role instructions and puzzle descriptions ``planning/grid_v0`` shows its agents."""

from __future__ import annotations

__all__ = ["PUZZLE_RULES", "plan_instructions", "tool_instructions"]

PUZZLE_RULES: dict[str, str] = {
    "plan_path": (
        "Plan-Path: move the agent A to the goal G. '#' is a wall, '.' is free. "
        "Moves: U (up), D (down), L (left), R (right); a move into a wall or off the grid is skipped."
    ),
    "sokoban": (
        "Sokoban: push every box onto a target. '@' player, '$' box, 'T' target, '*' box on a target, "
        "'+' player on a target, '#' wall, '.' floor. Moves: U, D, L, R; walking into a box pushes it "
        "if the cell behind it is free; other blocked moves are skipped."
    ),
    "sudoku": (
        "Sudoku 4x4: fill the grid so every row, column and 2x2 box holds 1, 2, 3 and 4. '.' is empty. "
        "A move r<row>c<col>=<digit> (1-based, e.g. r1c2=3) writes a digit (=0 clears); writing on a "
        "given cell or a digit already in the row, column or box is skipped."
    ),
}


def plan_instructions(kind: str, with_tool: bool) -> str:
    tool = " A teammate's program reads the state and prints a plan you can use." if with_tool else ""
    return (
        f"You are the plan agent of a puzzle team. {PUZZLE_RULES[kind]}{tool} "
        "Answer with the moves to make, space separated, inside <moves>...</moves>."
    )


def tool_instructions(kind: str) -> str:
    return (
        f"You are the tool agent of a puzzle team. {PUZZLE_RULES[kind]} Write a Python program that "
        "reads the puzzle from standard input (first line: the puzzle name, then the grid rows) and "
        "prints the moves that solve it, space separated (search it, e.g. BFS). Answer with one "
        "```python block; the plan agent sees what your program prints."
    )
