"""Call plans: which calls an assert test will make, known from its source, so that the judge
can ask the program process for all of them in one message.

The judge (``worker/judge.py``) calls the program's functions across processes, one round
trip per call. Most tests of a dataset are straight-line code calling a function with literal
arguments (``assert candidate([1, 2], 3) == 4``): what they call, with what, and in which order
is fixed by the source. For such a test the plan lists those calls; the judge sends the plans
of a run of consecutive tests in one batch, and the program process answers the calls in order,
one message each, while the judge goes through the tests, so a job waits for the program
process about once instead of once per call. A test whose calls the source does not fix
(loops, conditions, short-circuits, computed arguments, a program function passed as a value)
has no plan and is run with live calls, as are the tests after it in the same run.

Plans never change a verdict: the judge still evaluates every test itself, checks that each call
the test makes is the next planned one (same function, same arguments), and otherwise drops the
rest of the batch and goes on with live calls. Computed here, in the caller, next to the
compiled tests (``testcode.py``).
"""

from __future__ import annotations

import ast
from typing import Any

from .worker.plaindata import NotPlainData, to_tree

# Nodes a planned test may contain: their children are evaluated in ``ast.iter_child_nodes``
# order, always and exactly once (no short-circuit, no loop, no new scope).
_ORDERED = (ast.Call, ast.Compare, ast.BinOp, ast.UnaryOp, ast.Tuple, ast.List, ast.Subscript,
            ast.Attribute, ast.Assign, ast.Assert, ast.Expr, ast.Name, ast.Constant, ast.keyword,
            ast.Slice, ast.operator, ast.unaryop, ast.cmpop, ast.expr_context)


def plan_test(source: str) -> dict[str, Any] | None:
    """``{"calls": [[name, args, kwargs], ...], "names": [...], "stores": [...]}`` or None.

    ``calls``: the calls with literal arguments to plain names, in evaluation order (which of
    them are the program's is decided by the judge at run time); ``names``: the other names the
    test reads (none may be a program function); ``stores``: the names it assigns.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return None
    calls: list[list[Any]] = []
    names: set[str] = set()
    stores: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assert):
            if stmt.msg is not None and any(isinstance(n, ast.Call) for n in ast.walk(stmt.msg)):
                return None  # evaluated only when the test fails
            nodes = [stmt.test]
            if stmt.msg is not None:
                names.update(n.id for n in ast.walk(stmt.msg) if isinstance(n, ast.Name))
        elif isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
            nodes = [stmt.value]
            stores.update(t.id for t in stmt.targets)  # type: ignore[union-attr]
        elif isinstance(stmt, ast.Expr):
            nodes = [stmt.value]
        else:
            return None
        for node in nodes:
            try:
                if not _walk(node, calls, names):
                    return None
            except RecursionError:  # (compile() accepted it; a plan is only an optimisation)
                return None
    return {"calls": calls, "names": sorted(names), "stores": sorted(stores)}


def _walk(node: ast.AST, calls: list[list[Any]], names: set[str]) -> bool:
    """Post-order over ``node``, in evaluation order; False if the order is not fixed."""
    if not isinstance(node, _ORDERED):
        return False
    if isinstance(node, ast.Compare) and len(node.ops) > 1:
        return False  # a chained comparison short-circuits
    if isinstance(node, ast.Call):
        literal = _literal_call(node)
        if literal is not None:
            calls.append(literal)
            return True
    if isinstance(node, ast.Name):
        names.add(node.id)
        return True
    return all(_walk(child, calls, names) for child in ast.iter_child_nodes(node))


def _literal_call(node: ast.Call) -> list[Any] | None:
    if not isinstance(node.func, ast.Name):
        return None
    try:
        args = [ast.literal_eval(a) for a in node.args if not isinstance(a, ast.Starred)]
        if len(args) != len(node.args) or any(k.arg is None for k in node.keywords):
            return None
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
        return [node.func.id, to_tree(args), to_tree(kwargs)]
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, NotPlainData):
        return None


def plan_tests(tests: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """One plan (or None) per test of a request (I/O tests: None)."""
    return [plan_test(t["code"]) if t.get("kind", "assert") == "assert" else None for t in tests]
