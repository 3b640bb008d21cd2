"""The function-writing code-problem type and deterministic train/eval splits.

A :class:`CodeProblem` is one function-writing problem in HumanEval's shape: a ``prompt``
(imports, any given helper functions, and the entry point's signature + docstring), the
``entry_point`` name, and ``test`` -- check code defining ``def check(candidate)`` whose
top-level asserts are the tests (``llm_marl_envs.sandbox.tests_from_check`` turns it into
one test per assert). Every loader (:mod:`~llm_marl_envs.data.humaneval`,
:mod:`~llm_marl_envs.data.code_jsonl`, the call-based conversions of
:mod:`~llm_marl_envs.data.call_based`) produces it; this module imports none of them, so
there is no import cycle between the loaders.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["CodeProblem", "split_problems"]


@dataclass(frozen=True)
class CodeProblem:
    """One function-writing problem (HumanEval shape).

    Attributes:
        task_id: unique id, e.g. ``"HumanEval/0"``.
        prompt: what the model sees: imports, given helper functions, and the entry point's
            signature with its docstring (no body).
        entry_point: name of the function to write.
        test: check code defining ``def check(candidate)`` (plus any setup it needs).
        canonical_solution: HumanEval-style reference *body* (``prompt + canonical_solution``
            is a complete program), or None when the dataset has no reference.
        reference_program: a complete program defining the entry point, or None; for
            HumanEval it is ``prompt + canonical_solution``.
        source: which loader produced it ("humaneval", "coop_jsonl", "mbpp_jsonl"...).
        metadata: anything else the record carried (read-only use).
    """

    task_id: str
    prompt: str
    entry_point: str
    test: str
    canonical_solution: str | None = None
    reference_program: str | None = None
    source: str = "custom"
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def entry_signature(self) -> str:
        """``def name(params) -> ret:`` of the entry point as written in the prompt."""
        fn = self.entry_function()
        if fn is None:
            return f"def {self.entry_point}(...):"
        ret = f" -> {ast.unparse(fn.returns)}" if fn.returns is not None else ""
        prefix = "async def" if isinstance(fn, ast.AsyncFunctionDef) else "def"
        return f"{prefix} {fn.name}({ast.unparse(fn.args)}){ret}:"

    def entry_function(self) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The entry point's AST node in the prompt (a top-level function, or a method of a
        top-level class such as LeetCode's ``Solution``), or None if the prompt does not parse."""
        found = self._entry_nodes()
        return found[1] if found else None

    def entry_class(self) -> str | None:
        """Name of the class whose method the entry point is (``"Solution"``), or None."""
        found = self._entry_nodes()
        return found[0].name if found and isinstance(found[0], ast.ClassDef) else None

    def prelude(self) -> str:
        """The prompt without the entry point's stub (or its class): imports and given helpers.

        The code tasks put this in front of the agents' code so that what the prompt
        provides (``from typing import List``, HumanEval/32's ``poly``...) is available.
        """
        found = self._entry_nodes()
        if found is None:
            return ""
        outer = found[0]
        lines = self.prompt.split("\n")
        start = min([outer.lineno] + [d.lineno for d in outer.decorator_list]) - 1
        end = outer.end_lineno or outer.lineno
        kept = lines[:start] + lines[end:]
        return "\n".join(kept).strip("\n")

    def _entry_nodes(self) -> tuple[ast.stmt, ast.FunctionDef | ast.AsyncFunctionDef] | None:
        """(top-level statement holding the entry point, the entry point's node)."""
        try:
            tree = ast.parse(self.prompt)
        except SyntaxError:
            return None
        functions = (ast.FunctionDef, ast.AsyncFunctionDef)
        for node in tree.body:
            if isinstance(node, functions) and node.name == self.entry_point:
                return node, node
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, functions) and item.name == self.entry_point:
                        return node, item
        return None


def split_problems(
    problems: Sequence[CodeProblem], eval_fraction: float = 0.2, seed: int = 0
) -> tuple[list[CodeProblem], list[CodeProblem]]:
    """Deterministic (train, eval) split: a seeded permutation picks the eval problems.

    Both lists keep the input order. ``eval_fraction`` in [0, 1]; the eval size is
    ``round(len(problems) * eval_fraction)``. The same ``(problems, eval_fraction, seed)``
    always gives the same split.
    """
    if not 0.0 <= eval_fraction <= 1.0:
        raise ValueError(f"eval_fraction must be in [0, 1], got {eval_fraction}")
    n = len(problems)
    n_eval = int(round(n * eval_fraction))
    perm = np.random.default_rng(seed).permutation(n)
    eval_idx = set(int(i) for i in perm[:n_eval])
    train = [p for i, p in enumerate(problems) if i not in eval_idx]
    evals = [p for i, p in enumerate(problems) if i in eval_idx]
    return train, evals


def choose_problem(problems: Sequence[Any], rng: np.random.Generator, task_id: str | None = None,
                   by_id: Mapping[str, int] | None = None) -> Any:
    """The problem named ``task_id`` (``KeyError`` if none), else one drawn with ``rng``.

    ``problems`` are any records with a ``task_id``; ``by_id`` (task id -> index) saves the
    scan where a task keeps one.
    """
    if task_id is None:
        return problems[int(rng.integers(len(problems)))]
    index = by_id.get(task_id) if by_id is not None else next(
        (i for i, p in enumerate(problems) if p.task_id == task_id), None)
    if index is None:
        raise KeyError(f"unknown task_id {task_id!r}")
    return problems[index]
