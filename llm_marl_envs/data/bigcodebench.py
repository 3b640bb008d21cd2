"""BigCodeBench records: a ``unittest`` test class becomes one assert test per test method.

A record has ``task_id`` (``"BigCodeBench/0"``), ``complete_prompt`` (imports and the
``task_func`` signature with its docstring), ``instruct_prompt`` (the same task in words),
``code_prompt`` (imports and the signature), ``canonical_solution`` (the body),
``entry_point`` (``"task_func"``), ``test`` (a ``unittest.TestCase`` subclass, usually
``TestCases``, with ``test_*`` methods), and ``libs``.

:func:`bigcodebench_record_to_problem` keeps the test code as the set-up and adds a
``check`` with one ``assert _bcb_case("<class>", "<method>")`` per test method: the method
runs in its own ``unittest`` suite (class fixtures included) inside the sandbox, and a
failure, error or skip raises with the test's traceback as the message. The prompt is
``complete_prompt``, so its literal ``>>>`` examples are the public tests where it has
any; otherwise the code tasks hold some test methods out as public tests
(:mod:`llm_marl_envs.data.test_split`). The libraries a task imports must be installed
where the sandbox runs (``metadata["libs"]``).
"""

from __future__ import annotations

import ast
from typing import Any

from llm_marl_envs.data.problems import CodeProblem

__all__ = ["BCB_KEYS", "BCB_RUNNER", "bigcodebench_record_to_problem", "unittest_methods"]

BCB_KEYS = ("task_id", "complete_prompt", "canonical_solution", "test", "entry_point")

#: runs one test method of a TestCase class defined in the set-up
BCB_RUNNER = """

def _bcb_case(class_name, method):
    import unittest as _bcb_unittest
    result = _bcb_unittest.TestResult()
    _bcb_unittest.TestSuite([globals()[class_name](method)]).run(result)
    for _, trace in result.errors + result.failures:
        raise AssertionError(trace[-1500:])
    for _, reason in result.skipped:
        raise AssertionError(f"skipped: {reason}")
    return True
"""


def bigcodebench_record_to_problem(rec: dict[str, Any]) -> CodeProblem:
    """One BigCodeBench record as a :class:`CodeProblem` (see the module docstring)."""
    missing = [k for k in BCB_KEYS if k not in rec]
    if missing:
        raise KeyError(f"missing keys {missing}")
    task_id, entry = str(rec["task_id"]), str(rec["entry_point"])
    test_code = str(rec["test"])
    methods = unittest_methods(test_code)
    if not methods:
        raise ValueError(f"{task_id}: the test code has no unittest test method")
    asserts = "\n".join(f"    assert _bcb_case({cls!r}, {name!r})" for cls, name in methods)
    prompt = str(rec["complete_prompt"])
    body = str(rec["canonical_solution"])
    problem = CodeProblem(
        task_id=task_id,
        prompt=prompt,
        entry_point=entry,
        test=f"{test_code.rstrip()}\n{BCB_RUNNER}\n\ndef check(candidate):\n{asserts}\n",
        canonical_solution=body,
        reference_program=prompt + body,
        source="bigcodebench",
        metadata={
            "libs": rec.get("libs"),
            "instruct_prompt": rec.get("instruct_prompt", ""),
            "n_tests": len(methods),
        },  # fmt: skip
    )
    if problem.entry_function() is None:
        raise ValueError(f"complete_prompt of {task_id!r} does not define entry point {entry!r}")
    return problem


def unittest_methods(test_code: str) -> list[tuple[str, str]]:
    """``(class, method)`` of every ``test*`` method of the top-level classes deriving from a
    ``TestCase`` (``unittest.TestCase`` or ``TestCase``)."""
    try:
        tree = ast.parse(test_code)
    except SyntaxError as exc:
        raise ValueError(f"the test code does not parse: {exc.msg}") from None
    found = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        bases = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
        if "TestCase" not in bases:
            continue
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test"):
                found.append((node.name, item.name))
    return found
