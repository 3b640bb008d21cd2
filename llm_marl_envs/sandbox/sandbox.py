"""``Sandbox``: a thread-safe pool of pre-forked fork servers running (program, tests) jobs.

Each pool slot owns one fork server (:mod:`.pool`); a job takes a free slot, sends its
request, and waits for the reply, so the number of jobs running at once equals the pool
size (default: the CPUs available to this process), whichever threads submit them.
``run_batch`` runs many jobs concurrently on an internal thread pool of that size, one task
per slot; each keeps the next job's request queued in its fork server's socket while a job
runs, so the fork server starts it as soon as it has replied (it never waits for this
process), and gives its slot up between jobs when another caller waits for one. A fork
server that dies, hangs past the job's deadline or breaks the protocol is killed and
replaced; the job is retried ``infra_retries`` times and otherwise returned with
``infra_error`` set (or raises :class:`SandboxError` with ``raise_on_infra_error``).
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .assemble import build_request, infra_result, result_from_reply, validate_job
from .batch import Batch, WorkerIOError, io_call, reply_deadline
from .config import SandboxConfig
from .pool import WorkerProcess, blob_limit
from .results import AssertTest, ExecResult, IOTest, Job, SandboxError
from .slots import SlotQueue
from .testcode import TestCodeCache
from .worker import protocol as P

# A request queued behind a running job must fit in the socket's buffer: the fork server
# reads it only once it has sent its reply, and this process reads that reply only after.
QUEUED_REQUEST_MAX_BYTES = 1 << 16


class Sandbox:
    """Runs untrusted Python programs against tests. Use as a context manager or call close().

    Thread-safe: any number of threads (and environment instances) may share one Sandbox.
    Not fork-safe: in a forked child process, create a new one (``default_sandbox()`` does).
    """

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self._size = self.config.pool_size
        # Callers waiting for a slot get one in the order they asked, and who they are is
        # known (a batch, or None) so that a batch can give its slot up to others.
        self._slots = SlotQueue(self._size)
        self._executor_lock = threading.Lock()
        self._workers: list[WorkerProcess | None] = [None] * self._size
        self._owner_pid = os.getpid()
        self._executor: ThreadPoolExecutor | None = None
        self._request_ids = iter(range(1, 1 << 62))
        # Set-ups and assert tests compiled here, once per distinct test set (see testcode.py);
        # only where the fork servers run this very interpreter (the job process checks too).
        same_python = self.config.python is None or os.path.realpath(self.config.python) == os.path.realpath(
            sys.executable)
        self._test_code = TestCodeCache() if self.config.cache_test_code and same_python else None
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
        return self._slots.closed

    @property
    def isolation(self) -> dict[str, Any]:
        """What the fork servers report: namespaces, privilege drop, private /tmp, notes."""
        return dict(self._isolation)

    @property
    def test_code_hits(self) -> int:
        """How many requests carried compiled tests (``cache_test_code``; 0 when it is off)."""
        return self._test_code.hits if self._test_code is not None else 0

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
        if len(checked) <= 1 or os.getpid() != self._owner_pid:
            return [self._execute(job) for job in checked]
        executor = self._get_executor()
        if executor is None:
            return [self._execute(job) for job in checked]
        batch = Batch(checked, self.config, self._test_code)
        tasks = [executor.submit(self._drain, batch) for _ in range(min(self._size, len(checked)))]
        for task in tasks:
            task.exception()  # waits
        if batch.failure is not None:
            raise batch.failure
        return batch.results  # type: ignore[return-value]

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
                    slot = self._slots.acquire()
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
                    self._slots.release(slot)

    def close(self) -> None:
        """Kill every fork server (and with it every job process). Idempotent."""
        self._slots.close()
        with self._executor_lock:
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
        with self._executor_lock:
            if self._slots.closed:
                return None
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=self._size, thread_name_prefix="sandbox")
            return self._executor

    def _execute(self, job: Job) -> ExecResult:
        started = time.perf_counter()
        request = build_request(job, self.config, self._test_code)
        limits = request["limits"]
        error = "the sandbox is closed"
        for _attempt in range(self.config.infra_retries + 1):
            if os.getpid() != self._owner_pid:
                error = "this Sandbox belongs to another process (it was forked); create a new one"
                break
            slot = self._slots.acquire()
            if slot is None:
                error = "the sandbox is closed"
                break
            try:
                reply, error = self._call(slot, request, limits)
            finally:
                self._slots.release(slot)
            if reply is None:
                if self._slots.closed:
                    break
                continue
            outcome = self._outcome(job, reply, started)
            if isinstance(outcome, ExecResult):
                return outcome
            error = outcome
        return self._infra(job, error, started)

    def _call(self, slot: int, request: dict[str, Any], limits: dict[str, Any]) -> tuple[dict | None, str]:
        worker = self._workers[slot]
        try:
            worker = self._worker(slot)
            request = {"op": "job", "id": next(self._request_ids), "job": request}
            deadline = reply_deadline(limits)
            return worker.call(request, deadline), ""
        except (EOFError, OSError, TimeoutError, P.ProtocolError, SandboxError) as exc:
            return None, self._worker_failed(slot, worker, exc)
        except BaseException:  # e.g. KeyboardInterrupt while waiting: the worker's state is unknown
            self._worker_failed(slot, worker, None)
            raise

    def _drain(self, batch: Batch) -> None:
        """One of ``run_batch``'s tasks: take the batch's jobs and run them until none is left."""
        try:
            item = batch.take()
            while item is not None:
                slot = self._slots.acquire(batch)
                if slot is None:
                    self._settle(batch, item[0], item[1], None, "the sandbox is closed")
                    item = batch.take()
                    continue
                try:
                    item = self._pipeline(slot, batch, item)
                finally:
                    self._slots.release(slot)
        except BaseException as exc:  # e.g. SandboxError with raise_on_infra_error: stop the batch
            batch.fail(exc)
            raise

    def _pipeline(self, slot: int, batch: Batch, item: tuple[int, int]) -> tuple[int, int] | None:
        """Run job ``item``, then the batch's next ones, on the fork server of ``slot``.

        While a job runs, the next job's request already waits in the fork server's socket.
        Returns the job to run next, on another worker or after waiting for a slot again (when
        this worker failed, or when another caller waits for a slot), or None when the batch
        is done.
        """
        inflight: collections.deque[tuple[int, int, int]] = collections.deque()  # (index, attempt, id)
        held: tuple[int, bytes] | None = None  # (id, frame) of `item`, too big to queue: sent next
        worker = None
        try:
            worker = io_call(self._worker, slot)
            while True:
                while item is not None and len(inflight) < 2:
                    index, attempt = item
                    if held is None:
                        request_id = next(self._request_ids)
                        frame = P.encode_frame({"op": "job", "id": request_id, "job": batch.request(index)})
                    else:
                        (request_id, frame), held = held, None
                    if inflight and len(frame) > QUEUED_REQUEST_MAX_BYTES:
                        held = request_id, frame
                        break  # sent once the running job has replied
                    io_call(worker.send, frame)
                    if not inflight:
                        batch.running(index)
                    inflight.append((index, attempt, request_id))
                    item = batch.take() if len(inflight) < 2 and not self._slots.others_waiting(batch) else None
                if not inflight:
                    return item if item is not None else batch.take()
                index, attempt, request_id = inflight[0]
                limits = batch.request(index)["limits"]
                # The fork server starts a queued job when it replies to the previous one.
                deadline = reply_deadline(limits)
                reply = io_call(worker.receive, request_id, deadline, blob_limit(batch.request(index)))
                inflight.popleft()
                if inflight:
                    batch.running(inflight[0][0])
                self._settle(batch, index, attempt, reply, "")
                if item is None and not self._slots.others_waiting(batch):
                    item = batch.take()
        except WorkerIOError as failure:
            message = self._worker_failed(slot, worker, failure.cause)
            # The oldest job sent was running (or was the first for a worker that did not
            # start): it used an attempt. The ones queued behind it had not started.
            head = inflight.popleft()[:2] if inflight else item
            for index, attempt, _ in inflight:
                batch.put_back(index, attempt)
            if head is not None:
                self._settle(batch, head[0], head[1], None, message)
            return batch.take() if head is item or item is None else item
        except BaseException:  # e.g. KeyboardInterrupt: the worker's state is unknown
            self._worker_failed(slot, worker, None)
            raise

    def _settle(self, batch: Batch, index: int, attempt: int, reply: dict[str, Any] | None, error: str) -> None:
        """Record job ``index``'s outcome, or queue it again after an infrastructure failure."""
        job, started = batch.jobs[index], batch.started[index] or time.perf_counter()  # (never started: 0 s)
        if reply is not None:
            outcome = self._outcome(job, reply, started)
            if isinstance(outcome, ExecResult):
                batch.results[index] = outcome
                return
            error = outcome
        if attempt < self.config.infra_retries and not self._slots.closed:
            batch.put_back(index, attempt + 1)
        else:
            batch.results[index] = self._infra(job, error, started)

    def _outcome(self, job: Job, reply: dict[str, Any], started: float) -> ExecResult | str:
        """A fork server's reply as the job's result, or the infrastructure error to retry on."""
        if reply.get("bad_test"):
            bad = self._check_bad_test(job, reply["bad_test"])
            if bad is not None:
                return self._infra(job, bad, started)
        if reply.get("infra_error"):
            return str(reply["infra_error"])
        return result_from_reply(job, reply, self.config, time.perf_counter() - started, dict(self._isolation))

    def _worker(self, slot: int) -> WorkerProcess:
        """The fork server of ``slot``, started afresh if there is none or it died."""
        worker = self._workers[slot]
        if worker is None or not worker.alive():
            if worker is not None:
                worker.kill()
            worker = self._workers[slot] = WorkerProcess(self.config, slot)
        return worker

    def _worker_failed(self, slot: int, worker: WorkerProcess | None, exc: BaseException | None) -> str:
        """Kill a fork server that failed (and forget it); returns the message for its job."""
        if self._slots.closed:
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
        return message

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
            compile(source, "<test>", "exec", dont_inherit=True, optimize=0)
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
