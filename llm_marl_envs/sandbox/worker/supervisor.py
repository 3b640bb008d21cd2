"""Forking one job process and supervising it until it and all its descendants are gone.

The fork server (trusted) reads the child's stdout, stderr and result pipe with a poll
loop, enforces the wall-clock deadline of whatever the child is doing (program load, test
*i*, ...), enforces the output caps, and on exit or timeout kills the child's process group
and then every other process left over (as PID 1 of the worker's PID namespace it kills all
of them with ``kill(-1)``; without a PID namespace it is a child subreaper and kills the
orphans reparented to it), so a daemonised or ``setsid`` grandchild cannot outlive its job.
"""

from __future__ import annotations

import os
import select
import signal
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from . import protocol as P
from .child import RESULT_FD, ChildSpec, confine
from .guard import REAL
from .harness import run_job_process

START_TIMEOUT_S = 10.0  # fork + confinement must be done by then, or it is an infra error
EXIT_GRACE_S = 2.0  # after the final record, the time the child has to exit on its own
MAX_RECORD_BYTES = 64 << 20  # more on the result pipe: the program is flooding it
MAX_LINE_BYTES = 8 << 20  # a longer line on the result pipe: likewise
INFRA_EXIT_CODE = 121


@dataclass
class RunSpec:
    """One child run: which tests, in which mode, with which limits."""

    job: dict[str, Any]
    mode: str  # "assert" | "io"
    indices: list[int]
    child: ChildSpec
    timeout_s: float
    job_deadline: float  # time.monotonic() value
    output_cap: int  # bytes of stdout/stderr kept; more kills the run
    stdin: bytes = b""


@dataclass
class RunResult:
    records: list[tuple[str, int, bool, dict[str, Any]]] = field(default_factory=list)
    ready: bool = False
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_total: int = 0
    stderr_total: int = 0
    status: int | None = None  # raw wait status of the child
    cpu_time_s: float = 0.0
    max_rss_kb: int = 0
    wall_time_s: float = 0.0
    cpu_limit_s: float = 0.0  # the RLIMIT_CPU the run had
    memory_limit_bytes: int = 0  # its RLIMIT_AS
    killed: str | None = None  # "timeout" | "budget" | "output" | "channel" | "start"
    active: Any = None  # what ran when it ended: "program", "setup", "harness", a test index
    infra_error: str | None = None

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


