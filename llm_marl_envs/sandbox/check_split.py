"""``tests_from_check``: split a HumanEval-style ``check(candidate)`` into one test per assert.

Given the test code of a problem (``METADATA = ...``, ``def check(candidate): ...``) and
its entry point, returns ``(setup, tests)``:

* ``setup`` holds every top-level statement except ``check`` itself and calls to it
  (imports, constants, helper functions), then ``<param> = <entry_point>`` binding check's
  parameter to the program's function, then the statements of ``check``'s body that neither
  contain an assert nor mention the candidate (local imports, constants, ``rng = ...``).
* each ``assert`` of ``check``'s body is one :class:`AssertTest`; a compound statement that
  contains asserts (a ``for`` loop over cases, an ``if``, a ``with``...) is one test; a
  statement that mentions the candidate but asserts nothing (``r = candidate(x)``) is glued
  to the next test, since that test depends on it (or becomes a test of its own at the end).

Tests are named ``L<line>`` after their line in the test code. Test code without a
``check`` function is handled the same way at top level (MBPP-style lists of asserts).
"""

from __future__ import annotations

import ast
import textwrap

from .results import AssertTest


def tests_from_check(test_code: str, entry_point: str) -> tuple[str, list[AssertTest]]:
    """Split ``test_code`` into ``(setup_code, tests)``; raises ValueError if it does not parse."""
    try:
        tree = ast.parse(test_code)
    except SyntaxError as exc:
        raise ValueError(f"the test code does not parse: {exc}") from None
    lines = test_code.splitlines(True)
    check = _find_check(tree)
    setup_parts: list[str] = []
    if check is None:
        body, param, names = tree.body, None, {entry_point}
    else:
        body = check.body
        param = check.args.args[0].arg if check.args.args else None
        names = {entry_point} | ({param} if param else set())
        for node in tree.body:
            if node is check or _is_check_call(node):
                continue
            setup_parts.append(_source(node, tree.body, lines))
        if param and param != entry_point:
            setup_parts.append(f"{param} = {entry_point}\n")
    tests: list[AssertTest] = []
    glued: list[str] = []
    glued_line: int | None = None
    for node in body:
        if isinstance(node, ast.Return):
            break  # the rest of check's body is dead code
        if isinstance(node, (ast.Global, ast.Nonlocal, ast.Pass)) or _is_docstring(node):
            continue
        if check is None and _is_check_call(node):
            continue
        text = _source(node, body, lines)
        has_assert = any(isinstance(n, ast.Assert) for n in ast.walk(node))
        if has_assert:
            line = glued_line if glued_line is not None else node.lineno
            tests.append(AssertTest("".join(glued) + text, name=f"L{line}"))
            glued, glued_line = [], None
        elif _mentions(node, names) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            glued.append(text)
            glued_line = node.lineno if glued_line is None else glued_line
        else:
            setup_parts.append(text)
    if glued:
        tests.append(AssertTest("".join(glued), name=f"L{glued_line}"))
    return "".join(setup_parts), tests


def _find_check(tree: ast.Module) -> ast.FunctionDef | None:
    found = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            found = node
    return found


def _is_check_call(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == "check"
    )


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _mentions(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _source(node: ast.stmt, siblings: list[ast.stmt], lines: list[str]) -> str:
    """The statement's source, dedented, ending with a newline (decorators included)."""
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    end = node.end_lineno or node.lineno
    shares_line = any(
        other is not node and (other.lineno <= end and (other.end_lineno or other.lineno) >= start)
        for other in siblings
    )
    if shares_line:
        text = ast.get_source_segment("".join(lines), node, padded=True) or ""
    else:
        text = "".join(lines[start - 1 : end])
    text = textwrap.dedent(text)
    if not text.endswith("\n"):
        text += "\n"
    if text[:1].isspace():
        # A continuation line (e.g. inside a multi-line string) starts at column 0, so the
        # statement cannot be dedented: an indented block compiles whatever its indentation.
        text = "if True:\n" + text
    return text


tests_from_check.__test__ = False  # type: ignore[attr-defined]  # its name makes pytest collect it
