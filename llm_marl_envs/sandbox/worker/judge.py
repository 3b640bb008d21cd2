"""The judge of an assert-mode job: runs the set-up and the tests, in a process of its own.

The program runs in another process (:mod:`.program`), which this one reaches only through a
socket pair. In the tests' namespace every function or class the program defined is a
:class:`Remote`: calling it sends the arguments as plain data (:mod:`.plaindata`), and the
program process answers with the return value as plain data, rebuilt here from builtin types
only. So ``assert f(x) == y`` compares two objects of this process, with this process's
``==``: an object with a custom ``__eq__``, a patched builtin, a forged record, a rewritten
small integer, anything the program does to its own process, cannot change what is decided
here. A value that is not plain data stays in the program process; here it is a reference
that can be called, iterated, indexed and printed; it is equal only to itself (the judge's
identity comparison) and its truth is never tested (:class:`ResultNotPlainData`). An
exception raised by the program is raised here as a class named like the program's, derived
from the same builtin exception, so ``except ValueError`` in a test works as before.

Records go to the fork server on the result pipe, as in :mod:`.harness`. If the program
process dies during a call, this process exits without reporting the test: the fork server
then tells why from the program process's exit status (time-out, crash, memory).
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import time
import types
from typing import Any, NoReturn

from . import protocol as P
from .channel import Channel, ChannelAbuse, ChannelClosed
from .harness import _PRISTINE_BUILTINS, BoundedText, _compile_tests, _load_compiled, _reporter
from .plaindata import NotPlainData
from .remote import MAX_CALL_CPU_S, MAX_NAME_CHARS, Link, ProgramGone, Remote, ResultNotPlainData
from .report import describe

RESULT_FD = 3


_ABUSE = {"error_type": "ResultChannelAbuse",
          "error_message": "the program wrote something that is not the protocol's into the judge's channel"}


def run_judge_process(payload: dict[str, Any], fd: int) -> NoReturn:
    """Entry point in the confined judge process (never returns)."""
    emit, finish, _seal = _reporter(payload["nonce"], RESULT_FD, os.write, os.close, os._exit, time.monotonic,
                                    json.dumps)
    # Nothing the program can write is where the tests look for modules or files: the judge works
    # in / (not the job directory), and its import path has no relative or job-owned entry.
    os.chdir("/")
    job_dir = os.environ.get("HOME") or "/"
    sys.path[:] = [p for p in sys.path if os.path.isabs(p) and not _within(p, job_dir)]
    judge(payload, Channel(fd), emit, finish, os._exit)


def _within(path: str, directory: str) -> bool:
    return directory != "/" and (path == directory or path.startswith(directory.rstrip("/") + "/"))


def judge(payload: dict[str, Any], channel: Any, emit: Any, finish: Any, stop: Any, setup_code: Any = None,
          modules: frozenset[str] | None = None) -> NoReturn:
    """Run the set-up and tests of ``payload`` against the program at the other end of
    ``channel``; ``stop()`` ends without a verdict (the program process died).

    ``setup_code`` replaces the compiled set-up; ``modules``: bind only these modules for the
    modules the program imported (see :func:`_namespace`).

    Whatever the program sends, this ends with the records of failed tests (a message that does
    not parse, nests too deep, overflows a number, ... is ``ResultChannelAbuse``), never with an
    exception of its own.
    """
    link = Link(channel)
    limit = int(payload["limits"]["report_chars"])
    hard = int(payload["limits"]["output_bytes"])
    indices = list(payload["indices"])
    try:
        link.channel.recv()  # the program process is confined: what it sends from now on is the program's
    except ChannelClosed:
        emit("infra", -1, False, {"error": "the program process could not be set up"})
        stop(0)
    emit(P.REC_READY, -1, True, {})
    compiled_setup, compiled = _load_compiled(payload, indices) or _compile_tests(payload, indices, emit, finish, limit)
    setup_code = compiled_setup if setup_code is None else setup_code
    try:
        loaded = _program_report(link)
    except ProgramGone:
        stop(0)  # the program process died (or was killed) while loading: the fork server says why
    if "compile" in loaded:
        emit(P.REC_COMPILE, -1, False, {"error": str(loaded["compile"])[: 4 * limit]})
        finish()
    if "error" in loaded or "ok" not in loaded:
        info = loaded.get("error") if type(loaded.get("error")) is dict else {}
        emit(P.REC_PROGRAM, -1, False, _clean_info(info, limit))
        finish()
    emit(P.REC_PROGRAM, -1, True, _clean_info(loaded["ok"], limit, timing_only=True))
    try:
        test_ns = _namespace(link, loaded.get("names"), _names_used([setup_code, *(code for _, code in compiled)]),
                             modules)
    except (TimeoutError, ProgramGone):
        stop(0)  # killed at its deadline while its names were rebuilt, or handed to a judge process (.served)
    program_values = dict(test_ns)
    # A builtin's name defined by the program (`sorted`, `range`) is the builtin for the set-up
    # (which may compute expected values with it), unless the set-up aliases it by name
    # (`candidate = sum`: then the program's function is under test).
    aliased = _aliased(payload.get("setup"))
    for name in [n for n in test_ns if n in _PRISTINE_BUILTINS and not n.startswith("__") and n not in aliased]:
        del test_ns[name]
    sys.stdout, sys.stderr = BoundedText(limit, hard), BoundedText(limit, hard)
    try:
        exec(setup_code, test_ns)  # noqa: S102
    except ProgramGone as gone:
        if gone.abuse:
            emit(P.REC_SETUP, -1, False, dict(_ABUSE))
            finish()
        stop(0)
    except BaseException as exc:  # noqa: BLE001
        emit(P.REC_SETUP, -1, False, describe(exc, limit))
        finish()
    for name in list(test_ns):
        if name in _PRISTINE_BUILTINS and not name.startswith("__") and name in program_values:
            if test_ns[name] is program_values[name]:
                del test_ns[name]  # the program's own `abs`, `len`, ... never reach the tests
    test_ns["__builtins__"] = _PRISTINE_BUILTINS
    emit(P.REC_SETUP, -1, True, {}, now=False)
    clock, cpu = time.perf_counter, time.process_time
    for index, code in compiled:
        emit(P.REC_BEGIN, index, True, {})
        out, err = BoundedText(limit, hard), BoundedText(limit, hard)
        sys.stdout, sys.stderr, sys.stdin = out, err, io.StringIO("")
        passed, info = False, {}
        link.cpu = 0.0
        t0, c0 = clock(), cpu()
        try:
            exec(code, test_ns)  # noqa: S102
            passed = True
        except ProgramGone as gone:
            if gone.abuse:  # this test fails; the fork server re-runs the others in fresh processes
                emit(P.REC_RESULT, index, False, dict(_ABUSE))
            stop(0)
        except BaseException as exc:  # noqa: BLE001
            info = describe(exc, limit)
        wall, used = clock() - t0, cpu() - c0 + link.cpu
        if out.exceeded or err.exceeded:
            passed = False
            info = {"error_type": "OutputLimitExceeded", "error_message": f"the test printed more than {hard} characters"}
        if passed and not out.total and not err.total:
            emit(P.REC_RESULT, index, True, f'{{"wall_time_s": {wall!r}, "cpu_time_s": {used!r}}}', now=False)
            continue
        info.update(stdout=out.getvalue(), stderr=err.getvalue(), wall_time_s=wall, cpu_time_s=used)
        emit(P.REC_RESULT, index, passed, info, now=False)
    finish()


def _program_report(link: Link) -> dict[str, Any]:
    """The program process's first message (compiled? loaded? its names), or ``{"error": ...}``
    when it is not a message of the protocol."""
    try:
        loaded = json.loads(link.channel.recv())
        tick = getattr(link.channel, "tick", None)
        if tick is not None:
            tick(True)
    except ChannelAbuse:
        return {"error": _ABUSE}
    except ChannelClosed:
        raise ProgramGone("the program process died while loading") from None
    except TimeoutError:
        raise ProgramGone("the program process was killed at its deadline") from None
    except Exception:  # noqa: BLE001 - malformed, nested too deep, too big to decode, ...
        return {"error": _ABUSE}
    return loaded if type(loaded) is dict else {"error": _ABUSE}


_ALIAS = re.compile(r"^[ \t]*[A-Za-z_]\w*[ \t]*=[ \t]*([A-Za-z_]\w*)[ \t]*(?:#.*)?$", re.MULTILINE)


def _aliased(setup: Any) -> frozenset[str]:
    """The names a set-up binds to another name at top level (``candidate = sum``)."""
    return frozenset(_ALIAS.findall(setup)) if type(setup) is str else frozenset()


def _names_used(codes: list[Any]) -> frozenset[str]:
    """Every name the set-up and tests may look up as a global (their code's ``co_names``)."""
    names: set[str] = set()
    stack = [c for c in codes if isinstance(c, types.CodeType)]
    while stack:
        code = stack.pop()
        names.update(code.co_names)
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return frozenset(names)


def _clean_info(info: Any, limit: int, timing_only: bool = False) -> dict[str, Any]:
    """The program process's report of its top-level run, with only the fields we expect (a
    timing only if it is a finite, non-negative float)."""
    if type(info) is not dict:
        return {}
    out: dict[str, Any] = {}
    for key in ("wall_time_s", "cpu_time_s"):
        if type(info.get(key)) is float and 0 <= info[key] < MAX_CALL_CPU_S:
            out[key] = info[key]
    if not timing_only:
        for key in ("error_type", "error_message", "traceback"):
            if type(info.get(key)) is str:
                out[key] = info[key][: MAX_NAME_CHARS if key == "error_type" else 2 * limit]
        out["memory_exceeded"] = info.get("error_type") == "MemoryError"
        out.setdefault("error_type", "Error")
    return out


def _namespace(link: Link, names: Any, used: frozenset[str], modules: frozenset[str] | None = None) -> dict[str, Any]:
    """The tests' namespace: of what the program says it defined, only the plain names the set-up
    and tests use (``used``; never a dunder such as ``__builtins__``), as references, plain
    values, or modules this process has loaded itself (``modules``: only those). A module is
    never imported because the program named it (importing runs code: ``unittest.__main__``
    discovers tests in the current directory). ``__builtins__`` is the pristine builtins."""
    ns: dict[str, Any] = {"__name__": "solution", "__builtins__": _PRISTINE_BUILTINS}
    if type(names) is not dict:
        return ns
    for name, entry in names.items():
        if (type(name) is not str or name not in used or name.startswith("__") or not name.isidentifier()
                or type(entry) is not list or not entry):
            continue
        kind = entry[0]
        if kind in ("c", "o"):
            ns[name] = Remote(link, {"g": name}, name)
        elif kind == "v" and len(entry) == 2:
            try:
                ns[name] = link.rebuild(entry[1], refs=False)
            except (NotPlainData, RecursionError, MemoryError):
                ns[name] = Remote(link, {"g": name}, name)
        elif kind == "m" and len(entry) == 2 and type(entry[1]) is str and entry[1]:
            module = sys.modules.get(entry[1])
            if module is not None and (modules is None or entry[1] in modules):
                ns[name] = module
    return ns


__all__ = ["Remote", "ResultNotPlainData", "run_judge_process"]
