"""Running a tool agent's program in the sandbox and turning what it printed into an observation.

Tasks with a "tool" role (the math solver's python tool, the grid planner's solver program)
hand the agent's code to :func:`run_tool` together with the text it reads on stdin; the
program runs in the sandbox (``llm_marl_envs.sandbox``, never in this process) as one
stdin/stdout job, and :class:`ToolRun` says what it printed or why it failed.

An infrastructure failure of the sandbox raises :class:`~llm_marl_envs.sandbox.SandboxError`:
it is never reported to the agents as if their program had failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llm_marl_envs.code.extract import extract_code

__all__ = ["ToolRun", "run_tool", "tool_code"]

#: characters of a tool's stdout / error shown to the other agents
SHOWN_CHARS = 1500


@dataclass(frozen=True)
class ToolRun:
    """The outcome of one tool program.

    ``ran`` is True when the program was run and exited cleanly; ``stdout`` is what it
    printed (cut to :data:`SHOWN_CHARS`); ``error`` says why it did not run cleanly
    ("no code", a syntax error, an exception, a time-out), else None.
    """

    code: str
    ran: bool
    stdout: str
    error: str | None

    def render(self) -> str:
        """The observation other agents get: the output, or the error."""
        if self.error is not None:
            shown = f"\nIt printed:\n{self.stdout}" if self.stdout.strip() else ""
            return f"The tool program failed: {self.error}{shown}"
        return f"The tool program printed:\n{self.stdout if self.stdout.strip() else '(nothing)'}"


def tool_code(answer: str) -> str:
    """The Python code of a tool agent's answer (fenced block or raw code; may be empty)."""
    return extract_code(answer).code


def run_tool(sandbox: Any, answer: str, stdin: str = "", timeout_s: float | None = None) -> ToolRun:
    """Run the code of ``answer`` in ``sandbox`` with ``stdin``; see :class:`ToolRun`."""
    from llm_marl_envs.sandbox import IOTest, SandboxError

    code = tool_code(answer)
    if not code.strip():
        return ToolRun(code, False, "", "no code found in the answer")
    result = sandbox.run(code, [IOTest(stdin, "")], timeout_s=timeout_s)
    if result.infra_error is not None:
        raise SandboxError(f"sandbox infrastructure error (not a wrong answer): {result.infra_error}")
    if result.compile_error:
        return ToolRun(code, False, "", _cut(f"syntax error: {result.compile_error}"))
    test = result.tests[0] if result.tests else None
    stdout = _cut(test.got or "") if test is not None else ""
    if test is None:
        return ToolRun(code, False, "", "the program produced no result")
    if test.timed_out:
        return ToolRun(code, False, stdout, "time limit exceeded")
    if test.memory_exceeded:
        return ToolRun(code, False, stdout, "memory limit exceeded")
    if test.exit_code != 0:
        message = test.error_message or test.stderr or f"exit status {test.exit_code}"
        return ToolRun(code, False, stdout, _cut(f"{test.error_type or 'error'}: {message}"))
    return ToolRun(code, True, stdout, None)


def _cut(text: str) -> str:
    text = text.rstrip()
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 20] + "\n[... output cut ...]"
