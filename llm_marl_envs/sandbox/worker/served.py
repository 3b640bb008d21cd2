"""Judging an assert run in the fork server itself: one job process (the program's) per run.

For a test set that :mod:`.purity` accepts (test code that can neither change the fork server
nor keep it busy), the fork server runs the judge (:func:`.judge.judge`, the same code a judge
process runs) in its own process, against a program process cloned from the zygote as
usual. That saves the judge process's clone, copy-on-write faults and exit, about half of a
HumanEval job's CPU. Everything the program can do is unchanged: it is the same program
process, it only sees its program and the calls' arguments, and its replies are plain data
decoded by the judge; it cannot signal, trace or read the fork server (PID 1 of the worker's
PID namespace, another uid, not dumpable). The judge's records do not go through a pipe:
:class:`InlineRecords` applies them as :class:`.records.RecordReader` does, with the same
deadlines. While the judge waits for the program, :class:`WatchedChannel` enforces the
deadline of the current phase (loading, set-up, test *i*, the job's budget) and reads the
program's stdout and stderr, as :meth:`.supervisor.Supervisor._watch` does for a judge
process; at the deadline it kills the program process, which fails the test with the same
``TimeoutError`` as before. The test namespace is a fresh dict per run, the standard streams
and ``linecache`` are restored afterwards, and the judge binds no module but ``math`` from
what the program imported (a judge process binds only modules it loaded itself; see .judge).
"""

from __future__ import annotations

import _socket
import linecache
import os
import select
import sys
import time
from typing import Any, NoReturn

from . import protocol as P
from .channel import Channel, ChannelClosed
from .judge import judge
from .procs import describe_start_failure, fd_ready, read_output, reap_within
from .purity import SAFE_MODULES, servable
from .records import START_TIMEOUT_S, RunResult
from .supervisor import Spawning, payload_memfd

__all__ = ["run_served", "servable"]

_WORKER_DIR = os.path.dirname(os.path.abspath(__file__))


class _Stop(BaseException):
    """The judge is done (``finish``) or cannot go on (``stop``)."""


class InlineRecords:
    """The judge's ``emit``: records applied directly to the run's result, with its deadlines."""

    def __init__(self, result: RunResult, spec: Any, started: float) -> None:
        self.result, self.spec = result, spec
        self.phase_start = started
        self.deadline = started + START_TIMEOUT_S

    def emit(self, kind: str, index: int, flag: bool, payload: Any, now: bool = True) -> None:
        if isinstance(payload, str):  # a passing test's timing, already as JSON (by the judge, finite)
            timing = P._TIMING.fullmatch(payload)
            data = {"wall_time_s": float(timing[1]), "cpu_time_s": float(timing[2])} if timing else {}
        else:
            data = payload or {}
        when = time.monotonic()
        result = self.result
        if not result.ready:
            if result.note_before_ready(kind, data, "program"):
                self._phase(when)
            return
        if kind == P.REC_RESULT and result.killed in ("timeout", "budget") and data.get("error_type") == "TimeoutError":
            data = {**data, "timed_out": True}  # stopped at the deadline by _ServerBounds, as a killed judge is
        result.records.append((kind, index, bool(flag), when, data))
        result.note_activity(kind, index, True)
        self._phase(when)

    def _phase(self, when: float) -> None:
        self.phase_start = when
        self.deadline = min(when + self.spec.timeout_s, self.spec.job_deadline)

    def expiry_reason(self) -> str:
        return self.result.expiry_reason(self.spec, self.phase_start)


class _Watch:
    """The program process as the waiting judge sees it: its outputs, its deadline, its end."""

    def __init__(self, supervisor: Any, spec: Any, pid: int, records: InlineRecords, out_r: int, err_r: int) -> None:
        self.supervisor, self.spec, self.pid, self.records = supervisor, spec, pid, records
        self.result = records.result
        self.out_r, self.err_r = out_r, err_r
        self.outputs = {out_r: bytearray(), err_r: bytearray()}
        self.totals = {out_r: 0, err_r: 0}
        self.open = [out_r, err_r]
        self.poller = select.poll()
        for out in self.open:
            self.poller.register(out, select.POLLIN)

    def wait(self, fd: int, event: int) -> None:
        """Until ``fd`` is ready for ``event``; raises ChannelClosed once the program is killed."""
        if self.result.killed is not None:
            raise ChannelClosed("the program process was killed")
        poller = self.poller
        poller.register(fd, event)  # (registering again modifies)
        while True:
            left = self.records.deadline - time.monotonic()
            if left <= 0:
                self.kill(self.records.expiry_reason())
            for ready, _ in poller.poll(int(left * 1000) + 1):
                if ready == fd:
                    return
                if not read_output(ready, self.outputs[ready], self.totals, self.spec.output_cap):
                    poller.unregister(ready)
                    self.open.remove(ready)
                elif self.totals[ready] > self.spec.output_cap:
                    self.kill("output")

    def kill(self, reason: str) -> NoReturn:
        self.supervisor._kill(self.pid, self.result, reason)
        raise ChannelClosed(f"the program process was killed ({reason})")

    def drain_outputs(self) -> None:
        for fd, buf in self.outputs.items():
            for _ in range(0 if fd not in self.open else 64):  # bounded: a leftover may still be writing
                if not (fd_ready(fd) and read_output(fd, buf, self.totals, self.spec.output_cap)):
                    break


