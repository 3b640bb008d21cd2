"""What one job process run produced (:class:`RunResult`), and the reader of its result pipe.

:class:`RecordReader` drains the result pipe on demand. Each record carries the child's
monotonic time, so the deadline of the current phase (loading the program, test *i*, ...)
is known from the last record read, and the pipe only needs to be drained when the child is
done or when that deadline falls due.
"""

from __future__ import annotations

import os
import time
from typing import Any

from . import protocol as P

START_TIMEOUT_S = 10.0  # fork + confinement must be done by then, or it is an infra error
EXIT_GRACE_S = 2.0  # after the final record, the time the child has to exit on its own
MAX_RECORD_BYTES = 64 << 20  # more on the result pipe: the program is flooding it
MAX_LINE_BYTES = 8 << 20  # a longer line on the result pipe: likewise
PIPE_BYTES = 1 << 20  # result pipe capacity (F_SETPIPE_SZ), so that the child rarely blocks
BLOCKED_GRACE_S = 0.2  # extra time when the child may have been blocked on a full result pipe


class RunResult:
    """What one child run produced, as seen by the fork server."""

    def __init__(self) -> None:
        self.records: list[P.Record] = []
        self.ready = False
        self.stdout = self.stderr = b""
        self.stdout_total = self.stderr_total = 0
        self.status: int | None = None  # raw wait status of the child
        self.cpu_time_s = 0.0
        self.max_rss_kb = 0
        self.wall_time_s = 0.0
        self.cpu_limit_s = 0.0  # the RLIMIT_CPU the run had
        self.memory_limit_bytes = 0  # its RLIMIT_AS
        self.killed: str | None = None  # "timeout" | "budget" | "output" | "channel" | "start"
        self.active: Any = "start"  # what ran last: "program", "setup", "harness", a test index
        self.infra_error: str | None = None
        self.helper_usage = False  # cpu_time_s / max_rss_kb are the program process's (assert mode)
        self.handoff = False  # the fork server's judge gave the run up (a reply too big to decode there)

    def stamp(self, spec: Any, started: float) -> None:
        """Set the run's wall time (from ``started``, monotonic) and the limits it ran under."""
        self.wall_time_s = time.monotonic() - started
        self.cpu_limit_s = float(spec.child.rlimits.get("cpu_s", 0))
        self.memory_limit_bytes = int(spec.child.rlimits.get("address_space_bytes", 0))

    def note_before_ready(self, kind: str, payload: Any, active: Any) -> bool:
        """Apply a record that came before READY (only READY and "infra" count there);
        True if it made the run ready, its first activity being ``active``."""
        if kind == P.REC_READY:
            self.ready = True
            self.active = active
            return True
        if kind == "infra":
            self.infra_error = str((payload or {}).get("error", "job process set-up failed"))[:4000]
        return False

    def note_activity(self, kind: str, index: int, assert_mode: bool) -> None:
        """What runs now, after a record of ``kind`` (after READY)."""
        if kind == P.REC_BEGIN:
            self.active = index
        elif kind == P.REC_PROGRAM:
            self.active = "setup"
        elif kind == P.REC_END:
            self.active = "done"
        elif assert_mode:
            self.active = "harness"

    def expiry_reason(self, spec: Any, phase_start: float) -> str:
        """Why the run's current deadline (phase or job budget) stopped it."""
        if not self.ready:
            return "start"
        if self.active != "done" and spec.job_deadline <= phase_start + spec.timeout_s:
            return "budget"
        return "timeout"

    @property
    def exit_code(self) -> int | None:
        if self.status is None or not os.WIFEXITED(self.status):
            return None
        return os.WEXITSTATUS(self.status)

    @property
    def signal(self) -> int | None:
        if self.status is None or not os.WIFSIGNALED(self.status):
            return None
        return os.WTERMSIG(self.status)


class RecordReader:
    """Drains the result pipe on demand; knows what the child is doing and its deadline."""

    def __init__(self, fd: int, nonce: str, result: RunResult, spec: Any, started: float) -> None:
        self.fd, self.nonce, self.result, self.spec = fd, nonce, result, spec
        self.started = started
        self.phase_start = started
        self.pending = bytearray()
        self.total = 0
        self.last_read = 0
        self.overflowed = False
        self.grace_used = False
        self.deadline = started + START_TIMEOUT_S  # of the current phase, as far as we know
        # When to look again: the program's time limit runs from READY, which is normally
        # written right after the fork, so the first look is one time limit after the fork.
        self.check_at = started + min(spec.timeout_s, START_TIMEOUT_S)
        os.set_blocking(fd, False)

    def drain(self, final: bool = False) -> None:
        self.last_read = 0
        records_before = len(self.result.records)
        while not self.overflowed:
            try:
                data = os.read(self.fd, 1 << 16)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break
            if not data:
                break
            self.last_read += len(data)
            self.total += len(data)
            if self.total > MAX_RECORD_BYTES:
                self.overflowed = True
                break
            self.pending += data
            if b"\n" in data:
                self._parse_lines()
            if len(self.pending) > MAX_LINE_BYTES:
                self.overflowed = True
        if final and self.pending and not self.overflowed:
            self.pending += b"\n"
            self._parse_lines()
        if self.last_read >= PIPE_BYTES // 2 and len(self.result.records) == records_before and self.result.ready:
            self.overflowed = True  # half a pipe of bytes and not one record: junk, not the harness
        self._set_deadline()

    def _parse_lines(self) -> None:
        lines = self.pending.split(b"\n")
        self.pending = bytearray(lines.pop())
        now, nonce, parse, apply = time.monotonic(), self.nonce, P.parse_record, self._apply
        for line in lines:
            record = parse(line, nonce)
            if record is not None:
                apply(record, now)

    def _apply(self, record: P.Record, now: float) -> None:
        kind, index, _flag, when, payload = record
        result = self.result
        # The child's clock is the same as ours; a value outside [fork, now] is clamped.
        when = min(max(when, self.phase_start), now)
        if not result.ready:
            if result.note_before_ready(kind, payload, self.spec.indices[0] if self.spec.mode == "io" else "program"):
                self.phase_start = when
            return  # nothing before READY counts (and nothing can come from the program)
        if kind in ("infra", P.REC_READY):
            return  # only meaningful before READY: anything later may be forged
        result.records.append(record)
        result.note_activity(kind, index, self.spec.mode == "assert")
        self.phase_start = when
        self.grace_used = False

    def _set_deadline(self) -> None:
        if not self.result.ready:
            self.deadline = self.started + START_TIMEOUT_S
            self.check_at = min(self.deadline, time.monotonic() + self.spec.timeout_s)
            return
        if self.result.active == "done":
            self.deadline = self.phase_start + EXIT_GRACE_S
        else:
            self.deadline = min(self.phase_start + self.spec.timeout_s, self.spec.job_deadline)
        self.check_at = self.deadline

    def expired(self, now: float) -> bool:
        if now < self.deadline:
            return False
        if not self.grace_used and (self.last_read >= PIPE_BYTES // 2 or self.pending):
            # The child may have been blocked writing to a full pipe: let it finish that record.
            self.grace_used = True
            self.deadline = self.check_at = now + BLOCKED_GRACE_S
            return False
        return True

    def expiry_reason(self) -> str:
        return self.result.expiry_reason(self.spec, self.phase_start)
