"""Building the fork-server request for a job, and the ``ExecResult`` from its reply.

Runs in the caller. I/O tests are judged here: the expected output never leaves the
caller's process, and the comparison is done on what the fork server captured from the
program's stdout, not on anything the program claims. That stdout arrives as raw bytes (at most
the test's output cap, see ``pool.blob_limit``) and is compared piece by piece
(:mod:`.compare`); only its first ``report_chars`` characters are ever decoded whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .compare import outputs_match
from .config import SandboxConfig
from .results import AssertTest, ExecResult, IOTest, Job, TestResult
from .testcode import TestCodeCache


def validate_job(job: Any) -> Job:
    """Accept a Job (or a ``(program, tests[, setup])`` tuple); TypeError on anything else."""
    if isinstance(job, (tuple, list)) and 2 <= len(job) <= 3:
        job = Job(*job)
    if not isinstance(job, Job):
        raise TypeError(f"expected a Job, got {type(job).__name__}")
    if not isinstance(job.program, str):
        raise TypeError(f"program must be a str, got {type(job.program).__name__}")
    if not isinstance(job.setup, str):
        raise TypeError(f"setup must be a str, got {type(job.setup).__name__}")
    if isinstance(job.tests, (str, bytes)) or not isinstance(job.tests, Sequence):
        raise TypeError("tests must be a sequence of AssertTest / IOTest")
    for test in job.tests:
        if isinstance(test, AssertTest):
            if not isinstance(test.code, str) or not isinstance(test.name, str):
                raise TypeError("AssertTest.code and .name must be str")
        elif isinstance(test, IOTest):
            if not all(isinstance(v, str) for v in (test.stdin, test.expected_stdout, test.name)):
                raise TypeError("IOTest.stdin, .expected_stdout and .name must be str")
        else:
            raise TypeError(f"tests must be AssertTest or IOTest, got {type(test).__name__}")
    if job.timeout_s is not None and not (isinstance(job.timeout_s, (int, float)) and job.timeout_s > 0):
        raise ValueError(f"timeout_s must be a positive number, got {job.timeout_s!r}")
    return job


def test_names(job: Job) -> list[str]:
    return [t.name or f"test_{i}" for i, t in enumerate(job.tests)]


def build_request(job: Job, config: SandboxConfig, test_code: TestCodeCache | None = None) -> dict[str, Any]:
    """The fork server's request for ``job``; with ``test_code``, its set-up and tests compiled."""
    names = test_names(job)
    tests: list[dict[str, Any]] = []
    for test, name in zip(job.tests, names):
        if isinstance(test, AssertTest):
            tests.append({"kind": "assert", "code": test.code, "name": name})
        else:
            expected_bytes = len(test.expected_stdout.encode("utf-8", "surrogateescape"))
            cap = max(config.max_output_bytes, 2 * expected_bytes + 1024)
            tests.append({"kind": "io", "stdin": test.stdin, "name": name, "output_cap": cap})
    request = {
        "program": job.program,
        "setup": job.setup,
        "tests": tests,
        "limits": config.job_limits(job.timeout_s, len(tests)),
    }
    compiled = test_code.encoded(job.setup, tests) if test_code is not None else None
    if compiled is not None:
        request["compiled"] = compiled
    return request


def clean(text: Any, limit: int) -> str:
    """Valid UTF-8 text (lone surrogates replaced), at most ``limit`` characters plus a marker.

    Text the worker already truncated (``limit`` characters plus its own marker) is kept as is.
    """
    if text is None:
        return ""
    s = str(text)
    if len(s) > limit + 100:  # (cut first: never copy more than is kept)
        s = s[:limit] + f"\n...[truncated {len(s) - limit} characters]"
    s = s.encode("utf-8", "replace").decode("utf-8")
    return s


