"""The bookkeeping of one ``Sandbox.run_batch`` call, and the helpers its tasks share.

:class:`Batch` holds a batch's jobs, their requests (built lazily, while earlier jobs run),
results and retries; the pool's tasks take jobs from it (see ``Sandbox._drain``).
:func:`io_call` turns the ways a fork server can fail into :class:`WorkerIOError`, and
:func:`reply_deadline` says how long to wait for a fork server's reply.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

from .assemble import build_request
from .config import SandboxConfig
from .results import ExecResult, Job, SandboxError
from .testcode import TestCodeCache
from .worker import protocol as P

REPLY_GRACE_S = 30.0  # beyond the job's own budget, how long to wait for a fork server's reply


def reply_deadline(limits: dict[str, Any]) -> float:
    """When to give up waiting for the reply to a job with ``limits`` that starts now."""
    return time.monotonic() + float(limits["job_timeout_s"]) * 1.5 + REPLY_GRACE_S


class WorkerIOError(Exception):
    """A fork server failed to start, to take a request or to reply (see :func:`_io`)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def io_call(fn: Any, *args: Any) -> Any:
    """Call ``fn``, turning the ways a fork server can fail into :class:`WorkerIOError`."""
    try:
        return fn(*args)
    except (EOFError, OSError, TimeoutError, P.ProtocolError, SandboxError) as exc:
        raise WorkerIOError(exc) from exc


class Batch:
    """The jobs of one ``run_batch`` call, shared by the pool's tasks (see Sandbox._drain)."""

    def __init__(self, jobs: list[Job], config: SandboxConfig, test_code: TestCodeCache | None) -> None:
        self.jobs = jobs
        self._config, self._test_code = config, test_code
        self._requests: list[dict[str, Any] | None] = [None] * len(jobs)
        self.results: list[ExecResult | None] = [None] * len(jobs)
        self.started = [0.0] * len(jobs)
        self.failure: BaseException | None = None
        self._next = 0
        self._again: collections.deque[tuple[int, int]] = collections.deque()  # (index, attempt)
        self._lock = threading.Lock()

    def request(self, index: int) -> dict[str, Any]:
        """Job ``index``'s request, built when it is first sent (while the jobs before it run)."""
        request = self._requests[index]
        if request is None:  # (only the task that took the job builds it)
            request = self._requests[index] = build_request(self.jobs[index], self._config, self._test_code)
        return request

    def take(self) -> tuple[int, int] | None:
        """The next job to run, as (index, attempt): retries first; None when there is none."""
        with self._lock:
            if self.failure is not None:
                return None
            if self._again:
                return self._again.popleft()
            if self._next == len(self.jobs):
                return None
            index, self._next = self._next, self._next + 1
            return index, 0

    def running(self, index: int) -> None:
        """Job ``index`` starts now (its result's wall time counts from its first start)."""
        if not self.started[index]:
            self.started[index] = time.perf_counter()

    def put_back(self, index: int, attempt: int) -> None:
        with self._lock:
            self._again.append((index, attempt))

    def fail(self, exc: BaseException) -> None:
        with self._lock:
            if self.failure is None:
                self.failure = exc
