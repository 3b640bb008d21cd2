"""Loaders for code problems in public JSONL formats, from a user's path (no download).

Two record shapes are understood (``format="auto"`` decides per record):

- **CoopHumanEval / HumanEval shape**: ``task_id``, ``prompt``, ``test``, ``entry_point``
  (optional ``canonical_solution``). CoopHumanEval has no canonical solution.
- **MBPP shape**: ``task_id``, ``text`` (the task in words), ``code`` (reference
  solution), ``test_list`` (assert strings), optional ``test_setup_code``. It is converted
  to HumanEval shape by :func:`mbpp_record_to_problem`: the prompt is the reference
  function's signature with a docstring made of ``text`` and the first
  ``examples_in_prompt`` asserts, preceded by the reference code's imports; the test is
  ``def check(candidate)`` whose asserts call ``candidate`` instead of the function name.

A user's own JSONL of either shape works the same way. Malformed lines raise
``ValueError`` naming the file and line.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Any, Literal

from llm_marl_envs.data.problems import CodeProblem
from llm_marl_envs.data.jsonl import iter_jsonl

__all__ = ["load_code_jsonl", "mbpp_record_to_problem"]

_HUMANEVAL_KEYS = ("task_id", "prompt", "test", "entry_point")
_MBPP_KEYS = ("task_id", "text", "code", "test_list")


def load_code_jsonl(
    path: str | Path,
    format: Literal["auto", "humaneval", "mbpp"] = "auto",
    examples_in_prompt: int = 1,
) -> list[CodeProblem]:
    """Read code problems from a ``.jsonl`` (or ``.jsonl.gz``) file; see the module docstring."""
    problems: list[CodeProblem] = []
    for lineno, rec in iter_jsonl(path):
        try:
            problems.append(_record_to_problem(rec, format, examples_in_prompt))
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"{path}:{lineno}: {exc}") from None
    if not problems:
        raise ValueError(f"{path}: no problems found")
    ids = [p.task_id for p in problems]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: duplicate task_id values")
    return problems


def _record_to_problem(rec: dict[str, Any], format: str, examples_in_prompt: int) -> CodeProblem:
    if format == "auto":
        if all(k in rec for k in _HUMANEVAL_KEYS):
            format = "humaneval"
        elif all(k in rec for k in _MBPP_KEYS):
            format = "mbpp"
        else:
            raise KeyError(
                f"record has keys {sorted(rec)}; expected {list(_HUMANEVAL_KEYS)} (CoopHumanEval/HumanEval) "
                f"or {list(_MBPP_KEYS)} (MBPP)"
            )
    if format == "mbpp":
        return mbpp_record_to_problem(rec, examples_in_prompt)
    if format != "humaneval":
        raise ValueError(f"unknown format {format!r}")
    missing = [k for k in _HUMANEVAL_KEYS if k not in rec]
    if missing:
        raise KeyError(f"missing keys {missing}")
    prompt, entry = str(rec["prompt"]), str(rec["entry_point"])
    body = rec.get("canonical_solution") or None
    problem = CodeProblem(
        task_id=str(rec["task_id"]),
        prompt=prompt,
        entry_point=entry,
        test=str(rec["test"]),
        canonical_solution=body,
        reference_program=prompt + body if body else None,
        source="coop_jsonl",
        metadata={k: v for k, v in rec.items() if k not in (*_HUMANEVAL_KEYS, "canonical_solution")},
    )
    if problem.entry_function() is None:
        raise ValueError(f"prompt of {problem.task_id!r} does not define entry point {entry!r}")
    if "def check(" not in problem.test:
        raise ValueError(f"test of {problem.task_id!r} has no `def check(candidate)`")
    return problem


def mbpp_record_to_problem(rec: dict[str, Any], examples_in_prompt: int = 1) -> CodeProblem:
    """Convert one MBPP record to a HumanEval-shaped :class:`CodeProblem` (see module doc)."""
    missing = [k for k in _MBPP_KEYS if k not in rec]
    if missing:
        raise KeyError(f"missing keys {missing}")
    task_id = f"MBPP/{rec['task_id']}"
    code = str(rec["code"]).replace("\r\n", "\n")
    tests = [str(t) for t in rec["test_list"]]
    if not tests:
        raise ValueError(f"{task_id}: empty test_list")
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise ValueError(f"{task_id}: reference code does not parse ({exc.msg})") from None
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    called = _called_names(tests[0])
    entry = next((name for name in called if name in functions), None)
    if entry is None:
        raise ValueError(f"{task_id}: the first test calls none of the reference functions {sorted(functions)}")
    fn = functions[entry]
    imports = [ast.get_source_segment(code, n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    ret = f" -> {ast.unparse(fn.returns)}" if fn.returns is not None else ""
    doc_lines = textwrap.wrap(str(rec["text"]).strip(), 88) or [entry]
    shown = tests[: max(examples_in_prompt, 0)]
    if shown:
        doc_lines += ["", "Examples:"] + [f">>> {t.strip()}" for t in shown]
    doc = "\n".join(f"    {ln}" if ln else "" for ln in doc_lines).replace('"""', "'''")
    prompt = ""
    if imports:
        prompt += "\n".join(s for s in imports if s) + "\n\n\n"
    prompt += f'def {entry}({ast.unparse(fn.args)}){ret}:\n    """\n{doc}\n    """\n'
    setup = str(rec.get("test_setup_code") or "").strip()
    asserts = "\n".join(f"    {_rename_calls(t.strip(), entry)}" for t in tests)
    test = (setup + "\n\n\n" if setup else "") + f"def check(candidate):\n{asserts}\n"
    return CodeProblem(
        task_id=task_id,
        prompt=prompt,
        entry_point=entry,
        test=test,
        canonical_solution=None,
        reference_program=code,
        source="mbpp_jsonl",
        metadata={"text": rec["text"], "test_list": tests, "challenge_test_list": rec.get("challenge_test_list", [])},
    )


def _called_names(src: str) -> list[str]:
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return []
    return [n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]


class _Rename(ast.NodeTransformer):
    def __init__(self, old: str) -> None:
        self.old = old

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id == self.old:
            return ast.copy_location(ast.Name(id="candidate", ctx=node.ctx), node)
        return node


def _rename_calls(assert_src: str, entry: str) -> str:
    """``assert f(1) == 2`` -> ``assert candidate(1) == 2`` (text kept if it does not parse)."""
    try:
        tree = ast.parse(assert_src)
    except SyntaxError:
        return assert_src
    return ast.unparse(_Rename(entry).visit(tree))
