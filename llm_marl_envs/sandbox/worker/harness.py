"""The I/O-mode harness of a job process, and the pieces the judge and the program side share.

I/O mode (APPS / CodeContests style): the program runs as ``__main__`` with the test's
stdin on fd 0; stdout/stderr go to pipes the fork server reads; the comparison with the
expected output is done by the caller, not here. Before the program runs, the harness
writes its only records (READY, or the program's compile error: nonce-tagged, see
:mod:`.protocol`) on a dedicated pipe and closes it (``seal``): everything after that is
judged by the fork server from what it sees itself, the exit status (the harness exits with
the program's), the output and its own clock. A record writer in the program's process could
be found and used by the program (forged records restarted deadlines); a closed pipe cannot.

Assert mode is split between two processes: :mod:`.judge` (set-up and tests) and
:mod:`.program` (the program). They share what is here: :class:`BoundedText` (captured
output), compiling with source lines for tracebacks, loading the set-up and tests compiled
by the caller (``..testcode``) or compiling them (:func:`_compile_tests`), the record writer
(:func:`_reporter`), and the pristine builtins captured before any job.
"""

from __future__ import annotations

import builtins
import io
import json
import linecache
import os
import sys
import time
import types
from typing import Any, NoReturn

from . import protocol as P
from .child import RESULT_FD
from .protocol import SETUP_FILE, test_file_name
from .report import describe, truncate

PROGRAM_FILE = "solution.py"
_PRISTINE_BUILTINS = dict(builtins.__dict__)  # captured in the fork server, before any job


class BoundedText(io.TextIOBase):
    """A write-only text stream that keeps the first ``keep`` characters and counts the rest."""

    def __init__(self, keep: int, hard_limit: int) -> None:
        super().__init__()
        self._parts: list[str] = []
        self._kept = 0
        self._keep = keep
        self._hard = hard_limit
        self.total = 0
        self.buffer = _BoundedBytes(self)

    @property
    def exceeded(self) -> bool:
        return self.total > self._hard

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:  # type: ignore[override]
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        n = len(s)
        self.total += n
        if self._kept < self._keep:
            piece = s[: self._keep - self._kept]
            self._parts.append(piece)
            self._kept += len(piece)
        return n

    def isatty(self) -> bool:
        return False

    def getvalue(self) -> str:
        text = "".join(self._parts)
        if self.total > self._kept:
            text += f"\n...[truncated {self.total - self._kept} characters]"
        return text


class _BoundedBytes:
    """``sys.stdout.buffer`` for a :class:`BoundedText`."""

    def __init__(self, owner: BoundedText) -> None:
        self._owner = owner

    def write(self, b: Any) -> int:
        data = bytes(b)
        self._owner.write(data.decode("utf-8", "replace"))
        return len(data)

    def flush(self) -> None:
        pass


def _compile(source: str, filename: str) -> types.CodeType:
    code = compile(source, filename, "exec", dont_inherit=True, optimize=0)  # asserts kept, whatever the flags
    _remember_source(source, filename)
    return code


def _load_compiled(job: dict[str, Any], indices: list[int]) -> tuple[Any, list[Any]] | None:
    """The set-up and tests as the caller compiled them (see ..testcode), if usable here.

    None when the request has none, or they are for another bytecode version: the job process
    then compiles the sources itself.
    """
    tests = job["tests"]
    loaded = P.load_test_set(job.get("compiled"), len(tests))
    if loaded is None or not all(isinstance(loaded[1][i], types.CodeType) for i in indices):
        return None
    _remember_source(job.get("setup") or "", SETUP_FILE)
    for i in indices:
        _remember_source(tests[i]["code"], test_file_name(tests[i]["name"]))
    return loaded[0], [(i, loaded[1][i]) for i in indices]


def _remember_source(source: str, filename: str) -> None:
    # What tracebacks need to show the source lines: the program's lines are split lazily (it
    # may be large); linecache refuses lazy entries for "<...>" names (tests: small anyway).
    if filename.startswith("<"):
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    else:
        linecache.lazycache(filename, {"__name__": filename, "__loader__": _SourceLoader(source)})


