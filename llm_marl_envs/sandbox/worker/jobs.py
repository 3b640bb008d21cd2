"""Running one job (a program and its tests) inside the fork server, and judging each test.

Assert tests run in one job process, in order. If that process dies or is killed during
test *i* (time-out, crash, ``os._exit``, memory), test *i* fails with that cause and the
tests after it are re-run in a fresh process, so each test is judged on its own; the job's
overall time budget bounds the number of re-runs. I/O tests run one process each. An assert
test passes only with an explicit passing record from the judge (a missing record is a
failure, never a pass); an I/O test only if its process exited with status 0 on its own, as
this process saw it (no record of the program's process counts once the program runs; the
caller compares the output). Infrastructure failures (the job process could not be set up)
are reported as ``infra_error`` and never as a failed test; nothing a program does is one.
"""

from __future__ import annotations

import collections
import os
import time
from typing import Any

from . import protocol as P
from . import served
from .child import ChildSpec
from .fsview import remove_path
from .guard import REAL
from .outcome import (
    MAX_TYPE_CHARS,
    TEXT_KEYS,
    bounded,
    death_cause,
    error_summary,
    io_error,
    prefixed,
    result_entry,
    with_context,
)
from .procs import SchedulerGroup
from .supervisor import RunResult, RunSpec, Supervisor

_MAX_SERVED_SOURCE = 64 << 10  # larger test sets go to a judge process (the check's cost is linear)
_SERVED_CACHE = 512  # test sets whose verdict (and set-up code) this fork server keeps
STACK_BYTES = 64 << 20  # RLIMIT_STACK, soft and hard, when the request names none


