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

import importlib
import io
import json
import os
import sys
import time
import types
from typing import Any, NoReturn

from . import protocol as P
from .channel import Channel, ChannelAbuse, ChannelClosed
from .harness import _PRISTINE_BUILTINS, BoundedText, _compile_tests, _load_compiled, _reporter
from .plaindata import NotPlainData, from_tree
from .remote import Link, ProgramGone, Remote, ResultNotPlainData
from .report import describe

RESULT_FD = 3


_ABUSE = {"error_type": "ResultChannelAbuse",
          "error_message": "the program wrote something that is not the protocol's into the judge's channel"}


def run_judge_process(payload: dict[str, Any], fd: int) -> NoReturn:
    """Entry point in the confined judge process (never returns)."""
    emit, finish = _reporter(payload["nonce"], RESULT_FD, os.write, os.close, os._exit, time.monotonic, json.dumps)
    judge(payload, Channel(fd), emit, finish, os._exit)


def judge(payload: dict[str, Any], channel: Any, emit: Any, finish: Any, stop: Any, setup_code: Any = None,
          modules: frozenset[str] | None = None) -> NoReturn:
    """Run the set-up and tests of ``payload`` against the program at the other end of
    ``channel``; ``stop()`` ends without a verdict (the program process died).

    ``setup_code`` replaces the compiled set-up; ``modules``: bind only these modules (already
    loaded) for the modules the program imported, never import one (the fork server's judge,
    see .served).
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
        loaded = json.loads(link.channel.recv())
        if type(loaded) is not dict:
            raise ValueError("not a message of the protocol")
    except ChannelAbuse:
        loaded = {"error": _ABUSE}
    except ChannelClosed:
        stop(0)  # the program process died while loading: the fork server says why
    except (ValueError, UnicodeDecodeError):
        loaded = {"error": _ABUSE}
    if "compile" in loaded:
        emit(P.REC_COMPILE, -1, False, {"error": str(loaded["compile"])[: 4 * limit]})
        finish()
    if "error" in loaded or "ok" not in loaded:
        info = loaded.get("error") if type(loaded.get("error")) is dict else {}
        emit(P.REC_PROGRAM, -1, False, _clean_info(info, limit))
        finish()
    emit(P.REC_PROGRAM, -1, True, _clean_info(loaded["ok"], limit, timing_only=True))
    test_ns = _namespace(link, loaded.get("names"), modules)
    program_values = dict(test_ns)
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
    emit(P.REC_SETUP, -1, True, {}, now=False)
    clock, cpu = time.perf_counter, time.process_time
    plans = payload.get("plans") if type(payload.get("plans")) is list else None
    for position, (index, code) in enumerate(compiled):
        link.skip_until(index)
        link.current = index
        if plans is not None and link.prefetch and not link.pending:
            _send_batch(link, plans, compiled[position:], test_ns)
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


def _send_batch(link: Link, plans: list[Any], upcoming: list[tuple[int, Any]], ns: dict[str, Any]) -> None:
    """Ask the program process, in one message, for the planned calls of the next tests."""
    groups: list[list[Any]] = []
    assigned: set[str] = set()
    for index, _code in upcoming:
        plan = plans[index] if index < len(plans) else None
        calls = _resolve(plan, ns, assigned)
        if calls is None:
            break
        groups.append(calls)
        link.pending.extend((index, name, args, kwargs) for name, args, kwargs in calls)
        assigned.update(plan["stores"])
    if link.pending:
        link.send({"op": "batch", "groups": groups})


def _resolve(plan: Any, ns: dict[str, Any], assigned: set[str]) -> list[list[Any]] | None:
    """The program's calls of a plan, by global name; None if the test is not plannable here."""
    if type(plan) is not dict:
        return None
    for name in plan["names"]:
        if name in assigned or not _inert(ns.get(name, _PRISTINE_BUILTINS.get(name))):
            return None
    calls = []
    for name, args, kwargs in plan["calls"]:
        if name in assigned:
            return None
        value = ns.get(name, _PRISTINE_BUILTINS.get(name))
        if isinstance(value, Remote) and "g" in value._sbx_ref:
            calls.append([value._sbx_ref["g"], args, kwargs])
        elif not _inert(value):
            return None
    return calls


_BUILTIN_IDS = frozenset(id(v) for v in _PRISTINE_BUILTINS.values())


def _inert(value: Any) -> bool:
    """Cannot call the program when used (a builtin, a module, plain data, nothing)."""
    if isinstance(value, Remote):
        return False
    return (value is None or id(value) in _BUILTIN_IDS or isinstance(value, types.ModuleType)
            or not callable(value))


def _clean_info(info: Any, limit: int, timing_only: bool = False) -> dict[str, Any]:
    """The program process's report of its top-level run, with only the fields we expect."""
    if type(info) is not dict:
        return {}
    out: dict[str, Any] = {}
    for key in ("wall_time_s", "cpu_time_s"):
        if type(info.get(key)) in (int, float):
            out[key] = float(info[key])
    if not timing_only:
        for key in ("error_type", "error_message", "traceback"):
            if type(info.get(key)) is str:
                out[key] = info[key][: 2 * limit]
        out["memory_exceeded"] = info.get("error_type") == "MemoryError"
        out.setdefault("error_type", "Error")
    return out


def _namespace(link: Link, names: Any, modules: frozenset[str] | None = None) -> dict[str, Any]:
    """The tests' namespace: the program's globals as references, plain values and modules
    (``modules``: only those, and only if loaded already)."""
    ns: dict[str, Any] = {"__name__": "solution", "__builtins__": _PRISTINE_BUILTINS}
    if type(names) is not dict:
        return ns
    for name, entry in names.items():
        if type(name) is not str or not name.isidentifier() or type(entry) is not list or not entry:
            continue
        kind = entry[0]
        if kind in ("c", "o"):
            ns[name] = Remote(link, {"g": name}, name)
        elif kind == "v" and len(entry) == 2:
            try:
                ns[name] = from_tree(entry[1])
            except (NotPlainData, RecursionError):
                ns[name] = Remote(link, {"g": name}, name)
        elif kind == "m" and len(entry) == 2 and type(entry[1]) is str and entry[1]:
            module = sys.modules.get(entry[1])
            if modules is not None and (entry[1] not in modules or module is None):
                continue
            if module is None:
                try:
                    module = importlib.import_module(entry[1])
                except BaseException:  # noqa: BLE001 - not importable here: the tests import it themselves
                    continue
            ns[name] = module
    return ns


__all__ = ["Remote", "ResultNotPlainData", "run_judge_process"]
