"""Turning a sandbox :class:`~llm_marl_envs.sandbox.ExecResult` into feedback text for an agent.

A refining agent must see *why* its program failed: for each failing test the input, the
expected and the actual output (a wrong answer), or the exception type, message and a
trimmed traceback, or that it ran out of time or memory; a program that does not even
parse gets the syntax error with its line and column. This module does exactly that and
nothing else, for every code task of the suite.

Stable API (reused by ``code/helper_main_v0`` and ``code/tree_search_v0``)::

    from llm_marl_envs.code.feedback import FeedbackConfig, analyze, render_feedback

    fb = analyze(result)                 # -> Feedback (structured: counts + one TestFeedback per failure)
    text = render_feedback(result, cfg)  # -> str, the text shown to the agent
    text = fb.render(cfg)                # the same

Failure kinds (:class:`TestFeedback.kind`, string constants below): ``wrong_answer``,
``exception``, ``timeout``, ``memory``. Whole-program kinds (:attr:`Feedback.status`):
``passed``, ``failed``, ``compile_error``, ``infra_error``, ``no_tests``.

Rendered text layout (``mode="detailed"``, here with ``max_failures=2``; every field is truncated in the middle to
``max_field_chars``, the whole text to ``max_total_chars``)::

    Public tests: 1/4 passed.
    Test 2 (public_1): wrong answer
      input: 5 5
      expected: 10
      got: 25
    Test 3 (public_2): exception ZeroDivisionError: integer division or modulo by zero
      input: 1 0
      expected: 1
      got: (empty)
      traceback:
          File "solution.py", line 2, in solve
            return a * b // b * a
        ZeroDivisionError: integer division or modulo by zero
    (1 more failing test not shown)

Each failure block starts with ``Test <k>`` (1-based position among the tests) and holds
``input:``, ``expected:`` and ``got:`` lines (``(empty)`` for an empty value) where they
are known -- stdin/stdout tests always; assert tests when the assertion message is
``IO_MESSAGE_PREFIX + json.dumps({"input", "expected", "got"})`` -- so scripted policies
and parsers (:func:`parse_failures`) can rely on these exact labels. A program that raised
while loading adds a "The program raised an error while loading:" block. ``mode="pass_fail"`` gives only the
first line, ``mode="none"`` an empty string.

Infrastructure errors (the sandbox itself failed) are rendered as such -- "the test
harness failed, this says nothing about your program" -- never as a wrong answer; scoring
them is the caller's job (see :meth:`Feedback.is_infra_error`).

Determinism: texts never include wall or CPU times, temporary file paths are reduced to
their base name and memory addresses are masked, so the same program gives the same text
on every run (environment ``infos`` must be reproducible for a seed).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# failure kinds of one test
WRONG_ANSWER = "wrong_answer"
EXCEPTION = "exception"
TIMEOUT = "timeout"
MEMORY = "memory"

# status of a whole program run
PASSED = "passed"
FAILED = "failed"
COMPILE_ERROR = "compile_error"
INFRA_ERROR = "infra_error"
NO_TESTS = "no_tests"

FEEDBACK_MODES = ("detailed", "pass_fail", "none")

#: an assertion message ``IO_MESSAGE_PREFIX + json.dumps({"input", "expected", "got"})`` is
#: shown as a wrong answer with those three fields (see ``code/problem_tests.py``)
IO_MESSAGE_PREFIX = "[io] "

_OMITTED = "[... {n} characters omitted ...]"
_PATH_IN_FILE = re.compile(r'File "([^"]*)"')
_HEX_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
_BLOCK_HEAD = re.compile(r"^Test (\d+) (.*)$")
_FIELD = re.compile(r"^  (input|expected|got): ?(.*)$")


@dataclass(frozen=True)
class FeedbackConfig:
    """How much of a run's failures to show.

    Args:
        mode: ``"detailed"`` (per-test failures), ``"pass_fail"`` (one summary line),
            ``"none"`` (empty text).
        max_failures: failing tests detailed; the rest are counted in one line.
        max_field_chars: limit for each of input / expected / got / message.
        max_traceback_lines: last lines of a traceback kept (the header is dropped).
        max_total_chars: limit for the whole text (cut in the middle).
        label: the name of the test set in the summary line ("Public tests", "Tests"...).
    """

    mode: str = "detailed"
    max_failures: int = 3
    max_field_chars: int = 400
    max_traceback_lines: int = 8
    max_total_chars: int = 4000
    label: str = "Public tests"

    def __post_init__(self) -> None:
        if self.mode not in FEEDBACK_MODES:
            raise ValueError(f"feedback mode must be one of {FEEDBACK_MODES}, got {self.mode!r}")
        if self.max_failures < 0 or self.max_field_chars < 16 or self.max_total_chars < 64:
            raise ValueError("max_failures >= 0, max_field_chars >= 16 and max_total_chars >= 64 required")
        if self.max_traceback_lines < 0:
            raise ValueError("max_traceback_lines must be >= 0")


@dataclass(frozen=True)
class TestFeedback:
    """One failing test, as shown to the agent (fields are already cleaned, not truncated)."""

    index: int  #: 0-based position of the test in the run
    name: str
    kind: str  #: WRONG_ANSWER, EXCEPTION, TIMEOUT or MEMORY
    input: str | None = None
    expected: str | None = None
    got: str | None = None
    error_type: str | None = None
    message: str | None = None
    traceback: str | None = None


@dataclass(frozen=True)
class Feedback:
    """Structured outcome of one program run: counts, status and the failing tests."""

    status: str  #: PASSED, FAILED, COMPILE_ERROR, INFRA_ERROR or NO_TESTS
    passed: int
    total: int
    failures: tuple[TestFeedback, ...] = field(default_factory=tuple)
    compile_error: str | None = None
    infra_error: str | None = None
    program_error: str | None = None  #: the program raised while loading (every test failed)

    @property
    def is_infra_error(self) -> bool:
        return self.status == INFRA_ERROR

    def render(self, config: FeedbackConfig | None = None) -> str:
        """The feedback text (see the module docstring for the layout)."""
        cfg = config or FeedbackConfig()
        if cfg.mode == "none":
            return ""
        lines = [self._summary(cfg)]
        if cfg.mode == "detailed":
            if self.status == COMPILE_ERROR and self.compile_error:
                lines.append("  " + _indent(truncate_middle(self.compile_error, 4 * cfg.max_field_chars), "  "))
            elif self.status == INFRA_ERROR and self.infra_error:
                lines.append("  details: " + truncate_middle(self.infra_error, cfg.max_field_chars))
            elif self.program_error:
                tb = trim_traceback(self.program_error, max(cfg.max_traceback_lines, 1))
                lines.append("The program raised an error while loading:\n  "
                             + _indent(truncate_middle(tb, 2 * cfg.max_field_chars), "  "))
            shown = self.failures[: cfg.max_failures]
            lines.extend(_render_failure(f, cfg) for f in shown)
            hidden = len(self.failures) - len(shown)
            if hidden > 0:
                lines.append(f"({hidden} more failing test{'s' if hidden > 1 else ''} not shown)")
        return truncate_middle("\n".join(lines), cfg.max_total_chars)

    def _summary(self, cfg: FeedbackConfig) -> str:
        if self.status == INFRA_ERROR:
            return (
                "The test harness failed (infrastructure error); this says nothing about your "
                "program and it was not scored."
            )
        if self.status == COMPILE_ERROR:
            return f"{cfg.label}: 0/{self.total} passed. The program does not compile:"
        if self.status == NO_TESTS:
            return f"{cfg.label}: none to run."
        verdict = " All passed." if self.status == PASSED else ""
        return f"{cfg.label}: {self.passed}/{self.total} passed.{verdict}"


def analyze(result: Any) -> Feedback:
    """Structured feedback from a sandbox ``ExecResult`` (never raises on an infra error)."""
    infra = getattr(result, "infra_error", None)
    tests = list(result.tests or ())
    total = len(tests) if tests else int(getattr(result, "total", 0) or 0)
    if infra:
        return Feedback(INFRA_ERROR, 0, total, infra_error=clean_text(str(infra)))
    compile_error = getattr(result, "compile_error", None)
    if compile_error:
        return Feedback(COMPILE_ERROR, 0, total, compile_error=clean_text(str(compile_error)))
    if total == 0:
        return Feedback(NO_TESTS, 0, 0)
    failures = tuple(describe_test(i, t) for i, t in enumerate(tests) if not t.passed)
    passed = total - len(failures)
    program_error = getattr(result, "program_error", None)
    return Feedback(
        PASSED if not failures else FAILED, passed, total, failures,
        program_error=clean_text(str(program_error)) if program_error else None,
    )  # fmt: skip


def render_feedback(result: Any, config: FeedbackConfig | None = None) -> str:
    """The feedback text for a sandbox ``ExecResult`` (``analyze(result).render(config)``)."""
    return analyze(result).render(config)


def describe_test(index: int, test: Any) -> TestFeedback:
    """Classify one failing ``TestResult`` and collect what the agent should see."""
    if getattr(test, "timed_out", False):
        kind = TIMEOUT
    elif getattr(test, "memory_exceeded", False):
        kind = MEMORY
    elif _has(test, "expected") and _has(test, "got") and not getattr(test, "error_type", None):
        kind = WRONG_ANSWER
    elif getattr(test, "error_type", None) == "AssertionError":
        kind = WRONG_ANSWER
    elif getattr(test, "error_type", None):
        kind = EXCEPTION
    else:
        kind = WRONG_ANSWER
    message = getattr(test, "error_message", None)
    tb = getattr(test, "traceback", None)
    io = {"input": getattr(test, "stdin", None), "expected": getattr(test, "expected", None),
          "got": getattr(test, "got", None)}
    structured = _io_fields(message) if kind == WRONG_ANSWER else None
    if structured is not None:
        io, message = structured, None
    return TestFeedback(
        index=index,
        name=str(getattr(test, "name", "") or f"test_{index}"),
        kind=kind,
        input=_opt(io["input"]),
        expected=_opt(io["expected"]),
        got=_opt(io["got"]),
        error_type=_opt(getattr(test, "error_type", None)),
        message=_opt(message),
        traceback=clean_text(tb) if tb and kind == EXCEPTION else None,
    )


def trim_traceback(tb: str, max_lines: int) -> str:
    """The last ``max_lines`` lines of a traceback, without its ``Traceback (...)`` header."""
    lines = [ln for ln in tb.strip("\n").splitlines() if not ln.startswith("Traceback (most recent call last)")]
    if max_lines <= 0:
        return ""
    if len(lines) > max_lines:
        lines = ["..."] + lines[-max_lines:]
    return "\n".join(lines)


def truncate_middle(text: str, limit: int) -> str:
    """``text`` cut in the middle to at most about ``limit`` characters, saying how much went."""
    if len(text) <= limit:
        return text
    marker_room = len(_OMITTED.format(n=len(text))) + 2
    keep = max(limit - marker_room, 8)
    head, tail = keep - keep // 3, keep // 3
    omitted = len(text) - head - tail
    return f"{text[:head]}\n{_OMITTED.format(n=omitted)}\n{text[len(text) - tail:]}"


def clean_text(text: str) -> str:
    """Make run-specific text reproducible: file paths -> base names, hex addresses masked."""
    text = _PATH_IN_FILE.sub(lambda m: f'File "{_base_name(m.group(1))}"', text)
    return _HEX_ADDRESS.sub("0x...", text)


def parse_failures(feedback_text: str) -> list[dict[str, str]]:
    """Read the failure blocks back from a rendered text: one dict per ``Test <k>`` block.

    Keys: ``"test"`` (the 1-based number as text), ``"header"`` (the rest of the block's
    first line) and whichever of ``"input"``, ``"expected"``, ``"got"`` the block shows.
    The inverse of the rendering, for parsers, scripted policies and tests.
    """
    blocks: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    last_key: str | None = None
    for line in feedback_text.splitlines():
        head = _BLOCK_HEAD.match(line)
        if head:
            current = {"test": head.group(1), "header": head.group(2)}
            blocks.append(current)
            last_key = None
            continue
        if current is None:
            continue
        fieldm = _FIELD.match(line)
        if fieldm:
            last_key = fieldm.group(1)
            current[last_key] = fieldm.group(2)
        elif line.startswith("    ") and last_key is not None:
            current[last_key] += "\n" + line[4:]
        else:
            last_key = None
    return blocks


# ---------------------------------------------------------------------------- internals
def _render_failure(f: TestFeedback, cfg: FeedbackConfig) -> str:
    lim = cfg.max_field_chars
    head = f"Test {f.index + 1} ({f.name}): "
    if f.kind == TIMEOUT:
        head += "time limit exceeded"
    elif f.kind == MEMORY:
        head += "memory limit exceeded"
    elif f.kind == EXCEPTION:
        head += f"exception {f.error_type}"
        if f.message:
            head += ": " + _one_line(truncate_middle(f.message, lim))
    else:
        head += "wrong answer"
        if f.message and not (f.expected is not None and f.got is not None):
            head += ": " + _one_line(truncate_middle(f.message, lim))
    lines = [head]
    for label, value in (("input", f.input), ("expected", f.expected), ("got", f.got)):
        if value is not None:
            shown = _indent(truncate_middle(value, lim), "    ") if value else "(empty)"
            lines.append(f"  {label}: {shown}")
    if f.traceback and cfg.max_traceback_lines > 0:
        tb = trim_traceback(f.traceback, cfg.max_traceback_lines)
        if tb:
            lines.append("  traceback:\n    " + _indent(truncate_middle(tb, 2 * lim), "    "))
    return "\n".join(lines)


def _io_fields(message: Any) -> dict[str, Any] | None:
    if not isinstance(message, str) or not message.startswith(IO_MESSAGE_PREFIX):
        return None
    try:
        data = json.loads(message[len(IO_MESSAGE_PREFIX):])
    except ValueError:
        return None
    if not isinstance(data, dict) or not {"input", "expected", "got"} <= set(data):
        return None
    return {k: str(data[k]) for k in ("input", "expected", "got")}


def _has(obj: Any, name: str) -> bool:
    return getattr(obj, name, None) is not None


def _opt(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    return clean_text(text.rstrip("\n"))


def _one_line(text: str) -> str:
    return " ".join(text.split("\n"))


def _indent(text: str, prefix: str) -> str:
    return text.replace("\n", "\n" + prefix)


def _base_name(path: str) -> str:
    if path.startswith("<"):
        return path
    return path.replace("\\", "/").rsplit("/", 1)[-1]


__all__: Sequence[str] = (
    "COMPILE_ERROR",
    "EXCEPTION",
    "FAILED",
    "FEEDBACK_MODES",
    "INFRA_ERROR",
    "IO_MESSAGE_PREFIX",
    "MEMORY",
    "NO_TESTS",
    "PASSED",
    "TIMEOUT",
    "WRONG_ANSWER",
    "Feedback",
    "FeedbackConfig",
    "TestFeedback",
    "analyze",
    "clean_text",
    "describe_test",
    "parse_failures",
    "render_feedback",
    "trim_traceback",
    "truncate_middle",
)