class WatchedChannel(Channel):
    """The fork server's end of the socket pair: non-blocking, waits through :class:`_Watch`.

    :meth:`tick` holds the decoding of the program's replies to the deadline of the phase: the
    judge calls it once a reply is parsed and for every container it rebuilds
    (:func:`.plaindata.from_tree`), so a reply that takes long to decode times the test out
    near its deadline instead of running on, on this process's CPU, which no limit of the job counts.
    """

    TICK_EVERY = 2048  # containers rebuilt between two looks at the clock
    MAX_MESSAGE_BYTES = 1 << 20  # a bigger message is decoded in a judge process (see recv)

    def __init__(self, fd: int, watch: _Watch) -> None:
        super().__init__(fd)
        self.watch = watch
        self.countdown = self.TICK_EVERY
        os.set_blocking(fd, False)

    def recv(self) -> bytes:
        """The next message; one above :attr:`MAX_MESSAGE_BYTES` is not decoded here: the JSON
        decoder is one uninterruptible call (~0.2 s per MB of nested lists on the 2-core VM), so
        the run is handed off (``handoff``) and the tests left re-run in a judge process, a
        process of its own that its deadline kills wherever it is."""
        size = int.from_bytes(self._exactly(4), "big")
        if size > self.MAX_MESSAGE_BYTES:
            self.hand_off(f"a message of {size} bytes")
        return self._exactly(size)

    def send(self, data: bytes) -> None:
        """Send a request, then wait for its reply to arrive (the judge sends nothing else before
        it: .remote.Link): the program process rarely runs before this process sleeps, so a read
        right away would find nothing and cost a failed read and its exception."""
        super().send(data)
        if not self.buffer:
            self.watch.wait(self.fd, select.POLLIN)

    def hand_off(self, why: str) -> None:
        """Give the run up (``handoff``): the tests left re-run in a judge process, a process of its
        own that its deadline kills wherever it is. Raises ChannelClosed."""
        watch = self.watch
        watch.result.handoff = True
        watch.supervisor._kill(watch.pid, None, "")
        raise ChannelClosed(f"{why}: judged in a judge process")

    def tick(self, now: bool = False) -> None:
        self.countdown -= 1
        if not now and self.countdown > 0:
            return
        self.countdown = self.TICK_EVERY
        watch = self.watch
        if time.monotonic() >= watch.records.deadline and watch.result.active != "done":
            if watch.result.killed is None:
                watch.supervisor._kill(watch.pid, watch.result, watch.records.expiry_reason())
            raise TimeoutError("the test ran past its deadline (decoding the program's reply)")

    def _wait(self, writing: bool) -> None:
        self.watch.wait(self.fd, select.POLLOUT if writing else select.POLLIN)


