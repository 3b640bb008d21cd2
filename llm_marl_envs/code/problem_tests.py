"""Examples parsed from a function-style (HumanEval-shaped) problem's prompt, as tests.

MARS2's search needs a *public* set an agent's program is run on during the search and a
*hidden* set that decides the final score; :mod:`llm_marl_envs.code.test_sets` builds both
(disjoint, by :mod:`llm_marl_envs.data.test_split`). This module parses the public
candidates: the examples written in the prompt, parsed into asserts:

- doctest style: ``>>> f(args)`` (with ``...`` continuation lines) followed by the
  expected output lines (no output line: the call returns ``None``, as in doctest);
- MBPP's prompt style: ``>>> assert f(args) == value``;
- one-line styles: ``f(args) == value``, ``f(args) ==> value``, ``f(args) => value``,
  ``f(args) -> value``, ``f(args) ➞ value``, ``f(args) = value``,
  ``f(args) should return value``.

Only calls of the entry point whose arguments and expected value are Python literals are
kept (``ast.literal_eval``), so prose and definitions (``fib4(n) -> fib4(n-1) + ...``)
are ignored; duplicates are dropped. Nothing here runs code: parsing only.

Each public test is an assert that compares with a tolerance for floats (``1e-6``,
recursively through lists, tuples and dicts) and, when it fails, carries the call, the
expected and the actual value in its message as ``[io] {"input", "expected", "got"}``
JSON, which :mod:`llm_marl_envs.code.feedback` shows as a wrong answer with
input / expected / got. Other ``>>> assert`` lines (:func:`prompt_asserts`) are public
tests as written. :func:`io_assert` rewrites a ``check`` assert
``candidate(...) == value`` into the same reporting form.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass

from llm_marl_envs.code.feedback import IO_MESSAGE_PREFIX

__all__ = ["Example", "PUBLIC_SETUP", "example_assert", "io_assert", "parse_examples", "prompt_asserts"]

_DOCSTRING_END = re.compile(r"\"\"\"|'''")
_SEPARATORS = re.compile(r"^\s*(?:==>|=>|->|➞|==|=|should\s+return|returns?)\s*(.+?)\s*\.?\s*$")

#: setup code put in front of every public test (defines the comparison and the message)
PUBLIC_SETUP = f'''
def _io_equal(got, expected):
    if isinstance(expected, float) or isinstance(got, float):
        try:
            return abs(got - expected) <= 1e-6 * max(1.0, abs(expected))
        except TypeError:
            return False
    if isinstance(expected, (list, tuple)) and isinstance(got, (list, tuple)):
        return type(got) is type(expected) and len(got) == len(expected) and all(
            _io_equal(g, e) for g, e in zip(got, expected))
    if isinstance(expected, dict) and isinstance(got, dict):
        return got.keys() == expected.keys() and all(_io_equal(got[k], expected[k]) for k in expected)
    return type(got) is type(expected) and got == expected if isinstance(expected, bool) else got == expected


def _io_message(call, expected, got):
    import json as _json
    try:
        shown = repr(got)
    except Exception as exc:
        shown = f"<unprintable {{type(got).__name__}}: {{type(exc).__name__}}>"
    if len(shown) > 2000:
        shown = shown[:1000] + " ... " + shown[-1000:]
    return {IO_MESSAGE_PREFIX!r} + _json.dumps({{"input": call, "expected": repr(expected), "got": shown}})
'''


@dataclass(frozen=True)
class Example:
    """One example call: ``call`` (source, e.g. ``"f(1, 2)"``) should evaluate to ``expected`` (source)."""

    call: str
    expected: str


def parse_examples(prompt: str, entry_point: str) -> list[Example]:
    """The literal examples of ``entry_point`` written in ``prompt`` (see the module docstring)."""
    lines = prompt.splitlines()
    found: list[Example] = []
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped.startswith(">>>"):
            call_lines = [stripped[3:].strip()]
            i += 1
            while i < len(lines) and lines[i].strip().startswith("..."):
                call_lines.append(lines[i].strip()[3:].strip())
                i += 1
            expected_lines = []
            while i < len(lines) and lines[i].strip() and not lines[i].strip().startswith(">>>"):
                line = lines[i].strip()
                end_of_docstring = _DOCSTRING_END.search(line)
                if end_of_docstring:
                    line = line[: end_of_docstring.start()].strip()
                if line:
                    expected_lines.append(line)
                i += 1
                if end_of_docstring:
                    break
            call = " ".join(call_lines)
            if call.startswith("assert ") and not expected_lines:  # MBPP's prompt: ``>>> assert f(x) == y``
                ex = _assert_example(call, entry_point)
            else:  # doctest prints nothing for a call returning None
                ex = _example(call, " ".join(expected_lines) or "None", entry_point)
            if ex:
                found.append(ex)
            continue
        ex = _one_line_example(stripped, entry_point)
        if ex:
            found.append(ex)
        i += 1
    return list(dict.fromkeys(found))


def prompt_asserts(prompt: str, entry_point: str) -> list[str]:
    """``>>> assert ...`` lines of the prompt that are not a literal example (e.g. MBPP's
    ``assert set(f(x)) == set(y)``), with the entry point renamed ``candidate``: they are
    shown to the agents, so they are public tests too."""
    out = []
    for line in prompt.splitlines():
        src = line.strip()[3:].strip() if line.strip().startswith(">>>") else ""
        if not src.startswith("assert ") or _assert_example(src, entry_point) is not None:
            continue
        try:
            tree = ast.parse(src)
        except (SyntaxError, ValueError):
            continue
        renamed = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == entry_point]
        if not renamed:
            continue
        for n in renamed:
            n.id = "candidate"
        out.append(ast.unparse(tree))
    return list(dict.fromkeys(out))


def example_assert(example: Example, entry_point: str) -> str:
    """The assert source for one example (calls ``candidate`` instead of ``entry_point``)."""
    call = _rename_call(example.call, entry_point)
    return (
        f"assert _io_equal(_got := {call}, _exp := {example.expected}), "
        f"_io_message({example.call!r}, _exp, _got)"
    )


# ---------------------------------------------------------------------------- internals
def _parse_expr(src: str) -> ast.expr | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(src.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None


def _is_literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return False
    return True


def _example(call: str, expected: str, entry_point: str) -> Example | None:
    node = _parse_expr(call)
    exp = _parse_expr(expected)
    if node is None or exp is None or not _is_literal(exp):
        return None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == entry_point):
        return None
    if not all(_is_literal(a) for a in node.args) or not all(_is_literal(k.value) for k in node.keywords):
        return None
    if any(k.arg is None for k in node.keywords):
        return None
    return Example(ast.unparse(node), ast.unparse(exp))


def _assert_example(src: str, entry_point: str) -> Example | None:
    """``assert f(args) == value`` -> Example, else None."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return None
    node = tree.body[0] if len(tree.body) == 1 else None
    if not (isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare)):
        return None
    test = node.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return None
    return _example(ast.unparse(test.left), ast.unparse(test.comparators[0]), entry_point)


