"""Comparing a program's stdout with the expected output of an I/O test (in the caller).

Modes: ``exact`` (byte-for-byte text), ``lines`` (default, as most online judges and
LiveCodeBench: trailing whitespace of every line and trailing blank lines are ignored) and
``tokens`` (whitespace-separated tokens, as APPS' fallback; with ``float_tolerance``,
tokens that both parse as numbers are equal when within that absolute or relative error).

The output may be given as ``bytes`` (what the fork server read from the program, decoded as
UTF-8 with replacement characters): then it is decoded and compared piece by piece, so that the
memory it takes stays near the size of the expected output and of one piece, whatever the
program printed (an output that decodes to four times its size, or that is four million empty
lines, is never held whole as text or as a list of lines).
"""

from __future__ import annotations

import codecs
import math
from collections.abc import Iterator

PIECE_BYTES = 1 << 16  # bytes of output decoded at a time


def outputs_match(got: str | bytes, expected: str, mode: str = "lines", float_tolerance: float | None = None) -> bool:
    if isinstance(got, (bytes, bytearray, memoryview)):
        return _stream_match(got, expected, mode, float_tolerance)
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


# -- bytes: piece by piece -----------------------------------------------------------------------

_NO_MATCH = "\x00\x01"  # ends a token too long to equal any expected one


def _stream_match(got: bytes | bytearray | memoryview, expected: str, mode: str, tol: float | None) -> bool:
    data = memoryview(got)
    if mode == "exact":
        return _exact(data, expected)
    if mode == "lines":
        return _lines_match(data, _lines(expected))
    if mode == "tokens":
        want = expected.split()
        longest = max(map(len, want), default=0) + (1 << 20 if tol is not None else 0)  # (long numbers)
        seen = 0
        for batch in _parts(data, longest):
            if seen + len(batch) > len(want):
                return False
            if batch != want[seen:seen + len(batch)] and not all(
                    _token_equal(x, y, tol) for x, y in zip(batch, want[seen:seen + len(batch)])):
                return False
            seen += len(batch)
        return seen == len(want)
    raise ValueError(f"unknown comparison mode {mode!r}")


def _pieces(data: memoryview) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    for start in range(0, len(data), PIECE_BYTES):
        yield decoder.decode(data[start:start + PIECE_BYTES])
    yield decoder.decode(b"", final=True)


def _exact(data: memoryview, expected: str) -> bool:
    at = 0
    for piece in _pieces(data):
        if expected[at:at + len(piece)] != piece:
            return False
        at += len(piece)
    return at == len(expected)


def _lines_match(data: memoryview, want: list[str]) -> bool:
    """``_lines(data decoded) == want``, a piece at a time: a line ``L`` right-strips to ``W`` iff
    it starts with ``W`` and the rest is whitespace, so each line is matched as it comes, against
    the expected line at the same place (past the expected lines: an empty one), and never held."""
    line = at = 0  # the line being read, and how much of its expected line it has matched so far
    target = want[0] if want else ""
    for piece in _pieces(data):
        for k, segment in enumerate(piece.split("\n")):
            if k:  # a newline: the line is complete
                if at != len(target):
                    return False
                line, at = line + 1, 0
                target = want[line] if line < len(want) else ""
            n = min(len(segment), len(target) - at)
            if n and segment[:n] != target[at:at + n]:
                return False
            at += n
            if len(segment) > n and not segment[n:].isspace():
                return False
    return at == len(target) and line + 1 >= len(want)


def _parts(data: memoryview, longest: int) -> Iterator[list[str]]:
    """The whitespace-separated tokens of ``data``, a batch per piece. One longer than ``longest``
    is cut to ``longest`` characters and marked so that it equals none: what is kept of a token
    being written stays that short."""
    carry = ""
    for piece in _pieces(data):
        text = carry + piece
        parts = text.split()
        carry = parts.pop() if parts and not text[-1].isspace() else ""
        yield [_bounded(part, longest) for part in parts]
        carry = _bounded(carry, longest)
    if carry:
        yield [carry]


def _bounded(text: str, longest: int) -> str:
    return text if len(text) <= longest + len(_NO_MATCH) else text[:longest] + _NO_MATCH
