"""AST facts about agent-written Python: definitions, returns, calls, thin wrappers.

Nothing here executes code; everything is decided from :mod:`ast`, so the checks see
through formatting and comments (a regex would not). Used by the helper/main reward.

- :func:`split_top_level` cuts a module into top-level chunks (one per statement), even
  when the whole module does not parse: then it splits at column-0 ``def``/``class``/
  decorator lines and parses each chunk on its own, so a broken ``main`` does not hide a
  well-formed ``aux``.
- :func:`returns_value` -- the function has ``return <value>`` (or ``yield``) in its own body.
- :func:`call_usage` -- how a function uses another one's calls: called? return value used
  or thrown away?
- :func:`is_thin_wrapper` -- the function does nothing except call the given helpers.
- :func:`is_trivial` -- a function whose body only returns a constant or a parameter.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "CallUsage",
    "Chunk",
    "FunctionNode",
    "call_usage",
    "is_thin_wrapper",
    "is_trivial",
    "parse_or_none",
    "returns_value",
    "split_top_level",
    "syntax_error_of",
]

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
_DEF_LINE = re.compile(r"^(?:async[ \t]+def|def|class)\b|^@")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def parse_or_none(code: str) -> ast.Module | None:
    """``ast.parse(code)`` or None when it is not valid Python (never raises)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def syntax_error_of(code: str) -> str | None:
    """``"line L, column C: message"`` for code that does not parse, None when it parses."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(code)
    except SyntaxError as exc:
        return f"line {exc.lineno}, column {exc.offset}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


@dataclass(frozen=True)
class Chunk:
    """One top-level piece of a module.

    ``node`` is its parsed statement (None when the chunk does not parse on its own);
    ``kind`` is "function", "class", "import", "assign", "other" or "broken".
    """

    text: str
    node: ast.stmt | None
    kind: str

    @property
    def name(self) -> str | None:
        """The defined function/class name, if the chunk is a definition."""
        if isinstance(self.node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return self.node.name
        return None


def _kind(node: ast.stmt | None) -> str:
    if node is None:
        return "broken"
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return "function"
    if isinstance(node, ast.ClassDef):
        return "class"
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return "import"
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return "assign"
    return "other"


def split_top_level(code: str) -> list[Chunk]:
    """Cut ``code`` into top-level chunks; works on code that does not parse (see module doc)."""
    lines = code.split("\n")
    tree = parse_or_none(code)
    if tree is not None:
        chunks = []
        starts = [min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", [])]) for n in tree.body]
        for i, node in enumerate(tree.body):
            end = node.end_lineno or node.lineno
            text = "\n".join(lines[starts[i] - 1 : end])
            chunks.append(Chunk(text, node, _kind(node)))
        return chunks
    # does not parse: split at column-0 def/class/decorator lines (a decorator keeps its def)
    cut_points = []
    for i, ln in enumerate(lines):
        if _DEF_LINE.match(ln) and not (i > 0 and lines[i - 1].startswith("@") and not ln.startswith("@")):
            cut_points.append(i)
    if not cut_points or cut_points[0] != 0:
        cut_points.insert(0, 0)
    chunks = []
    for a, b in zip(cut_points, cut_points[1:] + [len(lines)]):
        text = "\n".join(lines[a:b]).rstrip()
        if not text.strip():
            continue
        sub = parse_or_none(text)
        if sub is not None and len(sub.body) == 1:
            chunks.append(Chunk(text, sub.body[0], _kind(sub.body[0])))
        elif sub is not None:  # several statements that parse (imports before the first def)
            chunks.extend(split_top_level(text))
        else:
            chunks.append(Chunk(text, None, "broken"))
    return chunks


def _own_nodes(fn: ast.AST) -> Iterable[ast.AST]:
    """Nodes in ``fn``'s body, not descending into nested functions, lambdas or classes."""
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _SCOPES):
            stack.extend(ast.iter_child_nodes(node))


def returns_value(fn: FunctionNode) -> bool:
    """Whether ``fn`` has ``return <expr>`` (``return None`` counts) or ``yield`` in its own body."""
    return any(
        (isinstance(n, ast.Return) and n.value is not None) or isinstance(n, (ast.Yield, ast.YieldFrom))
        for n in _own_nodes(fn)
    )