def _one_line_example(line: str, entry_point: str) -> Example | None:
    start = line.find(entry_point + "(")
    if start < 0 or (start > 0 and (line[start - 1].isalnum() or line[start - 1] == "_")):
        return None
    depth, end = 0, -1
    quote: str | None = None
    for j in range(start + len(entry_point), len(line)):
        ch = line[j]
        if quote:
            if ch == quote and line[j - 1] != "\\":
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                end = j + 1
                break
    if end < 0:
        return None
    m = _SEPARATORS.match(line[end:])
    if not m:
        return None
    return _example(line[start:end], m.group(1), entry_point)


def _rename_call(call: str, entry_point: str) -> str:
    node = ast.parse(call, mode="eval").body
    assert isinstance(node, ast.Call)
    node.func = ast.Name(id="candidate", ctx=ast.Load())
    return ast.unparse(node)


def io_assert(node: ast.Assert, entry_point: str) -> tuple[str, str] | None:
    """``assert candidate(...) == value`` -> (io assert source, call as shown), else None."""
    test = node.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return None
    call = test.left
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "candidate"):
        return None
    shown = ast.Call(func=ast.Name(id=entry_point, ctx=ast.Load()), args=call.args, keywords=call.keywords)
    display = ast.unparse(shown)
    src = (
        f"assert _io_equal(_got := {ast.unparse(call)}, _exp := {ast.unparse(test.comparators[0])}), "
        f"_io_message({display!r}, _exp, _got)"
    )
    return src, display