def run_served(supervisor: Any, spec: Any, setup_code: Any) -> RunResult:
    """One assert run of ``spec``, judged here; ``setup_code`` replaces the compiled set-up."""
    supervisor.finish()
    started = time.monotonic()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    judge_end, program_end = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
    judge_fd, program_fd = judge_end.detach(), program_end.detach()
    mine = [out_w, err_w, program_fd]
    with Spawning(mine, ours=(out_r, err_r, judge_fd)):
        mine.append(payload_memfd({"program": spec.job["program"], "limits": spec.job["limits"]}))
        (pid,) = supervisor.zygote.spawn(
            (supervisor._command(spec, "program"), [supervisor._devnull, out_w, err_w, program_fd, mine[3]]))
    result = RunResult()
    records = InlineRecords(result, spec, started)
    watch = _Watch(supervisor, spec, pid, records, out_r, err_r)
    job = spec.job
    payload = {"nonce": "", "setup": job.get("setup") or "", "tests": job["tests"], "compiled": job.get("compiled"),
               "limits": job["limits"], "indices": spec.indices}

    def finish() -> NoReturn:
        records.emit(P.REC_END, -1, True, {})
        raise _Stop

    def stop(_code: int = 0) -> NoReturn:
        raise _Stop

    saved = sys.stdin, sys.stdout, sys.stderr
    bounds = _ServerBounds(watch, int(spec.child.rlimits.get("address_space_bytes", 0)))
    try:
        with bounds:
            judge(payload, WatchedChannel(judge_fd, watch), records.emit, finish, stop,
                  setup_code=setup_code, modules=SAFE_MODULES)
    except _Stop:
        pass
    except BaseException as exc:  # noqa: BLE001 - see below
        # The judge ends with records whatever the program sends (.judge); if it raised all the
        # same, it did so on what the program sent or did (a deadline, memory, a reply): charged
        # to the test that was running, as a program process that broke the protocol is. Never
        # the fork server's end, nor an infra error a program could cause at will.
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        supervisor._kill(pid, result, "channel")
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        linecache.clearcache()
        os.close(judge_fd)
    try:
        _end(supervisor, pid, result)
        watch.drain_outputs()
    finally:
        for fd in (out_r, err_r):
            os.close(fd)
    cap = spec.output_cap
    if result.killed is None and max(watch.totals.values()) > cap:
        result.killed = "output"
    result.stdout, result.stderr = bytes(watch.outputs[out_r]), bytes(watch.outputs[err_r])
    result.stdout_total, result.stderr_total = watch.totals[out_r], watch.totals[err_r]
    if not result.ready and result.infra_error is None:
        result.infra_error = describe_start_failure(result)
    result.stamp(spec, started)
    return result


class _ServerBounds:
    """While the fork server judges: its memory and its own computing time are bounded as a judge
    process's are (RLIMIT_AS, the phase deadline), so test code cannot exhaust the host through it.

    :mod:`.purity` admits only test code whose work is bounded by the data involved, but the data can
    come from the program (up to a channel message per call) and assignments can chain
    (``a = a + a``). So during the judge's run the server's soft RLIMIT_AS is lowered to what it
    uses now plus the job's memory limit (a bigger allocation raises ``MemoryError`` in the test,
    which fails it, as in a judge process), and a timer checks the phase deadline every
    ``TICK_S``: past it, the program process is killed and ``TimeoutError`` is raised in the test
    code being run (never in the judge's own code, which enforces the deadline where it waits),
    as when a judge process is killed at its deadline."""

    TICK_S = 0.05

    def __init__(self, watch: _Watch, memory_bytes: int) -> None:
        self.watch, self.memory_bytes = watch, memory_bytes
        self.saved_limit: tuple[int, int] | None = None
        self.saved_handler: Any = None

    def __enter__(self) -> _ServerBounds:
        import resource
        import signal

        if self.memory_bytes > 0:
            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            with open("/proc/self/statm") as statm:
                in_use = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            cap = in_use + self.memory_bytes
            if hard != resource.RLIM_INFINITY:
                cap = min(cap, hard)
            if soft == resource.RLIM_INFINITY or cap < soft:
                resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
                self.saved_limit = (soft, hard)
        self.saved_handler = signal.signal(signal.SIGALRM, self._tick)
        signal.setitimer(signal.ITIMER_REAL, self.TICK_S, self.TICK_S)
        return self

    def _tick(self, _signum: int, frame: Any) -> None:
        watch = self.watch
        if time.monotonic() < watch.records.deadline or watch.result.active == "done":
            return
        if frame is not None and frame.f_code.co_filename.startswith(_WORKER_DIR):
            return  # in the judge's own code (which waits with the deadline itself): raise in test code only
        if watch.result.killed is None:
            watch.supervisor._kill(watch.pid, watch.result, watch.records.expiry_reason())
        raise TimeoutError("the test ran past its deadline")

    def __exit__(self, *_exc: Any) -> None:
        import resource
        import signal

        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self.saved_handler if self.saved_handler is not None else signal.SIG_DFL)
        if self.saved_limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, self.saved_limit)


def _end(supervisor: Any, pid: int, result: RunResult) -> None:
    """After the judge: the program process is killed and reaped (and with it whatever it started:
    see .supervisor), before the reply; unless it was judged, its exit (or our kill) explains the run."""
    if result.active == "done" and result.killed is None:
        supervisor.end(pid)
        supervisor.sweep(pid)
        return
    done, status, usage = False, None, None
    if result.killed is None:  # the judge stopped on its own: the program process died (or is dying)
        done, status, usage = reap_within(pid)
    if not done:
        status, usage = supervisor.end(pid)
    supervisor.sweep(pid)
    result.status = status
    if usage is not None:
        result.cpu_time_s, result.max_rss_kb = usage.ru_utime + usage.ru_stime, usage.ru_maxrss
        result.helper_usage = True
