"""Loaders for code problems in public JSONL formats, from a user's path (no download).

Four record shapes are understood (``format="auto"`` decides per record):

- **CoopHumanEval / HumanEval shape**: ``task_id``, ``prompt``, ``test``, ``entry_point``
  (optional ``canonical_solution``). CoopHumanEval has no canonical solution.
- **MBPP shape**: ``task_id``, ``text`` (the task in words; ``prompt`` in the sanitized
  release), ``code`` (reference solution), ``test_list`` (assert strings), optional
  ``test_setup_code``, ``test_imports`` (sanitized) and ``challenge_test_list`` (harder
  asserts). It is converted to HumanEval shape by :func:`mbpp_record_to_problem`: the
  prompt is the reference function's signature with a docstring made of ``text`` and the
  first ``examples_in_prompt`` asserts (``>>> assert f(x) == y``), preceded by the
  reference code's imports; the test is ``def check(candidate)`` whose asserts -- the
  ``test_list`` and, with ``challenge_tests=True`` (default), the ``challenge_test_list``
  -- call ``candidate`` instead of the function name. The code tasks show the prompt's
  examples and score on the other asserts (:mod:`llm_marl_envs.data.test_split`).
- **EvalPlus** (HumanEval+ / MBPP+, records with ``plus_input``): read by
  :func:`llm_marl_envs.data.evalplus.evalplus_record_to_problem`.
- **BigCodeBench** (records with ``complete_prompt``): read by
  :func:`llm_marl_envs.data.bigcodebench.bigcodebench_record_to_problem`.

A user's own JSONL of any of these shapes works the same way. Malformed lines raise
``ValueError`` naming the file and line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from llm_marl_envs.data.bigcodebench import bigcodebench_record_to_problem
from llm_marl_envs.data.evalplus import evalplus_record_to_problem
from llm_marl_envs.data.jsonl import iter_jsonl
from llm_marl_envs.data.mbpp import MBPP_KEYS, MBPP_SANITIZED_KEYS, mbpp_record_to_problem
from llm_marl_envs.data.problems import CodeProblem

__all__ = ["load_code_jsonl", "mbpp_record_to_problem"]

_HUMANEVAL_KEYS = ("task_id", "prompt", "test", "entry_point")



def load_code_jsonl(
    path: str | Path,
    format: Literal["auto", "humaneval", "mbpp", "evalplus", "bigcodebench"] = "auto",
    examples_in_prompt: int = 1,
    challenge_tests: bool = True,
) -> list[CodeProblem]:
    """Read code problems from a ``.jsonl`` (or ``.jsonl.gz``) file; see the module docstring."""
    problems: list[CodeProblem] = []
    for lineno, rec in iter_jsonl(path):
        try:
            problems.append(_record_to_problem(rec, format, examples_in_prompt, challenge_tests))
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"{path}:{lineno}: {exc}") from None
    if not problems:
        raise ValueError(f"{path}: no problems found")
    ids = [p.task_id for p in problems]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: duplicate task_id values")
    return problems


def _record_to_problem(rec: dict[str, Any], format: str, examples_in_prompt: int, challenge: bool) -> CodeProblem:
    if format == "auto":
        if "plus_input" in rec:
            format = "evalplus"
        elif "complete_prompt" in rec:
            format = "bigcodebench"
        elif all(k in rec for k in _HUMANEVAL_KEYS):
            format = "humaneval"
        elif all(k in rec for k in MBPP_KEYS) or all(k in rec for k in MBPP_SANITIZED_KEYS):
            format = "mbpp"
        else:
            raise KeyError(
                f"record has keys {sorted(rec)}; expected {list(_HUMANEVAL_KEYS)} (CoopHumanEval/HumanEval) "
                f"or {list(MBPP_KEYS)} (MBPP), or EvalPlus (plus_input) / BigCodeBench (complete_prompt) fields"
            )
    if format == "mbpp":
        return mbpp_record_to_problem(rec, examples_in_prompt, challenge)
    if format == "bigcodebench":
        return bigcodebench_record_to_problem(rec)
    if format == "evalplus":
        return evalplus_record_to_problem(rec, examples_in_prompt)
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
