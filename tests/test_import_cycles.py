"""No import cycles between the modules of ``baselines`` and ``llm_marl_envs`` (the style guide's rule),
counting imports made only for type checking, read from the source (nothing is imported)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def module_graph(package: str) -> dict[str, set[str]]:
    """module -> the modules of ``package`` it imports (``from a import b`` counts ``a.b`` when it is a module)."""
    files = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
             for p in (ROOT / package).rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            graph[module] |= {n for n in names if n in files and n != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of modules (Tarjan), a package and its own submodules left out."""
    def related(a: str, b: str) -> bool:
        return a.startswith(b + ".") or b.startswith(a + ".")

    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in (w for w in graph[v] if not related(v, w)):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    for package in ("baselines", "llm_marl_envs"):
        assert cycles(module_graph(package)) == [], package


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"p.a": {"p.b"}, "p.b": {"p.a"}, "p.c": {"p.a"}}) == [["p.a", "p.b"]]