class _SourceLoader:
    """Gives linecache the source of compiled job code, only when a traceback needs it."""

    def __init__(self, source: str) -> None:
        self._source = source

    def get_source(self, _name: str) -> str:
        return self._source


def _syntax_error_text(exc: BaseException, limit: int) -> str:
    from .report import safe_str, type_name

    if isinstance(exc, SyntaxError):
        where = f"line {exc.lineno}" + (f", column {exc.offset}" if exc.offset else "")
        text = f"{type_name(exc)}: {safe_str(exc.msg, limit)} ({exc.filename}, {where})"
        if exc.text:
            text += "\n    " + exc.text.rstrip("\n")
            if exc.offset and exc.offset > 0:
                text += "\n    " + " " * (exc.offset - 1) + "^"
        return truncate(text, limit)
    return truncate(f"{type_name(exc)}: {safe_str(exc, limit)}", limit)


def run_job_process(job: dict[str, Any], nonce: str, mode: str, test_indices: list[int]) -> NoReturn:
    """Entry point in the confined child. Never returns (ends with ``os._exit``)."""
    # Everything used after the program starts is bound here, before it can patch anything.
    emit, finish, seal = _reporter(nonce, RESULT_FD, os.write, os.close, os._exit, time.monotonic, json.dumps)
    _run_job(job, mode, test_indices, emit, finish, seal)


def _run_job(job: dict[str, Any], mode: str, test_indices: list[int], emit, finish, seal) -> NoReturn:  # noqa: ANN001
    """Run ``job``'s program on its I/O test: READY (and a compile error) through ``emit``, then
    ``seal()`` closes the result pipe before the program runs, and ``finish(status)`` exits with
    the program's exit status. Everything after the seal is judged by the fork server from what
    it sees itself (exit status, output, time), never from a record the program could write."""
    limit = int(job["limits"]["report_chars"])
    emit(P.REC_READY, -1, True, {})
    finish(_run_io(job, emit, finish, seal, limit, exec), False)


def _reporter(nonce: str, fd: int, write, close, exit_now, stamp, dumps):  # noqa: ANN001, ANN202
    """The record writer ``emit``, the final ``finish(status=0, end=True)``, and ``seal()``: no
    record after it (the pipe is closed; I/O mode, before the program runs)."""
    queued: list[str] = []
    sealed: list[bool] = []

    def emit(kind: str, index: int, flag: bool, payload: dict[str, Any] | str, now: bool = True) -> None:
        """Write a record (``payload``: a dict, or already JSON); ``now=False``: with the next one."""
        if sealed:
            return
        text = payload if isinstance(payload, str) else dumps(payload) if payload else "{}"
        queued.append(f"{nonce} {kind} {index} {1 if flag else 0} {stamp()!r} {text}\n")
        if not now:
            return
        data = "".join(queued).encode("ascii", "backslashreplace")
        queued.clear()
        try:
            while data:
                data = data[write(fd, data):]
        except OSError:
            pass  # the program closed or replaced the pipe: the run will count as failed

    def seal() -> None:
        if not sealed:
            sealed.append(True)
            try:
                close(fd)
            except OSError:
                pass

    def finish(status: int = 0, end: bool = True) -> NoReturn:
        if end:
            emit(P.REC_END, -1, True, {})
        seal()  # the end of the run (the fork server itself waits for our exit, if it can)
        exit_now(status)

    return emit, finish, seal


class _WarmUpDone(Exception):
    pass