def _body_without_docstring(fn: FunctionNode) -> list[ast.stmt]:
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(
        body[0].value.value, str
    ):
        body = body[1:]
    return body


@dataclass(frozen=True)
class CallUsage:
    """How one function uses another (``name``).

    ``calls``: number of calls ``name(...)`` anywhere inside the function (nested scopes
    included); ``references``: other loads of ``name`` (passed as a value, e.g.
    ``map(aux, xs)``); ``ignored_calls``: calls whose value is thrown away -- an expression
    statement ``aux(x)``, or ``v = aux(x)`` where ``v`` is never read afterwards.
    """

    calls: int
    references: int
    ignored_calls: int

    @property
    def used(self) -> bool:
        """The function is called or referenced."""
        return self.calls + self.references > 0

    @property
    def result_ignored(self) -> bool:
        """At least one call's value is thrown away."""
        return self.ignored_calls > 0


def call_usage(fn: FunctionNode, name: str) -> CallUsage:
    """How ``fn`` uses the function ``name`` (see :class:`CallUsage`)."""
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(fn):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    calls = ignored = refs = 0
    loads: dict[str, list[tuple[int, int]]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            loads.setdefault(node.id, []).append((node.lineno, node.col_offset))
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
            calls += 1
            parent = parents.get(id(node))
            if isinstance(parent, ast.Expr):
                ignored += 1
            elif isinstance(parent, (ast.Assign, ast.AnnAssign)):
                targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                if names and len(names) == len(targets):
                    after = (parent.end_lineno or parent.lineno, parent.end_col_offset or 0)
                    read = any(pos > after or _in_loop(parent, parents) for n in names for pos in loads.get(n, []))
                    if not read:
                        ignored += 1
        elif isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
            parent = parents.get(id(node))
            if not (isinstance(parent, ast.Call) and parent.func is node):
                refs += 1
    return CallUsage(calls, refs, ignored)


def _in_loop(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """Whether ``node`` sits inside a loop (a read earlier in the loop body may see it)."""
    cur = parents.get(id(node))
    while cur is not None and not isinstance(cur, _SCOPES):
        if isinstance(cur, (ast.For, ast.AsyncFor, ast.While)):
            return True
        cur = parents.get(id(cur))
    return False


#: nodes a thin wrapper may contain besides calls to the helpers (no work of its own)
_PLUMBING = (
    ast.Return, ast.Assign, ast.AnnAssign, ast.Expr, ast.Pass, ast.Name, ast.Constant,
    ast.Starred, ast.keyword, ast.Load, ast.Store, ast.Import, ast.ImportFrom, ast.alias,
)  # fmt: skip


def is_thin_wrapper(fn: FunctionNode, helpers: Iterable[str]) -> bool:
    """Whether ``fn`` calls a helper and otherwise does no work of its own.

    Thin: after dropping the docstring, the body consists only of plumbing -- ``return``,
    assignments, expression statements, names, constants, ``pass``, imports -- around calls
    to the helpers whose arguments are themselves plumbing (names, constants, starred
    parameters) or helper calls. Any operator, comparison, control flow, subscript,
    attribute, comprehension, literal container or call to a non-helper counts as work and
    makes ``fn`` not thin. A function that calls no helper is not a thin wrapper (it is
    just not cooperating, which the "calls the helper" term scores).
    """
    helpers = set(helpers)
    body = _body_without_docstring(fn)
    if not body:
        return False
    called = False
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                if isinstance(node.func, ast.Name) and node.func.id in helpers:
                    called = True
                    continue
                return False
            if node is not None and isinstance(node, ast.Name) and node.id in helpers:
                continue
            if not isinstance(node, _PLUMBING):
                return False
    return called


def is_trivial(fn: FunctionNode) -> bool:
    """Whether ``fn`` does no work: its body (docstring dropped) is empty, ``pass``/``...``,
    or a single ``return`` of nothing, a constant, or one of its parameters."""
    body = [s for s in _body_without_docstring(fn) if not isinstance(s, ast.Pass)]
    if not body:
        return True
    if len(body) != 1:
        return False
    stmt = body[0]
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return True
    if isinstance(stmt, ast.Return):
        params = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
        params |= {a.arg for a in (fn.args.vararg, fn.args.kwarg) if a is not None}
        value = stmt.value
        return value is None or isinstance(value, ast.Constant) or (isinstance(value, ast.Name) and value.id in params)
    return False