class JobRunner:
    """Executes job requests for one fork server (see :mod:`.server`)."""

    def __init__(self, settings: dict[str, Any], supervisor: Supervisor, job_dir: str, wipe) -> None:  # noqa: ANN001
        self.s = settings
        self.supervisor = supervisor
        self.job_dir = job_dir  # the same path for every job (the environment is set once for it)
        self.wipe = wipe
        self.scheduler_group = SchedulerGroup()
        self.served: Any = None  # .served, when this fork server judges the tests .purity accepts
        self._servable: collections.OrderedDict[Any, Any] = collections.OrderedDict()
        if settings.get("judge_in_server"):
            self.served = served

    # -- one job ---------------------------------------------------------------------------
    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        started = time.monotonic()
        tests = job["tests"]
        timeout = float(job["limits"]["timeout_s"])
        budget = float(job["limits"]["job_timeout_s"])
        state = _JobState(len(tests), started + budget, int(job["limits"]["report_chars"]))
        job_dir = self.job_dir
        os.mkdir(job_dir, 0o700)  # cleanup() removed it after the previous job (umask: 022)
        try:
            if self.s["uid"] is not None:
                REAL.chown(job_dir, self.s["uid"], self.s["gid"])
                REAL.chmod(job_dir, 0o770)  # the judge (another uid, same group) may read what the program wrote
            assert_idx = [i for i, t in enumerate(tests) if t["kind"] == "assert"]
            io_idx = [i for i, t in enumerate(tests) if t["kind"] == "io"]
            if assert_idx or not io_idx:
                self._run_asserts(job, assert_idx, job_dir, timeout, state)
            for i in io_idx:
                if state.stop:
                    break
                self._run_io(job, i, job_dir, timeout, state)
            state.fill_missing(timeout)
        except Exception as exc:  # noqa: BLE001 - a bug or an OS failure here is ours, not the program's
            state.infra_error = f"sandbox worker failed while running the job: {type(exc).__name__}: {exc}"
        return state.response(time.monotonic() - started)

    def cleanup(self) -> bool:
        """After the reply: delete the job's files, reset what it may have changed of this process.
        False if that failed, or if the job left processes that could not be killed (only without
        PID namespaces; with them, none is left before the reply): the worker is then replaced."""
        self.supervisor.finish()
        try:
            REAL.rmdir(self.job_dir)  # the common case: the job left its directory empty
            removed = True
        except OSError:
            removed = remove_path(self.job_dir)
        return (removed and self.wipe() is not False and self.scheduler_group.reset()
                and not self.supervisor.tainted)

    def _spec(self, job: dict[str, Any], mode: str, indices: list[int], job_dir: str, timeout: float,
              state: _JobState, stdin: bytes = b"", output_cap: int | None = None) -> RunSpec:
        lim = job["limits"]
        cpu_s = float(lim["cpu_time_s"]) * (len(indices) + (1 if mode == "assert" else 0))
        rlimits = {
            "cpu_s": int(cpu_s) + 1,
            "address_space_bytes": int(lim["memory_bytes"]),
            "file_size_bytes": int(lim["file_size_bytes"]),
            "open_files": int(lim["open_files"]),
            "processes": int(lim["processes"]),
            "core_bytes": 0,  # hard limit too: no core files
            "stack_bytes": int(lim.get("stack_bytes") or STACK_BYTES),  # hard; soft stays the usual
        }
        child = ChildSpec(job_dir=job_dir, env=None, stdin_fd=-1, stdout_fd=-1, stderr_fd=-1, result_fd=-1,
                          rlimits=rlimits, uid=self.s["uid"], gid=self.s["gid"],
                          drop_capabilities=self.s["drop_capabilities"],
                          parent_death_signal=not self.supervisor.is_pid1)
        return RunSpec(job=job, mode=mode, indices=indices, child=child, timeout_s=timeout,
                       job_deadline=state.deadline, output_cap=output_cap or int(lim["output_bytes"]),
                       stdin=stdin)

    # -- assert tests ----------------------------------------------------------------------
    def _run_asserts(self, job: dict[str, Any], indices: list[int], job_dir: str, timeout: float,
                     state: _JobState) -> None:
        pending = list(indices)
        first = True
        setup_code = self._served_setup(job, indices)
        while True:
            if time.monotonic() >= state.deadline and not first:
                break
            spec = self._spec(job, "assert", pending, job_dir, timeout, state)
            if setup_code is not None:
                run = self.served.run_served(self.supervisor, spec, setup_code)
            else:
                run = self.supervisor.run(spec)
            state.judge = "process" if setup_code is None else "server"
            if run.infra_error:
                state.infra_error = run.infra_error
                if not run.ready and run.stderr:  # what the program process said while being set up
                    state.infra_error += ": " + run.stderr[-2000:].decode("utf-8", "replace")
                return
            if first:
                state.set_program_output(run)
                first = False
            if self._judge_assert_run(run, pending, state, timeout):
                return
            done = {i for i in pending if i in state.results}
            remaining = [i for i in pending if i not in done]
            if run.handoff and remaining:  # (see served.WatchedChannel.recv) the rest, in a judge process
                setup_code, pending = None, remaining
                continue
            if not remaining or len(remaining) == len(pending):
                return
            pending = remaining

    def _served_setup(self, job: dict[str, Any], indices: list[int]) -> Any:
        """The set-up code for judging ``job`` here (see .served), or None: a judge process."""
        if self.served is None or not indices:
            return None
        setup = job.get("setup") or ""
        sources = tuple(job["tests"][i]["code"] for i in indices)
        key = (setup, sources)
        cache = self._servable
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
        code = None
        if len(setup) + sum(map(len, sources)) <= _MAX_SERVED_SOURCE:
            tree = served.servable(setup, list(sources))
            if tree is not None:
                try:
                    code = compile(tree, P.SETUP_FILE, "exec", dont_inherit=True, optimize=0)
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    code = None
        cache[key] = code
        if len(cache) > _SERVED_CACHE:
            cache.popitem(last=False)
        return code

    def _judge_assert_run(self, run: RunResult, pending: list[int], state: _JobState, timeout: float) -> bool:
        """Record what ``run`` says about ``pending``; True if the remaining tests must not be re-run."""
        begun: set[int] = set()
        program_ok = setup_ok = False
        for kind, index, flag, _when, payload in run.records:
            if kind == P.REC_COMPILE:
                state.compile_error = str(payload.get("error", "the program does not compile"))
                state.stop = True
                return True
            if kind == P.REC_BAD_TEST:
                state.bad_test = {"index": index, "error": str(payload.get("error", ""))}
                state.stop = True
                return True
            if kind == P.REC_PROGRAM:
                program_ok = flag
                if not flag:
                    state.program_error = error_summary(payload)
                    state.fail_all(pending, prefixed(payload, "the program raised an exception at top level"))
                    return True
                if not state.program_timing:
                    state.program_timing = payload
            elif kind == P.REC_SETUP:
                setup_ok = flag
                if not flag:
                    state.fail_all(pending, prefixed(payload, "the test set-up failed"))
                    return True
            elif kind == P.REC_BEGIN and index in pending:
                begun.add(index)
            elif kind == P.REC_RESULT and index in begun and index not in state.results:
                state.results[index] = result_entry(flag, payload)
        unfinished = [i for i in pending if i not in state.results]
        if not unfinished:
            return True
        if run.handoff:
            return False  # nothing failed: the tests left are re-run in a judge process
        cause = death_cause(run, timeout)
        if not program_ok or not setup_ok:
            where = "while the program was loading" if not program_ok else "during the test set-up"
            if cause.get("timed_out"):
                state.program_error = f"TimeoutError: time limit exceeded {where}"
            state.fail_all(pending, with_context(cause, where))
            return True
        current = run.active if isinstance(run.active, int) else None
        if current in begun and current not in state.results:
            state.results[current] = result_entry(False, cause)
            return run.killed == "budget"
        if run.killed == "budget":
            return True
        if len(unfinished) < len(pending):
            return False  # died between tests after some progress: re-run the rest, blame none
        # Died between tests without any progress (e.g. while the harness was reporting):
        # blame the next test, so that the re-runs always progress.
        state.results[unfinished[0]] = result_entry(False, with_context(cause, "before this test started"))
        return False

    # -- I/O tests -------------------------------------------------------------------------
    def _run_io(self, job: dict[str, Any], index: int, job_dir: str, timeout: float, state: _JobState) -> None:
        test = job["tests"][index]
        stdin = test.get("stdin", "").encode("utf-8", "surrogateescape")
        cap = int(test.get("output_cap") or job["limits"]["output_bytes"])
        if time.monotonic() >= state.deadline:
            return
        run = self.supervisor.run(self._spec(job, "io", [index], job_dir, timeout, state, stdin, cap))
        if run.infra_error:
            state.infra_error = run.infra_error
            state.stop = True
            return
        for kind, _index, _flag, _when, payload in run.records:
            if kind == P.REC_COMPILE:  # (written before the program ran: see harness._run_io)
                state.compile_error = str(payload.get("error", "the program does not compile"))
                state.stop = True
                return
        limit = state.limit
        stderr = run.stderr[-8 * limit:].decode("utf-8", "replace")  # (the harness prints an exception last)
        exit_code = run.exit_code
        if run.killed or exit_code is None:
            entry = result_entry(False, death_cause(run, timeout))
        else:
            entry = result_entry(exit_code == 0, {"exit_code": exit_code, "wall_time_s": run.wall_time_s,
                                                 "cpu_time_s": run.cpu_time_s, **io_error(exit_code, stderr, limit)})
        entry["stdout_blob"] = len(state.blobs)  # (the caller compares it: kept whole, up to the cap, as bytes)
        state.blobs.append(run.stdout)
        entry["stderr"] = run.stderr[: 4 * limit].decode("utf-8", "replace")
        entry["stdout_bytes"] = run.stdout_total
        state.results[index] = entry
        if state.program_stdout is None:
            state.set_program_output(run, include_output=False)


