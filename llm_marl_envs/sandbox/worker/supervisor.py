"""Forking one job process and supervising it until it and all its descendants are gone.

The fork server (trusted) reads the child's stdout and stderr as they come (to enforce the
output caps), enforces the wall-clock deadline of whatever the child is doing (loading the
program, test *i*, ...), and on exit or time-out kills the child.

**Nothing a job starts outlives it.** When the worker has a PID namespace of its own, every job
process is the init of a PID namespace of its own (the zygote clones it with ``CLONE_NEWPID``):
whatever it starts, at any depth, in any process group or session, re-exec'ing any binary, lives
in that namespace and cannot leave it (``setns``, ``unshare`` and ``CLONE_NEW*`` are refused by
seccomp; ``CLONE_PARENT`` is refused to an init). When the init dies, the kernel kills every
process of its namespace at once, and the init is reaped only once they are all gone: so one
``SIGKILL`` and one ``wait4`` (:meth:`Supervisor.end`) end a job process and everything it made,
with no polling loop, and the fork server does it before it replies. (The price: a job process,
as an init, does not receive the signals it sends itself with their default action, e.g.
``kill(0, SIGKILL)``.) Without a PID namespace, the fork server is a child subreaper and kills
the processes reparented to it in rounds (:meth:`Supervisor.kill_leftovers`); a job that keeps
re-creating processes can outlast that, and the worker is then replaced.

The result pipe is read lazily: each record carries the child's monotonic time, so the
deadline of the current phase is known from the last record read, and the pipe only needs
to be drained when the child is done or when that deadline falls due. A job whose tests are
fast thus wakes the fork server once, when the child has exited (see :meth:`Supervisor._watch`):
while the child lives, every page the fork server writes is copied, so it does its work
(parsing the records, the reply, the clean-up) after the child's address space is gone.
(Without pidfds, Linux < 5.3, "done" is the hang-up of the result pipe, which the
harness closes right after its final record: the fork server replies while the child exits,
and reaps it in :meth:`Supervisor.finish`, before the next run.)
"""

from __future__ import annotations

import _socket
import fcntl
import json
import os
import select
import signal
import time
from typing import Any

from . import protocol as P
from .child import ChildSpec
from .guard import REAL
from .procs import (
    children_of_self,
    describe_start_failure,
    fd_ready,
    make_stdin_fd,
    pidfd_open,
    read_output,
    reap_all,
    reap_within,
    try_reap,
)
from .records import PIPE_BYTES, RecordReader, RunResult
from .zygote import ZygoteGone

INFRA_EXIT_CODE = 121  # a job process that could not be set up exits with this
_F_SETPIPE_SZ = 1031


class RunSpec:
    """One child run: which tests, in which mode, with which limits."""

    def __init__(self, *, job: dict[str, Any], mode: str, indices: list[int], child: ChildSpec, timeout_s: float,
                 job_deadline: float, output_cap: int, stdin: bytes = b"") -> None:
        self.job = job
        self.mode = mode  # "assert" | "io"
        self.indices = indices
        self.child = child
        self.timeout_s = timeout_s
        self.job_deadline = job_deadline  # a time.monotonic() value
        self.output_cap = output_cap  # bytes of stdout/stderr kept; more kills the run
        self.stdin = stdin


class _Watch:
    """The poll loop's state for one run, made before the fork (see Supervisor._watch)."""

    def __init__(self, spec: RunSpec, nonce: str, res_r: int, out_r: int, err_r: int, started: float) -> None:
        self.spec, self.res_r, self.out_r, self.err_r = spec, res_r, out_r, err_r
        self.result = RunResult()
        self.reader = RecordReader(res_r, nonce, self.result, spec, started)
        self.outputs = {out_r: bytearray(), err_r: bytearray()}
        self.totals = {out_r: 0, err_r: 0}
        self.poller = select.poll()
        for fd in self.outputs:
            self.poller.register(fd, select.POLLIN)
        # The first sleep: until the reader's first look (nothing can be due before it).
        self.first_timeout_ms = int((self.reader.check_at - started) * 1000) + 1


