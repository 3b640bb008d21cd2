"""The sandbox's data types: tests, jobs, per-test and per-job results, and its error.

An infrastructure failure (the sandbox itself failed) is never a wrong answer: an
``ExecResult`` with ``infra_error`` set has no test results, and its score properties
(``passed``, ``pass_fraction``, ``all_passed``) raise :class:`SandboxError` instead of
returning a number that could be mistaken for a score of 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


class SandboxError(RuntimeError):
    """The sandbox itself failed (infrastructure), as opposed to the program under test."""


@dataclass(frozen=True)
class AssertTest:
    """A test that passes if ``code`` runs without raising, after the program and the setup.

    ``code`` is typically one ``assert`` statement (MBPP) or one statement of a HumanEval
    ``check`` body; it sees the program's functions and what the setup defined.
    """

    code: str
    name: str = ""


@dataclass(frozen=True)
class IOTest:
    """A test that runs the program as ``__main__`` with ``stdin`` and compares its stdout."""

    stdin: str
    expected_stdout: str
    name: str = ""


Test = AssertTest | IOTest


@dataclass(frozen=True)
class Job:
    """One program with its tests, for :meth:`Sandbox.run_batch`."""

    program: str
    tests: Sequence[Test]
    setup: str = ""
    timeout_s: float | None = None


@dataclass
class TestResult:
    """The outcome of one test. Text fields are truncated to ``SandboxConfig.report_chars``."""

    name: str
    passed: bool
    kind: str = "assert"  #: "assert" or "io"
    error_type: str | None = None  #: exception type name, or TimeoutError / ProcessCrashed / ...
    error_message: str | None = None
    traceback: str | None = None  #: trimmed to the program's (solution.py) and the test's frames
    stdin: str | None = None  #: I/O tests only
    expected: str | None = None  #: I/O tests only
    got: str | None = None  #: I/O tests only: the program's stdout
    stdout: str = ""
    stderr: str = ""
    wall_time_s: float = 0.0
    cpu_time_s: float = 0.0
    timed_out: bool = False
    memory_exceeded: bool = False
    exit_code: int | None = None  #: I/O tests: the program's exit status (None if killed)

    __test__ = False  # not a pytest test class


@dataclass
class ExecResult:
    """The outcome of one job.

    ``tests`` holds one :class:`TestResult` per test, in order (empty on an infra error).
    ``compile_error`` is set when the program does not compile (every test then fails).
    ``program_error`` is set when the program raised at top level (every test then fails).
    ``stdout``/``stderr`` are what the program printed while loading (assert tests), plus
    anything written directly to file descriptors 1/2.
    """

    tests: list[TestResult] = field(default_factory=list)
    total: int = 0
    compile_error: str | None = None
    program_error: str | None = None
    infra_error: str | None = None
    stdout: str = ""
    stderr: str = ""
    wall_time_s: float = 0.0
    isolation: dict[str, Any] = field(default_factory=dict)  #: the worker's isolation report
    #: where the assert tests were judged: "server" (the fork server itself, for test code that
    #: cannot change it), "process" (a judge process), "" (no assert test ran)
    judge: str = ""

    def _require_no_infra_error(self) -> None:
        if self.infra_error is not None:
            raise SandboxError(f"no score: the sandbox itself failed: {self.infra_error}")

    @property
    def ok(self) -> bool:
        """True when the sandbox worked (the result can be scored), whatever the program did."""
        return self.infra_error is None

    @property
    def passed(self) -> int:
        """Number of passing tests. Raises SandboxError on an infrastructure error."""
        self._require_no_infra_error()
        return sum(1 for t in self.tests if t.passed)

    @property
    def pass_fraction(self) -> float:
        """passed / total (0.0 for a job without tests). Raises SandboxError on an infra error."""
        self._require_no_infra_error()
        return self.passed / self.total if self.total else 0.0

    @property
    def all_passed(self) -> bool:
        """True iff there is at least one test and all pass. Raises SandboxError on an infra error."""
        self._require_no_infra_error()
        return self.total > 0 and self.passed == self.total

    def raise_for_infra_error(self) -> ExecResult:
        """Raise SandboxError if the sandbox failed; returns self otherwise (for chaining)."""
        self._require_no_infra_error()
        return self