def clean_bytes(data: bytes | bytearray, limit: int) -> str:
    """The first ``limit`` characters of ``data`` decoded as UTF-8 (replacement characters), plus
    a marker if there is more; decodes no more than the text kept."""
    text = bytes(data[: 4 * limit + 4]).decode("utf-8", "replace")
    if len(text) > limit or len(data) > 4 * limit + 4:
        return text[:limit] + f"\n...[truncated: {len(data)} bytes in all]"
    return text


def _opt(text: Any, limit: int) -> str | None:
    return None if text is None else clean(text if isinstance(text, str) else "", limit)


def result_from_reply(job: Job, reply: dict[str, Any], config: SandboxConfig, wall: float,
                      isolation: dict[str, Any]) -> ExecResult:
    limit = config.report_chars
    names = test_names(job)
    entries = reply.get("tests") or []
    blobs = reply.get("blobs") if type(reply.get("blobs")) is list else []
    results = []
    for i, test in enumerate(job.tests):
        entry = entries[i] if i < len(entries) and isinstance(entries[i], dict) else None
        if entry is None:
            entry = {"passed": False, "error_type": "NotRun", "error_message": "no result was recorded"}
        index = entry.get("stdout_blob")
        stdout = blobs[index] if type(index) is int and 0 <= index < len(blobs) else b""
        results.append(_test_result(test, names[i], entry, config, stdout))
    return ExecResult(
        tests=results,
        total=len(results),
        compile_error=_opt(reply.get("compile_error"), 4 * limit),
        program_error=_opt(reply.get("program_error"), limit),
        stdout=clean(reply.get("stdout"), limit),
        stderr=clean(reply.get("stderr"), limit),
        wall_time_s=wall,
        isolation=isolation,
        judge=reply.get("judge") if reply.get("judge") in ("server", "process") else "",
    )


_PLAIN_ENTRY = frozenset(("passed", "wall_time_s", "cpu_time_s"))


def _seconds(value: Any) -> float:
    """A duration from a reply: a finite, non-negative number, else 0.0 (never an exception here)."""
    if type(value) in (int, float) and 0 <= value < 1e9:
        return float(value)
    return 0.0


def _test_result(test: AssertTest | IOTest, name: str, e: dict[str, Any], config: SandboxConfig,
                 stdout: bytes | bytearray = b"") -> TestResult:
    if e.keys() <= _PLAIN_ENTRY and type(test) is AssertTest:  # the common case: nothing to clean
        return TestResult(name=name, passed=e.get("passed") is True, wall_time_s=_seconds(e.get("wall_time_s")),
                          cpu_time_s=_seconds(e.get("cpu_time_s")))
    limit = config.report_chars
    result = TestResult(
        name=name,
        passed=e.get("passed") is True,
        error_type=_opt(e.get("error_type"), 200),
        error_message=_opt(e.get("error_message"), limit),
        traceback=_opt(e.get("traceback"), limit),
        stdout=clean(e.get("stdout"), limit),
        stderr=clean(e.get("stderr"), limit),
        wall_time_s=_seconds(e.get("wall_time_s")),
        cpu_time_s=_seconds(e.get("cpu_time_s")),
        timed_out=e.get("timed_out") is True,
        memory_exceeded=e.get("memory_exceeded") is True,
        exit_code=e.get("exit_code") if type(e.get("exit_code")) is int else None,
    )
    if isinstance(test, IOTest):
        got = stdout  # (bytes: the program's stdout, up to the test's output cap)
        result.kind = "io"
        result.stdin = clean(test.stdin, limit)
        result.expected = clean(test.expected_stdout, limit)
        result.got = result.stdout = clean_bytes(got, limit)
        if result.error_type is None and result.exit_code not in (None, 0):
            result.error_type = "NonZeroExit"
            result.error_message = f"the program exited with code {result.exit_code}"
        result.passed = (
            result.error_type is None
            and result.exit_code == 0
            and outputs_match(got, test.expected_stdout, config.io_compare, config.float_tolerance)
        )
    return result


def infra_result(job: Job, message: str, wall: float) -> ExecResult:
    return ExecResult(tests=[], total=len(job.tests), infra_error=message, wall_time_s=wall)
