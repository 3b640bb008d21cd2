"""What a test's result holds when it goes back to the caller, and why a job process stopped.

Used by :mod:`.jobs`: a result entry keeps only the expected fields, of their types
(:func:`result_entry`; texts are cut to the job's ``report_chars`` before the reply, see
:func:`bounded`), an I/O test's failure is told from its exit status (:func:`io_error`), and a
process that stopped without reporting is explained by how it ended (:func:`death_cause`).
"""

from __future__ import annotations

import signal
from typing import Any

from .records import RunResult

_SIGNAL_TEXT = {signal.SIGSEGV: "segmentation fault", signal.SIGABRT: "aborted", signal.SIGBUS: "bus error",
                signal.SIGFPE: "floating point exception", signal.SIGILL: "illegal instruction"}

TEXT_KEYS = ("error_type", "error_message", "traceback", "stdout", "stderr")
MAX_TYPE_CHARS = 200


def result_entry(passed: bool, payload: dict[str, Any]) -> dict[str, Any]:
    """A test's result: only the expected fields, of their types (texts are bounded to the job's
    ``report_chars`` in :meth:`_JobState.response`)."""
    entry: dict[str, Any] = {"passed": bool(passed)}
    for key in TEXT_KEYS:
        value = payload.get(key)
        if isinstance(value, str):
            entry[key] = value
    for key in ("wall_time_s", "cpu_time_s"):
        value = payload.get(key)
        if type(value) in (int, float) and 0 <= value < 1e9:
            entry[key] = float(value)
    for key in ("timed_out", "memory_exceeded"):
        if key in payload:
            entry[key] = payload[key] is True
    if type(payload.get("exit_code")) is int:
        entry["exit_code"] = payload["exit_code"]
    return entry


def bounded(text: str, limit: int) -> str:
    """At most ``limit`` characters and a marker (text already cut that way by the judge stays)."""
    if len(text) <= limit + 100:
        return text
    return text[:limit] + f"\n...[truncated {len(text) - limit} characters]"


def io_error(exit_code: int, stderr: str, limit: int) -> dict[str, Any]:
    """What an I/O test's non-zero exit status says, with the exception the harness printed last
    (read from the program's stderr: informative only, the status decides)."""
    if exit_code == 0:
        return {}
    start = stderr.rfind("Traceback (most recent call last):")
    if start >= 0:
        last = stderr.rstrip("\n").rsplit("\n", 1)[-1]
        name, _, message = last.partition(":")
        if name.isidentifier():
            return {"error_type": name, "error_message": message.strip()[:limit],
                    "traceback": bounded(stderr[start:], limit), "memory_exceeded": name == "MemoryError"}
    return {"error_type": "NonZeroExit", "error_message": f"the program exited with code {exit_code}"}


def error_summary(payload: dict[str, Any]) -> str:
    return f"{payload.get('error_type', 'Error')}: {payload.get('error_message', '')}"


def prefixed(payload: dict[str, Any], context: str) -> dict[str, Any]:
    info = dict(payload)
    info["error_message"] = f"{context}: {payload.get('error_message', '')}"
    info.pop("stdout", None)
    info.pop("stderr", None)
    return info


def with_context(cause: dict[str, Any], context: str) -> dict[str, Any]:
    info = dict(cause)
    info["error_message"] = f"{cause.get('error_message', '')} ({context})"
    return info


def death_cause(run: RunResult, timeout: float) -> dict[str, Any]:
    """Why a job process stopped without reporting: time-out, output flood, crash, exit..."""
    info: dict[str, Any] = {"wall_time_s": run.wall_time_s, "cpu_time_s": run.cpu_time_s}
    if run.killed == "timeout":
        info.update(error_type="TimeoutError", timed_out=True,
                    error_message=f"time limit exceeded ({timeout:g} s wall clock)", wall_time_s=timeout)
    elif run.killed == "budget":
        info.update(error_type="TimeoutError", timed_out=True,
                    error_message="the job's total time budget was exhausted")
    elif run.killed == "output":
        info.update(error_type="OutputLimitExceeded", error_message="the program wrote too much output")
    elif run.killed == "channel":
        info.update(error_type="ResultChannelAbuse",
                    error_message="the program flooded the harness's result channel")
    elif run.signal is not None:
        sig = run.signal
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if sig in (signal.SIGKILL, signal.SIGXCPU) and run.cpu_limit_s and run.cpu_time_s >= run.cpu_limit_s - 0.05:
            info.update(error_type="TimeoutError", timed_out=True, error_message="CPU time limit exceeded")
        else:
            detail = _SIGNAL_TEXT.get(sig, "killed")
            info.update(error_type="ProcessCrashed", error_message=f"the process died: {name} ({detail})")
            if run.memory_limit_bytes and run.max_rss_kb * 1024 >= 0.8 * run.memory_limit_bytes:
                info["memory_exceeded"] = True
                info["error_message"] += "; it was close to its memory limit"
    else:
        code = run.exit_code
        info.update(error_type="ProcessExited",
                    error_message=f"the process exited (code {code}) before the test finished")
    if not info.get("memory_exceeded") and b"MemoryError" in run.stderr[-4096:]:
        info["memory_exceeded"] = True
    return info