class _JobState:
    """Accumulates the outcome of one job; ``response()`` is what goes back to the caller."""

    def __init__(self, n_tests: int, deadline: float, limit: int = 4096) -> None:
        self.n = n_tests
        self.deadline = deadline
        self.limit = limit  # report_chars: no text goes back longer (an I/O test's stdout goes back as bytes)
        self.results: dict[int, dict[str, Any]] = {}
        self.compile_error: str | None = None
        self.program_error: str | None = None
        self.program_timing: dict[str, Any] | None = None
        self.bad_test: dict[str, Any] | None = None
        self.infra_error: str | None = None
        self.program_stdout: str | None = None
        self.program_stderr: str | None = None
        self.judge = ""  # where the assert tests were judged: "server" or "process"
        self.stop = False
        self.blobs: list[bytes] = []  # I/O tests' stdout, sent raw after the reply (see .protocol)

    def set_program_output(self, run: RunResult, include_output: bool = True) -> None:
        limit = self.limit
        self.program_stdout = bounded(run.stdout[: 4 * limit].decode("utf-8", "replace"), limit) if include_output else ""
        self.program_stderr = bounded(run.stderr[: 4 * limit].decode("utf-8", "replace"), limit) if include_output else ""

    def fail_all(self, indices: list[int], info: dict[str, Any]) -> None:
        for i in indices:
            if i not in self.results:
                self.results[i] = result_entry(False, info)

    def fill_missing(self, timeout: float) -> None:
        if self.compile_error is not None:
            first_line = (self.compile_error.splitlines() or [""])[0]
            info = {"error_type": first_line.split(":", 1)[0].strip() or "SyntaxError",
                    "error_message": "the program does not compile: " + first_line}
            self.fail_all(list(range(self.n)), info)
            return
        budget_left = time.monotonic() < self.deadline
        why = "not run" if budget_left else "not run: the job's time budget was exhausted"
        self.fail_all(list(range(self.n)), {"error_type": "NotRun", "error_message": why})

    def response(self, wall: float) -> dict[str, Any]:
        limit = self.limit
        tests = []
        for i in range(self.n):
            entry = self.results.get(i)
            if entry is not None:
                for key in TEXT_KEYS:
                    if key in entry:
                        entry[key] = bounded(entry[key], MAX_TYPE_CHARS if key == "error_type" else limit)
            tests.append(entry)
        return {
            "tests": tests,
            "compile_error": None if self.compile_error is None else bounded(self.compile_error, 4 * limit),
            "program_error": None if self.program_error is None else bounded(self.program_error, limit),
            "bad_test": self.bad_test,
            "infra_error": self.infra_error,
            "stdout": self.program_stdout or "",
            "stderr": self.program_stderr or "",
            "wall_time_s": wall,
            "judge": self.judge,
            "_blobs": self.blobs,
        }
