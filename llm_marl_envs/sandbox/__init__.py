"""Run untrusted Python programs against tests, isolated, fast, with structured results.

::

    from llm_marl_envs.sandbox import Sandbox, AssertTest, IOTest, tests_from_check

    with Sandbox() as sb:
        res = sb.run("def add(a, b):\\n    return a + b\\n",
                     [AssertTest("assert add(1, 2) == 3"), AssertTest("assert add(0, 0) == 1")])
        res.passed, res.total          # (1, 2)
        res.tests[1].error_type        # 'AssertionError'

        setup, tests = tests_from_check(problem["test"], problem["entry_point"], prompt=problem["prompt"])
        res = sb.run(problem["prompt"] + completion, tests, setup=setup)

        res = sb.run("print(int(input()) * 2)", [IOTest("21\\n", "42\\n")])

Every job process is forked from a warm fork server (one per pool slot), in its own
temporary directory, with resource limits, a scrubbed environment, an unprivileged user
when the caller is root, no network, and an in-interpreter guard; see ``docs/sandbox.md``
for the exact guarantees and their limits. Infrastructure failures are reported in
``ExecResult.infra_error`` (whose score properties then raise :class:`SandboxError`), never
as a failed test.
"""

from __future__ import annotations

from .check_split import tests_from_check
from .compare import outputs_match
from .config import SandboxConfig
from .default import close_default_sandbox, default_sandbox
from .results import AssertTest, ExecResult, IOTest, Job, SandboxError, Test, TestResult
from .sandbox import Sandbox

__all__ = [
    "AssertTest",
    "ExecResult",
    "IOTest",
    "Job",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "Test",
    "TestResult",
    "close_default_sandbox",
    "default_sandbox",
    "outputs_match",
    "tests_from_check",
]
