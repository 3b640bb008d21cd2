"""Planning collaboration tasks: grid puzzles (Plan-Path, Sokoban, 4x4 Sudoku) with a tool agent."""
