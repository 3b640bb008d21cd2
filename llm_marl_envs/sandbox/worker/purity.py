"""Which test sets the fork server may judge itself: code that cannot change the server.

A judge process per job costs a clone, its copy-on-write faults and its exit, as much as the
program process. The fork server can run the judge (:mod:`.judge`) itself, without a second
process (:mod:`.served`), but only for tests that can neither change the fork server nor
keep it busy: test code of one job must not be able to change how a later job is judged, or
read anything of it. :func:`servable` accepts a set-up and tests only if every statement and
expression is one of a small set whose effect is confined to the job's own test namespace
(a fresh dict) and whose cost is bounded by the size of the data involved:

* statements: ``assert``, assignment to plain names, an expression; in the set-up also
  ``import math`` (the server's own copy, already loaded) and imports of standard modules
  whose names nothing uses afterwards (dropped: their only effect, binding the name, is
  unobservable; ``import random`` in HumanEval's set-ups);
* expressions: constants, names, tuple/list/set/dict displays, comparisons, ``and``/``or``/
  ``not``, ``x if c else y``, ``+ - / //`` and unary ``- + ~``, arithmetic on numeric literals
  within bounds (``3 * 5 * 7``, ``0**0``), subscripts and slices, calls
  of plain names (the program's functions, which run in the program process, or the pure
  builtins of ``SAFE_BUILTINS``), and ``math.<f>`` for the functions of ``SAFE_MATH``.

Excluded, so that nothing can loop, allocate without bound or reach an object of the server:
attribute access (but ``math.<f>``), ``* ** % << >>`` but on bounded literals (``[0] * 10**9``), comprehensions,
lambdas, f-strings, loops, ``range``, ``exec``/``eval``/``getattr``/``open``/``__import__``
and every other builtin not listed. Nor may test code hash anything but constants: ``set``,
``frozenset`` and ``dict`` are called only on literals, and the elements of a set display and
the keys of a dict display are literals (the program's ints ``n * (2**61 - 1)`` all have one
hash: ``set(f(x))`` on them is one quadratic C call that no timer interrupts; a judge process
is killed at its deadline wherever it is). Anything else is judged in a judge process, as before.
"""

from __future__ import annotations

import builtins
import functools
from typing import Any

SAFE_BUILTINS = frozenset({
    "abs", "all", "any", "bool", "chr", "complex", "dict", "float", "frozenset", "int", "isinstance",
    "len", "list", "max", "min", "ord", "repr", "reversed", "round", "set", "sorted", "str", "sum",
    "tuple", "type", "print", "Exception", "ValueError", "TypeError", "KeyError",
    "IndexError", "ZeroDivisionError", "AssertionError", "NotImplemented", "Ellipsis",
})
SAFE_MATH = frozenset({"isclose", "fabs", "sqrt", "isnan", "isinf", "isfinite", "floor", "ceil", "trunc",
                       "inf", "nan", "pi", "e", "tau", "log", "exp", "sin", "cos", "tan", "atan"})
SAFE_MODULES = frozenset({"math"})
# Standard modules a set-up may import without using them (the import cannot fail).
_KNOWN_STDLIB = frozenset({"random", "copy", "string", "collections", "itertools", "functools", "re",
                           "heapq", "bisect", "operator", "typing", "math", "sys", "os", "json", "numbers",
                           "fractions", "decimal", "statistics", "hashlib", "datetime"})
_MAX_ROUND_DIGITS = 100
_MAX_CONSTANT = float(2 ** 256)  # numeric literals and arithmetic on them, in magnitude


# ``ast`` is imported inside the functions: the fork server imports this module before its
# zygote is forked (later, the worker's own directory may be hidden), ``ast`` only once jobs
# run, so that job processes do not carry it.


@functools.lru_cache(maxsize=1)
def _kinds() -> Any:
    import ast
    import types

    return types.SimpleNamespace(
        binops=(ast.Add, ast.Sub, ast.Div, ast.FloorDiv),
        unary=(ast.USub, ast.UAdd, ast.Not, ast.Invert),
        simple=(ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Compare, ast.BoolOp, ast.IfExp,
                ast.Subscript, ast.Slice, ast.Load, ast.Store, ast.boolop, ast.cmpop, ast.expr_context))


def servable(setup: str, tests: list[str]) -> Any:
    """The set-up to run in the fork server (an ``ast.Module``, unused imports dropped), or None
    if the set-up or a test is not of the safe kind above."""
    import ast

    try:
        setup_tree = ast.parse(setup, "<setup>")
        test_trees = [ast.parse(source) for source in tests]
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    used: set[str] = set()
    try:
        for tree in [setup_tree, *test_trees]:
            used.update(n.id for n in ast.walk(tree) if isinstance(n, ast.Name))
            used.update(n.value.id for n in ast.walk(tree)
                        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name))
        body = []
        for stmt in setup_tree.body:
            kept = _setup_statement(stmt, used)
            if kept is False:
                return None
            if kept:
                body.append(stmt)
        if not all(_statement(stmt) for tree in test_trees for stmt in tree.body):
            return None
    except RecursionError:
        return None
    setup_tree.body = body
    return setup_tree


