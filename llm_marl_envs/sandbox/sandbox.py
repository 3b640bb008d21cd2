"""``Sandbox``: a thread-safe pool of pre-forked fork servers running (program, tests) jobs.

Each pool slot owns one fork server (:mod:`.pool`); a job takes a free slot, sends its
request, and waits for the reply, so the number of jobs running at once equals the pool
size (default: the CPUs available to this process), whichever threads submit them.
``run_batch`` runs many jobs concurrently on an internal thread pool of that size. A fork
server that dies, hangs past the job's deadline or breaks the protocol is killed and
replaced; the job is retried ``infra_retries`` times and otherwise returned with
``infra_error`` set (or raises :class:`SandboxError` with ``raise_on_infra_error``).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .assemble import build_request, infra_result, result_from_reply, validate_job
from .config import SandboxConfig
from .pool import WorkerProcess
from .results import AssertTest, ExecResult, IOTest, Job, SandboxError
from .worker import protocol as P

REPLY_GRACE_S = 30.0  # beyond the job's own budget, how long to wait for a fork server's reply


class Sandbox:
    """Runs untrusted Python programs against tests. Use as a context manager or call close().

    Thread-safe: any number of threads (and environment instances) may share one Sandbox.
    Not fork-safe: in a forked child process, create a new one (``default_sandbox()`` does).
    """

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self._size = self.config.pool_size
        self._cond = threading.Condition()
        self._idle = list(range(self._size))
        self._workers: list[WorkerProcess | None] = [None] * self._size
        self._closed = False
        self._owner_pid = os.getpid()
        self._executor: ThreadPoolExecutor | None = None
        self._request_ids = iter(range(1, 1 << 62))
        self._isolation: dict[str, Any] = {}
        self._idle_lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _kill_workers, self._workers)
        try:
            for i in range(self._size):
                self._workers[i] = WorkerProcess(self.config, i)
            for worker in self._workers:
                assert worker is not None
                self._isolation = worker.wait_ready().get("isolation", {})
        except BaseException:
            self.close()
            raise

    # -- public API ------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Number of fork servers (jobs that can run at once)."""
        return self._size

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def isolation(self) -> dict[str, Any]:
        """What the fork servers report: namespaces, privilege drop, private /tmp, notes."""
        return dict(self._isolation)

    def worker_pids(self) -> list[int]:
        """Process ids of the running fork servers (for monitoring and tests)."""
        return [w.pid for w in self._workers if w is not None and w.alive()]

    def run(
        self,
        program: str,
        tests: Sequence[AssertTest] | Sequence[IOTest],
        *,
        setup: str = "",
        timeout_s: float | None = None,
    ) -> ExecResult:
        """Run ``program`` against ``tests``; ``timeout_s`` overrides the per-test time limit."""
        return self._execute(validate_job(Job(program, tests, setup, timeout_s)))

    def run_batch(self, jobs: Sequence[Job]) -> list[ExecResult]:
        """Run many jobs concurrently over the pool; results in the order of ``jobs``."""
        checked = [validate_job(job) for job in jobs]
        if len(checked) <= 1:
            return [self._execute(job) for job in checked]
        executor = self._get_executor()
        if executor is None:
            return [self._execute(job) for job in checked]
        futures = [executor.submit(self._execute, job) for job in checked]
        return [f.result() for f in futures]

    def wait_idle(self, timeout_s: float = 30.0) -> bool:
        """Wait until no job runs and every finished job is cleaned up; True if so.

        A job's processes are killed and its files deleted right after its result is
        returned (always before its worker runs anything else). This waits for that, e.g.
        before checking that nothing was left behind. Blocks new jobs while it runs.
        """
        with self._idle_lock:
            held: list[int] = []
            try:
                while len(held) < self._size:
                    slot = self._acquire()
                    if slot is None:
                        return False
                    held.append(slot)
                ok = True
                for slot in held:
                    worker = self._workers[slot]
                    if worker is None or not worker.alive():
                        continue
                    try:
                        reply = worker.call({"op": "ping", "id": next(self._request_ids)},
                                            time.monotonic() + timeout_s)
                        ok = ok and reply.get("op") == "pong"
                    except (EOFError, OSError, TimeoutError, P.ProtocolError, SandboxError):
                        worker.kill()
                        self._workers[slot] = None
                        ok = False
                return ok
            finally:
                for slot in held:
                    self._release(slot)

    def close(self) -> None:
        """Kill every fork server (and with it every job process). Idempotent."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
        self._finalizer()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------------
    def _get_executor(self) -> ThreadPoolExecutor | None:
        with self._cond:
            if self._closed:
                return None
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=self._size, thread_name_prefix="sandbox")
            return self._executor

    def _execute(self, job: Job) -> ExecResult:
        started = time.perf_counter()
        request = build_request(job, self.config)
        limits = request["limits"]
        error = "the sandbox is closed"
        for _attempt in range(self.config.infra_retries + 1):
            if os.getpid() != self._owner_pid:
                error = "this Sandbox belongs to another process (it was forked); create a new one"
                break
            slot = self._acquire()
            if slot is None:
                error = "the sandbox is closed"
                break
            try:
                reply, error = self._call(slot, request, limits)
            finally:
                self._release(slot)
            if reply is None:
                if self._closed:
                    break
                continue
            if reply.get("bad_test"):
                bad = self._check_bad_test(job, reply["bad_test"])
                if bad is not None:
                    return self._infra(job, bad, started)
            if reply.get("infra_error"):
                error = str(reply["infra_error"])
                continue
            return result_from_reply(job, reply, self.config, time.perf_counter() - started, dict(self._isolation))
        return self._infra(job, error, started)

    def _call(self, slot: int, request: dict[str, Any], limits: dict[str, Any]) -> tuple[dict | None, str]:
        worker = self._workers[slot]
        try:
            if worker is None or not worker.alive():
                if worker is not None:
                    worker.kill()
                worker = self._workers[slot] = WorkerProcess(self.config, slot)
            request = {"op": "job", "id": next(self._request_ids), "job": request}
            deadline = time.monotonic() + float(limits["job_timeout_s"]) * 1.5 + REPLY_GRACE_S
            return worker.call(request, deadline), ""
        except (EOFError, OSError, TimeoutError, P.ProtocolError, SandboxError) as exc:
            if self._closed:
                message = "the sandbox was closed while the job was running"
            else:
                message = f"sandbox worker failed: {type(exc).__name__}: {exc}"
                if worker is not None:
                    code = worker.proc.poll()
                    if code is not None:
                        message += f" (worker exit status {code})"
                    message += worker.log_tail()
            if worker is not None:
                worker.kill()
            self._workers[slot] = None
            return None, message
        except BaseException:  # e.g. KeyboardInterrupt while waiting: the worker's state is unknown
            if worker is not None:
                worker.kill()
            self._workers[slot] = None
            raise

    def _acquire(self) -> int | None:
        with self._cond:
            while not self._idle and not self._closed:
                self._cond.wait()
            if self._closed:
                return None
            return self._idle.pop()

    def _release(self, slot: int) -> None:
        with self._cond:
            self._idle.append(slot)
            self._cond.notify()

    def _check_bad_test(self, job: Job, bad: dict[str, Any]) -> str | None:
        """The worker says a test (or the setup) does not compile: verify it here, in the caller.

        Returns the infra-error message if it is true; None if the claim is false (which can
        only come from a program that forged the harness's report: then it just fails).
        """
        index = bad.get("index", -1)
        source, what = job.setup, "the test setup"
        if isinstance(index, int) and 0 <= index < len(job.tests) and isinstance(job.tests[index], AssertTest):
            source, what = job.tests[index].code, f"test {index}"
        try:
            compile(source, "<test>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            return f"invalid job: {what} does not compile: {exc}"
        return None

    def _infra(self, job: Job, message: str, started: float) -> ExecResult:
        if self.config.raise_on_infra_error:
            raise SandboxError(message)
        return infra_result(job, message, time.perf_counter() - started)


def _kill_workers(workers: list[WorkerProcess | None]) -> None:
    for i, worker in enumerate(workers):
        if worker is not None:
            worker.kill()
            workers[i] = None
