"""Comparing a program's stdout with the expected output of an I/O test (in the caller).

Modes: ``exact`` (byte-for-byte text), ``lines`` (default, as most online judges and
LiveCodeBench: trailing whitespace of every line and trailing blank lines are ignored) and
``tokens`` (whitespace-separated tokens, as APPS' fallback; with ``float_tolerance``,
tokens that both parse as numbers are equal when within that absolute or relative error).
"""

from __future__ import annotations

import math


def outputs_match(got: str, expected: str, mode: str = "lines", float_tolerance: float | None = None) -> bool:
    if mode == "exact":
        return got == expected
    if mode == "lines":
        return _lines(got) == _lines(expected)
    if mode == "tokens":
        a, b = got.split(), expected.split()
        if len(a) != len(b):
            return False
        return all(_token_equal(x, y, float_tolerance) for x, y in zip(a, b))
    raise ValueError(f"unknown comparison mode {mode!r}")


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _token_equal(a: str, b: str, tol: float | None) -> bool:
    if a == b:
        return True
    if tol is None:
        return False
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    if math.isnan(x) or math.isnan(y):
        return False
    return math.isclose(x, y, rel_tol=tol, abs_tol=tol)