def _setup_statement(stmt: Any, used: set[str]) -> bool | None:
    """True: keep; None: drop (an unused import); False: not servable."""
    import ast

    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        if isinstance(stmt, ast.ImportFrom):
            if stmt.level or stmt.module is None or any(a.name == "*" for a in stmt.names):
                return False
            modules = [stmt.module]
        else:
            modules = [a.name for a in stmt.names]
        bound = [(a.asname or a.name).split(".")[0] for a in stmt.names]
        if isinstance(stmt, ast.Import) and all(m in SAFE_MODULES for m in modules) and all(
                (a.asname or a.name) in SAFE_MODULES for a in stmt.names):
            return True
        if all(m.split(".")[0] in _KNOWN_STDLIB for m in modules) and not any(b in used for b in bound):
            return None
        return False
    return _statement(stmt)


def _statement(stmt: Any) -> bool:
    import ast

    if isinstance(stmt, ast.Assert):
        return _expr(stmt.test) and (stmt.msg is None or _expr(stmt.msg))
    if isinstance(stmt, ast.Assign):
        return all(isinstance(t, ast.Name) and t.id not in SAFE_MODULES for t in stmt.targets) and _expr(stmt.value)
    if isinstance(stmt, ast.Expr):
        return _expr(stmt.value)
    return False


def _expr(node: Any) -> bool:
    import ast

    if isinstance(node, ast.Name):
        return node.id in SAFE_BUILTINS or node.id in SAFE_MODULES or not _is_other_builtin(node.id)
    if isinstance(node, ast.Call):
        return _call(node)
    if isinstance(node, ast.Attribute):
        return (isinstance(node.value, ast.Name) and node.value.id in SAFE_MODULES and node.attr in SAFE_MATH
                and isinstance(node.ctx, ast.Load))
    if isinstance(node, ast.BinOp):
        if _constant_number(node) is not None:
            return True
        return isinstance(node.op, _kinds().binops) and _expr(node.left) and _expr(node.right)
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, _kinds().unary) and _expr(node.operand)
    if isinstance(node, ast.Dict):
        return all(k is not None and _literal(k) for k in node.keys) and all(map(_expr, node.values))
    if isinstance(node, ast.Set):
        return all(map(_literal, node.elts))
    if isinstance(node, _kinds().simple):
        return all(_expr(child) for child in ast.iter_child_nodes(node))
    return False


def _constant_number(node: Any) -> float | None:
    """The magnitude bound of arithmetic on numeric literals (``3 * 5 * 7``, ``0**0``, ``-2``), or
    None if ``node`` is not such arithmetic or could grow large (``10 ** 10 ** 10``)."""
    import ast

    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return abs(float(node.value)) if abs(node.value) <= _MAX_CONSTANT else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _constant_number(node.operand)
    if not isinstance(node, ast.BinOp):
        return None
    left, right = _constant_number(node.left), _constant_number(node.right)
    if left is None or right is None:
        return None
    try:
        if isinstance(node.op, ast.Pow):
            if not (isinstance(node.right, ast.Constant) and type(node.right.value) is int and 0 <= node.right.value <= 64):
                return None
            bound = max(left, 1.0) ** node.right.value
        elif isinstance(node.op, ast.Mult):
            bound = max(left, 1.0) * max(right, 1.0)
        elif isinstance(node.op, (ast.Add, ast.Sub, ast.Mod, ast.FloorDiv, ast.Div)):
            bound = left + right + 1.0
        else:
            return None
    except OverflowError:
        return None
    return bound if bound <= _MAX_CONSTANT else None


def _call(node: Any) -> bool:
    import ast

    func = node.func
    if not _expr(func) or not isinstance(func, (ast.Name, ast.Attribute)):
        return False
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        return False
    if not all(_expr(a) for a in node.args) or not all(_expr(k.value) for k in node.keywords):
        return False
    if isinstance(func, ast.Name) and func.id in SAFE_BUILTINS:
        name = func.id
        if name in _HASHING:
            return not node.keywords and all(map(_literal, node.args))
        if name == "sorted":
            return len(node.args) == 1 and all(k.arg == "reverse" for k in node.keywords)
        if node.keywords:
            return False
        if name == "sum":  # sum(lists, []) is quadratic
            return len(node.args) == 1
        if name == "round":  # round(x, -10**9) builds a huge power of ten
            return len(node.args) == 1 or (
                len(node.args) == 2 and isinstance(node.args[1], ast.Constant)
                and type(node.args[1].value) is int and abs(node.args[1].value) <= _MAX_ROUND_DIGITS)
        if name == "type":  # type(name, bases, dict) makes a class
            return len(node.args) == 1
    return True


_HASHING = frozenset({"set", "frozenset", "dict"})  # builtins that hash what they are given


def _literal(node: Any) -> bool:
    """Constant data: a constant, a display of constants (dict: constant keys and values), a signed number."""
    import ast

    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(map(_literal, node.elts))
    if isinstance(node, ast.Dict):
        return all(k is not None and _literal(k) for k in node.keys) and all(map(_literal, node.values))
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) and _literal(node.operand)


def _is_other_builtin(name: str) -> bool:
    return hasattr(builtins, name) or name.startswith("__")


__all__ = ["SAFE_BUILTINS", "SAFE_MATH", "SAFE_MODULES", "servable"]