class Supervisor:
    """Runs job processes for one fork server."""

    def __init__(self, *, is_pid1: bool, zygote: Any, judge_uid: int | None = None) -> None:
        self.is_pid1 = is_pid1
        # A PID namespace per job process, nested in the worker's (see the module docstring).
        self.pid_ns_per_job = is_pid1
        self.tainted = False  # (no PID namespaces) a job left processes that could not be killed
        self.judge_uid = judge_uid  # the judge's uid (another than the program's: no signals, no ptrace)
        self.zygote = zygote  # forks the job processes (see .zygote)
        self._unreaped: list[int] = []  # job processes that reported everything but may still run
        self._devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)  # the stdin of most runs

    def finish(self) -> None:
        """(Linux < 5.3) Kill and reap what the last run left. Idempotent."""
        while self._unreaped:
            pid = self._unreaped.pop()
            self.end(pid)
            self.sweep(pid)

    def end(self, pid: int) -> tuple[int | None, Any]:
        """Kill job process ``pid`` and reap it (with a PID namespace per job: and everything it
        started); its (wait status, rusage)."""
        self._kill(pid, None, "")
        try:
            _, status, usage = os.wait4(pid, 0)
        except ChildProcessError:  # pragma: no cover - reaped already
            status, usage = None, None
        return status, usage

    def sweep(self, pid: int) -> None:
        """Once a run's processes (``pid``: the main one) are reaped: nothing of it is left. With a
        PID namespace per job there is nothing to do (the kernel emptied each namespace before its
        init could be reaped); without, leftovers are killed in rounds (:meth:`kill_leftovers`)."""
        if not self.pid_ns_per_job and not self.kill_leftovers(pid):
            self.tainted = True

    def run(self, spec: RunSpec) -> RunResult:
        self.finish()
        nonce = os.urandom(16).hex()
        res_r, res_w = os.pipe()
        try:
            fcntl.fcntl(res_w, _F_SETPIPE_SZ, PIPE_BYTES)
        except OSError:  # pragma: no cover - above /proc/sys/fs/pipe-max-size: keep the default
            pass
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        stdin_fd = make_stdin_fd(spec.stdin) if spec.stdin else self._devnull
        started = time.monotonic()
        watch = _Watch(spec, nonce, res_r, out_r, err_r, started)
        helper = None
        mine: list[int] = [res_w, out_w, err_w] + ([stdin_fd] if stdin_fd != self._devnull else [])
        with Spawning(mine, ours=(res_r, out_r, err_r)):
            if spec.mode == "assert":
                # The judge runs the tests; the program process (which never sees them) answers its calls.
                judge_end, program_end = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
                judge_fd, program_fd = judge_end.detach(), program_end.detach()
                mine += [judge_fd, program_fd]
                judge_payload = payload_memfd({"nonce": nonce, "setup": spec.job.get("setup") or "",
                                        "tests": spec.job["tests"], "compiled": spec.job.get("compiled"),
                                        "limits": spec.job["limits"], "indices": spec.indices})
                program_payload = payload_memfd({"program": spec.job["program"], "limits": spec.job["limits"]})
                mine += [judge_payload, program_payload]
                pid, helper = self.zygote.spawn(
                    (self._command(spec, "judge"), [self._devnull, self._devnull, self._devnull, res_w,
                                                    judge_payload, judge_fd]),
                    (self._command(spec, "program"), [self._devnull, out_w, err_w, program_fd, program_payload]))
            else:
                payload = payload_memfd({"program": spec.job["program"], "limits": spec.job["limits"], "nonce": nonce,
                                  "index": spec.indices[0]})
                mine.append(payload)
                (pid,) = self.zygote.spawn((self._command(spec, "io"), [stdin_fd, out_w, err_w, res_w, payload]))
        try:
            result = self._watch(watch, pid, helper)
        finally:
            for fd in (res_r, out_r, err_r):
                try:
                    os.close(fd)
                except OSError:
                    pass
        result.stamp(spec, started)
        return result

    def _command(self, spec: RunSpec, role: str) -> dict[str, Any]:
        c = spec.child
        uid = self.judge_uid if role == "judge" and self.judge_uid is not None and c.uid is not None else c.uid
        return {"role": role, "job_dir": c.job_dir, "rlimits": c.rlimits, "uid": uid, "gid": c.gid,
                "drop_caps": c.drop_capabilities, "pdeath": c.parent_death_signal, "pgid": 0,
                "new_ipc": False, "new_pid": self.pid_ns_per_job}  # (IPC objects are refused by the seccomp filter: see .seccomp)

    def _end_helper(self, pid: int, result: RunResult, judged: bool) -> None:
        """After the judge: end the program process; if it died first, its exit explains the run."""
        if not judged and result.killed is None:
            # The judge stopped early on its own: the program process died (or is dying) under it.
            done, status, usage = reap_within(pid)
            if done:
                result.status = status
                if usage is not None:
                    result.cpu_time_s = usage.ru_utime + usage.ru_stime
                    result.max_rss_kb = usage.ru_maxrss
                    result.helper_usage = True
                return
        _, usage = self.end(pid)  # (judged: killed and reaped before the reply all the same)
        if judged or usage is None:
            return
        result.cpu_time_s, result.max_rss_kb = usage.ru_utime + usage.ru_stime, usage.ru_maxrss
        result.helper_usage = True

    # -- the poll loop -------------------------------------------------------------------
    def _watch(self, w: _Watch, pid: int, helper: int | None = None) -> RunResult:
        """Wait for the child to exit (or to be killed), then collect what it left.

        While the child lives, every page this process writes is copied (copy-on-write,
        ~3 us each, and a few hundred pages per run); once the child's address space is gone
        the kernel only makes them writable again (~1 us). So between the fork and the exit
        this process does as little as it can: the poll loop's objects were made before the
        fork, and it sleeps until the child has exited, not until the result pipe's hang-up
        (the harness closes it just before exiting): the records are parsed, the reply built
        and sent and the job cleaned up once the child is gone. It wakes earlier only for
        the child's output (to enforce the caps) and at the deadline of what the child is
        doing (:class:`_RecordReader`).
        """
        spec, result, reader, poller = w.spec, w.result, w.reader, w.poller
        outputs, totals, res_r, out_r, err_r = w.outputs, w.totals, w.res_r, w.out_r, w.err_r
        pidfd = pidfd_open(pid)
        if pidfd is not None:
            poller.register(pidfd, select.POLLIN)
        else:  # pragma: no cover - Linux < 5.3: the hang-up says the run is done
            poller.register(res_r, 0)  # no POLLIN: woken only by the hang-up (everyone closed it)
        exited, finished, rusage = False, False, None
        at_end: list[int] = []  # output pipes read to their end
        timeout_ms: int | None = w.first_timeout_ms if pidfd is not None else 20
        try:
            while not exited and not finished:
                if timeout_ms is None:  # not the first round: what is due, and until when to sleep
                    if result.killed is None and time.monotonic() >= reader.check_at:
                        reader.drain()
                        if reader.overflowed:
                            self._kill(pid, result, "channel")
                        elif reader.expired(time.monotonic()):
                            self._kill(pid, result, reader.expiry_reason())
                    wait = None if result.killed is not None else max(0.0, reader.check_at - time.monotonic())
                    if pidfd is None:  # pragma: no cover - Linux < 5.3: poll for the exit
                        wait = 0.02 if wait is None else min(wait, 0.02)
                    timeout_ms = None if wait is None else int(wait * 1000) + 1
                events, timeout_ms = poller.poll(timeout_ms), None
                for fd, _event in events:
                    if fd == pidfd:
                        poller.unregister(pidfd)
                    elif fd == res_r:
                        poller.unregister(res_r)
                        reader.drain(final=True)
                        finished = result.active == "done" and result.killed is None
                    elif not read_output(fd, outputs[fd], totals, spec.output_cap):
                        poller.unregister(fd)
                        at_end.append(fd)
                    elif totals[fd] > spec.output_cap and result.killed is None:
                        self._kill(pid, result, "output")
                done, status, usage = try_reap(pid)
                if done:
                    exited, result.status, rusage = True, status, usage
        finally:
            if pidfd is not None:
                os.close(pidfd)
            judged = False
            if helper is not None:
                if exited:
                    reader.drain()  # the judge is gone: all its records are in the pipe
                judged = result.active == "done" and result.killed is None
                self._end_helper(helper, result, judged=judged)
            if finished and not exited:
                self._unreaped.append(pid)  # (Linux < 5.3) reaped by finish(), after the reply
            else:
                if not exited:
                    if result.killed is None:
                        result.killed = "timeout"
                    result.status, rusage = self.end(pid)
                self.sweep(pid)
        # The pipes hold all the job wrote before its final record (and, if it is dead, all
        # there will ever be). Output written later, by a leftover process, does not count.
        for fd, buf in outputs.items():
            for _ in range(0 if fd in at_end else 64):  # bounded: a leftover daemon may still be writing
                if not (fd_ready(fd) and read_output(fd, buf, totals, spec.output_cap)):
                    break
        reader.drain(final=True)
        if reader.overflowed and result.killed is None:
            result.killed = "channel"
        if rusage is not None and not result.helper_usage:
            result.cpu_time_s = rusage.ru_utime + rusage.ru_stime
            result.max_rss_kb = rusage.ru_maxrss
        if result.killed is None and max(totals.values()) > spec.output_cap:
            result.killed = "output"
        result.stdout, result.stderr = bytes(outputs[out_r]), bytes(outputs[err_r])
        result.stdout_total, result.stderr_total = totals[out_r], totals[err_r]
        if not result.ready and result.infra_error is None:
            result.infra_error = describe_start_failure(result)
        return result

    def _kill(self, pid: int, result: RunResult | None, reason: str) -> None:
        if result is not None and result.killed is None:
            result.killed = reason
        for target in (lambda: REAL.killpg(pid, signal.SIGKILL), lambda: REAL.kill(pid, signal.SIGKILL)):
            try:
                target()
            except (ProcessLookupError, PermissionError):
                pass

    def kill_leftovers(self, pid: int) -> bool:
        """(No PID namespace per job) Kill and reap every process the job left behind; False if
        some are still there after 5 s of trying (the worker is then replaced, see JobRunner.cleanup).

        A process whose parent dies is re-parented to this one (child subreaper), so once this
        process's only child is the zygote, nothing of the job is left.
        """
        if not self._leftovers():
            return True
        try:
            REAL.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        give_up = time.monotonic() + 5.0
        while time.monotonic() < give_up:
            left = self._leftovers()
            if not left:
                return True
            for child in left:
                try:
                    REAL.kill(child, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.001)
        return not self._leftovers()

    def _leftovers(self) -> list[int]:
        """Reap the children that exited; the others, but the zygote."""
        if not reap_all(self.zygote.pid):
            return []
        return [child for child in children_of_self() if child != self.zygote.pid]


class Spawning:
    """``with Spawning(mine, ours):`` around starting a run's processes through the zygote.

    ``mine`` (a list the block may append to) holds the descriptors that only the new
    processes need: closed here whatever happens. ``ours`` holds this process's ends of the
    run's pipes: closed too if the start fails. A dead zygote ends the fork server (exit 5):
    no job can be forked any more, and the caller starts a fresh worker.
    """

    def __init__(self, mine: list[int], ours: tuple[int, ...]) -> None:
        self.mine, self.ours = mine, ours

    def __enter__(self) -> Spawning:
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> bool:
        try:
            if exc is not None:
                for fd in self.ours:
                    os.close(fd)
                if isinstance(exc, ZygoteGone):
                    os._exit(5)
        finally:
            for fd in self.mine:
                os.close(fd)
        return False


def payload_memfd(payload: dict[str, Any]) -> int:
    """A memfd holding ``payload`` as JSON: what a spawned process reads before it is confined."""
    fd = os.memfd_create("job", os.MFD_CLOEXEC)
    P.write_all(fd, json.dumps(payload).encode("utf-8", "surrogatepass"))
    return fd