class Supervisor:
    """Runs job processes for one fork server."""

    def __init__(self, *, is_pid1: bool) -> None:
        self.is_pid1 = is_pid1

    def run(self, spec: RunSpec) -> RunResult:
        nonce = os.urandom(16).hex()
        res_r, res_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        stdin_fd = _stdin_fd(spec.stdin)
        spec.child.stdin_fd, spec.child.stdout_fd = stdin_fd, out_w
        spec.child.stderr_fd, spec.child.result_fd = err_w, res_w
        started = time.monotonic()
        pid = REAL.fork()
        if pid == 0:  # pragma: no cover - the job process (coverage cannot follow os._exit)
            _child_main(spec, nonce, res_w)
        for fd in (res_w, out_w, err_w, stdin_fd):
            os.close(fd)
        try:
            result = self._watch(spec, pid, nonce, res_r, out_r, err_r, started)
        finally:
            for fd in (res_r, out_r, err_r):
                try:
                    os.close(fd)
                except OSError:
                    pass
        result.wall_time_s = time.monotonic() - started
        result.cpu_limit_s = float(spec.child.rlimits.get("cpu_s", 0))
        result.memory_limit_bytes = int(spec.child.rlimits.get("address_space_bytes", 0))
        return result

    # -- the poll loop -------------------------------------------------------------------
    def _watch(self, spec: RunSpec, pid: int, nonce: str, res_r: int, out_r: int, err_r: int,
               started: float) -> RunResult:
        result = RunResult(active="start")
        pidfd = _pidfd_open(pid)
        poller = select.poll()
        open_fds = {res_r, out_r, err_r}
        for fd in open_fds:
            poller.register(fd, select.POLLIN)
        if pidfd is not None:
            poller.register(pidfd, select.POLLIN)
        bufs = {out_r: bytearray(), err_r: bytearray()}
        totals = {out_r: 0, err_r: 0}
        pending = bytearray()
        record_bytes = 0
        deadline = started + START_TIMEOUT_S
        exited = False
        rusage = None
        cleanup_deadline: float | None = None
        try:
            while open_fds or not exited:
                now = time.monotonic()
                if not exited and result.killed is None:
                    limit = deadline if result.active == "start" else min(deadline, spec.job_deadline)
                    if now >= limit:
                        if result.active == "start":
                            reason = "start"
                        else:
                            reason = "timeout" if deadline <= spec.job_deadline else "budget"
                        self._kill(pid, result, reason)
                if exited and cleanup_deadline is not None and now >= cleanup_deadline:
                    break  # pipes still open after everything was killed: give up on them
                wait = 0.05 if pidfd is None else None
                if not exited and result.killed is None:
                    wait_deadline = deadline if result.active == "start" else min(deadline, spec.job_deadline)
                    wait = max(0.0, wait_deadline - now) if wait is None else min(wait, max(0.0, wait_deadline - now))
                elif exited and cleanup_deadline is not None:
                    wait = max(0.0, cleanup_deadline - now)
                events = poller.poll(None if wait is None else int(wait * 1000) + 1)
                for fd, _ev in events:
                    if fd == pidfd:
                        poller.unregister(pidfd)
                        continue
                    try:
                        data = os.read(fd, 1 << 16)
                    except OSError:
                        data = b""
                    if not data:
                        poller.unregister(fd)
                        open_fds.discard(fd)
                        continue
                    if fd == res_r:
                        record_bytes += len(data)
                        if record_bytes > MAX_RECORD_BYTES:
                            self._kill(pid, result, "channel")
                            continue
                        pending += data
                        if b"\n" in data:
                            deadline = self._consume(pending, nonce, result, spec, deadline)
                        if len(pending) > MAX_LINE_BYTES:  # no harness record is anywhere near this
                            self._kill(pid, result, "channel")
                            del pending[:]
                    else:
                        totals[fd] += len(data)
                        room = spec.output_cap - len(bufs[fd])
                        if room > 0:
                            bufs[fd] += data[:room]
                        if totals[fd] > spec.output_cap and result.killed is None and not exited:
                            self._kill(pid, result, "output")
                if not exited:
                    done, status, usage = _try_reap(pid)
                    if done:
                        exited, result.status, rusage = True, status, usage
                        self.kill_leftovers(pid)
                        cleanup_deadline = time.monotonic() + 1.0
        finally:
            if pidfd is not None:
                os.close(pidfd)
            if not exited:
                self._kill(pid, result, result.killed or "timeout")
                _, result.status, rusage = os.wait4(pid, 0)
                self.kill_leftovers(pid)
        if pending:
            self._consume(pending + b"\n", nonce, result, spec, deadline)
        if rusage is not None:
            result.cpu_time_s = rusage.ru_utime + rusage.ru_stime
            result.max_rss_kb = rusage.ru_maxrss
        result.stdout, result.stderr = bytes(bufs[out_r]), bytes(bufs[err_r])
        result.stdout_total, result.stderr_total = totals[out_r], totals[err_r]
        if not result.ready and result.infra_error is None:
            result.infra_error = _describe_start_failure(result)
        return result

    def _consume(self, pending: bytearray, nonce: str, result: RunResult, spec: RunSpec, deadline: float) -> float:
        while True:
            end = pending.find(b"\n")
            if end < 0:
                return deadline
            line = bytes(pending[:end])
            del pending[: end + 1]
            record = P.parse_record(line, nonce)
            if record is None:
                continue
            kind, index, flag, payload = record
            now = time.monotonic()
            if not result.ready:
                if kind == P.REC_READY:
                    result.ready = True
                    result.active = spec.indices[0] if spec.mode == "io" else "program"
                    deadline = now + spec.timeout_s
                elif kind == "infra":
                    result.infra_error = str(payload.get("error", "job process set-up failed"))[:4000]
                continue  # nothing before READY counts (and nothing can come from the program)
            if kind == "infra" or kind == P.REC_READY:
                continue  # only meaningful before READY: anything later may be forged
            result.records.append(record)
            if kind == P.REC_BEGIN:
                result.active = index
            elif kind == P.REC_PROGRAM:
                result.active = "setup"
            elif kind == P.REC_END:
                result.active = "done"
                deadline = now + EXIT_GRACE_S
                continue
            elif spec.mode == "assert":
                result.active = "harness"
            deadline = now + spec.timeout_s
        # unreachable

    def _kill(self, pid: int, result: RunResult, reason: str) -> None:
        if result.killed is None:
            result.killed = reason
        for target in (lambda: REAL.killpg(pid, signal.SIGKILL), lambda: REAL.kill(pid, signal.SIGKILL)):
            try:
                target()
            except (ProcessLookupError, PermissionError):
                pass

    def kill_leftovers(self, pid: int) -> None:
        """Kill and reap every process the job left behind (daemons, setsid grandchildren)."""
        try:
            REAL.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        give_up = time.monotonic() + 5.0
        while time.monotonic() < give_up:
            if self.is_pid1:
                try:
                    REAL.kill(-1, signal.SIGKILL)  # PID 1 of our own namespace: all of the job's processes
                except ProcessLookupError:
                    pass
            else:
                for child in _children_of_self():
                    try:
                        REAL.kill(child, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            if not _reap_all():
                return
            time.sleep(0.001)


def _child_main(spec: RunSpec, nonce: str, res_w: int) -> None:  # pragma: no cover - in the child
    fd = res_w
    try:
        confine(spec.child)
        fd = RESULT_FD
        run_job_process(spec.job, nonce, spec.mode, spec.indices)
    except BaseException:  # noqa: BLE001
        try:
            import json

            detail = traceback.format_exc(limit=5)[-2000:]
            line = f"{nonce} infra -1 0 0 " + json.dumps({"error": "job process set-up failed: " + detail}) + "\n"
            os.write(fd, line.encode("ascii", "backslashreplace"))
        finally:
            os._exit(INFRA_EXIT_CODE)
    os._exit(INFRA_EXIT_CODE)


def _stdin_fd(data: bytes) -> int:
    if not data:
        return os.open(os.devnull, os.O_RDONLY)
    try:
        fd = os.memfd_create("stdin", 0)
    except (AttributeError, OSError):  # pragma: no cover - memfd needs Linux >= 3.17
        path = f"/tmp/.stdin-{os.urandom(8).hex()}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        REAL.unlink(path)
    P.write_all(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _pidfd_open(pid: int) -> int | None:
    try:
        return REAL.pidfd_open(pid)
    except (AttributeError, OSError):  # pragma: no cover - Linux < 5.3: poll with a short period
        return None


def _try_reap(pid: int) -> tuple[bool, int | None, Any]:
    try:
        got, status, usage = os.wait4(pid, os.WNOHANG)
    except ChildProcessError:  # pragma: no cover
        return True, None, None
    if got == 0:
        return False, None, None
    return True, status, usage


def _reap_all() -> bool:
    """Reap every exited child; True if some children remain."""
    while True:
        try:
            got, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if got == 0:
            return True


def _children_of_self() -> list[int]:
    pids: list[int] = []
    me = os.getpid()
    try:
        for tid in os.listdir(f"/proc/{me}/task"):
            with open(f"/proc/{me}/task/{tid}/children") as f:
                pids.extend(int(p) for p in f.read().split())
    except OSError:  # pragma: no cover - kernels without CONFIG_PROC_CHILDREN: scan /proc
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                            pids.append(int(entry))
                except (OSError, ValueError, IndexError):
                    continue
    return pids


def _describe_start_failure(result: RunResult) -> str:
    if result.killed == "start":
        return f"the job process did not start within {START_TIMEOUT_S:g} s"
    how = f"exit code {result.exit_code}" if result.exit_code is not None else f"signal {result.signal}"
    return f"the job process died during set-up ({how})"
