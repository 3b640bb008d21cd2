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
* an assert of a constant expression (``assert True, "..."``: 48 of them in HumanEval) tests
  nothing a program does: it goes to the set-up, where it runs as in ``check`` and is not
  counted as a test. (Whether an assert that uses names depends on the program cannot be told
  from its text: BigCodeBench's ``assert _bcb_case('TestCases', 'test_case_1')`` reaches it
  through a ``unittest`` class.)
* with ``prompt`` (the problem's prompt), the helpers it defines that the tests use (HumanEval/32's
  ``poly``, /38's ``encode_cyclic``, /50's ``encode_shift``: functions with a body, and constants)
  start the set-up, with the prompt's imports they need: the tests call the prompt's own
  definitions, not whatever the program (prompt plus completion) redefined them as, and the
  values the tests hand them (in /38 and /50, the expected strings) never reach the program.

Tests are named ``L<line>`` after their line in the test code. Test code without a
``check`` function is handled the same way at top level (MBPP-style lists of asserts).
"""

from __future__ import annotations

import ast
import textwrap

from .results import AssertTest


def tests_from_check(test_code: str, entry_point: str, prompt: str | None = None) -> tuple[str, list[AssertTest]]:
    """Split ``test_code`` into ``(setup_code, tests)``; raises ValueError if it does not parse.
    ``prompt``: the problem's prompt, whose helpers the tests use come from it (see above)."""
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
        if isinstance(node, ast.Assert) and _constant(node.test):
            setup_parts.append(text)  # tests nothing (see above): it runs in the set-up, as in check
        elif has_assert:
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
    helpers = _prompt_helpers(prompt, entry_point, _names_read(tree)) if prompt else ""
    return helpers + "".join(setup_parts), tests


def _prompt_helpers(prompt: str, entry_point: str, used: set[str]) -> str:
    """The source of the prompt's definitions the tests use (functions with a body, assignments),
    those they use in turn, and the imports these need; "" if the prompt does not parse."""
    try:
        tree = ast.parse(prompt)
    except SyntaxError:
        return ""
    lines = prompt.splitlines(True)
    defined: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name != entry_point and _has_body(node):
            defined[node.name] = node
        elif isinstance(node, ast.Assign):
            for name in _assigned(node) - {entry_point}:
                defined[name] = node
    wanted: set[str] = set()
    todo = [name for name in used if name in defined]
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo += [n for n in _names_read(defined[name]) if n in defined]
    if not wanted:
        return ""
    needed = set().union(*(_names_read(defined[name]) for name in wanted))
    kept = [node for node in tree.body
            if (isinstance(node, (ast.Import, ast.ImportFrom)) and _imported(node) & needed)
            or any(defined.get(name) is node for name in wanted)]
    return "".join(_source(node, tree.body, lines) for node in kept)


def _has_body(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """More than a docstring, ``pass`` or ``...`` (a stub the model is to write is not a helper)."""
    return any(not (_is_docstring(stmt) or isinstance(stmt, ast.Pass)
                    or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)))
               for stmt in node.body)


def _names_read(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _assigned(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _imported(node: ast.Import | ast.ImportFrom) -> set[str]:
    return {(a.asname or a.name).split(".")[0] for a in node.names}


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


def _constant(node: ast.expr) -> bool:
    """An expression of constants only (no name, call, attribute or subscript): its value is fixed."""
    allowed = (ast.Constant, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Tuple, ast.List, ast.Set,
               ast.Dict, ast.boolop, ast.operator, ast.unaryop, ast.cmpop, ast.expr_context)
    return all(isinstance(n, allowed) for n in ast.walk(node))


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