def warm_up(rounds: int = 12) -> None:
    """Run the harness here, in the fork server, on small jobs of both kinds, without side effects.

    CPython 3.11 rewrites a function's bytecode while it warms up (quickening, then
    specialisation) and fills its caches as code runs. Done in every job process, each such
    write copies a page (copy-on-write) and the rewriting itself costs CPU. Done once here,
    every job process inherits warm code (about 4 % more jobs per second on HumanEval, see
    docs/sandbox.md). Leaves no trace: the standard streams and descriptors 0-2, ``sys.argv``,
    ``sys.modules`` and ``linecache`` are restored, and nothing is written anywhere.
    """
    def stop(_code: int = 0) -> NoReturn:
        raise _WarmUpDone

    from . import plaindata

    limits = {"report_chars": 4096, "output_bytes": 1 << 20}
    io_job = {"program": "import sys\nprint(len(sys.stdin.read()))\n", "limits": limits, "tests": [{"stdin": ""}]}
    samples = [1, "x", 2.5, None, True, [1, (2, "a")], {"k": {1, 2}}, b"\x00", 10 ** 5000]
    saved_streams = sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__
    saved_argv, saved_main = sys.argv, sys.modules.get("__main__")
    null = os.open(os.devnull, os.O_RDWR)
    saved_fds = [_dup_or_none(fd) for fd in (0, 1, 2)]
    try:
        for fd in (0, 1, 2):
            os.dup2(null, fd)  # the I/O path reads and writes descriptors 0-2
        for _ in range(rounds):
            for value in samples:
                plaindata.decode(plaindata.encode(value))
            emit, finish, seal = _reporter("warm-up", null, os.write, lambda _fd: None, stop, time.monotonic,
                                           json.dumps)
            try:
                _run_job(io_job, "io", [0], emit, finish, seal)
            except _WarmUpDone:
                pass
    finally:
        for fd, saved in zip((0, 1, 2), saved_fds):
            if saved is None:  # it was closed before
                os.close(fd)
            else:
                os.dup2(saved, fd)
                os.close(saved)
        os.close(null)
        sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__ = saved_streams
        sys.argv = saved_argv
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
        sys.modules.pop("solution", None)
        linecache.clearcache()


def _dup_or_none(fd: int) -> int | None:
    try:
        return os.dup(fd)
    except OSError:  # not open
        return None


def _compile_tests(job, indices, emit, finish, limit):  # noqa: ANN001, ANN202
    """Compile the set-up and the tests ``indices``; a broken one ends the run (``REC_BAD_TEST``)."""
    tests = job["tests"]
    try:
        setup_code = _compile(job.get("setup") or "", SETUP_FILE)
    except BaseException as exc:  # noqa: BLE001
        emit(P.REC_BAD_TEST, -1, False, {"error": _syntax_error_text(exc, limit)})
        finish()
    compiled = []
    for i in indices:
        try:
            compiled.append((i, _compile(tests[i]["code"], test_file_name(tests[i]["name"]))))
        except BaseException as exc:  # noqa: BLE001
            emit(P.REC_BAD_TEST, i, False, {"error": _syntax_error_text(exc, limit)})
            finish()
    return setup_code, compiled


def _run_io(job, emit, finish, seal, limit, run_code) -> int:  # noqa: ANN001
    """Compile and run the program as ``__main__``; its exit status (1 if it raised)."""
    try:
        program = _compile(job["program"], PROGRAM_FILE)
    except BaseException as exc:  # noqa: BLE001
        emit(P.REC_COMPILE, -1, False, {"error": _syntax_error_text(exc, limit)})
        finish()
    seal()
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="surrogateescape")
    stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="surrogateescape")
    stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
    )
    sys.stdout, sys.stderr = stdout, stderr
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, stdout, stderr  # type: ignore[misc]
    sys.argv = [PROGRAM_FILE]
    module = types.ModuleType("__main__")
    module.__file__ = PROGRAM_FILE
    sys.modules["__main__"] = module
    exit_code = 0
    try:
        run_code(program, module.__dict__)
    except SystemExit as exc:
        exit_code = _exit_code(exc.code, stderr)
    except BaseException as exc:  # noqa: BLE001
        exit_code, info = 1, describe(exc, limit)
        try:
            stderr.write(info.get("traceback", "") + "\n")
        except BaseException:  # noqa: BLE001
            pass
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()  # type: ignore[attr-defined]  # join non-daemon threads, as at exit
        except BaseException:  # noqa: BLE001
            pass
    _flush(stdout, stderr)
    return exit_code


def _exit_code(code: Any, stderr: Any) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        stderr.write(str(code) + "\n")
    except BaseException:  # noqa: BLE001
        pass
    return 1


def _flush(*streams: Any) -> None:
    for stream in (*streams, sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001
            pass
