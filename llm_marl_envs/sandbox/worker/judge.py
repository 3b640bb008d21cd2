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

import collections
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
from .plaindata import NotPlainData, from_tree, to_tree
from .report import describe

RESULT_FD = 3


class ResultNotPlainData(Exception):
    """A test compared (or tested the truth of) an object that is not plain data."""


class _ProgramGone(BaseException):
    """The program process died (``abuse=False``: stop without a verdict, the fork server tells
    why) or broke the protocol (``abuse=True``: the program wrote junk into the channel)."""

    def __init__(self, message: str, abuse: bool = False) -> None:
        super().__init__(message)
        self.abuse = abuse


_ABUSE = {"error_type": "ResultChannelAbuse",
          "error_message": "the program wrote something that is not the protocol's into the judge's channel"}


class _Link:
    """The judge's end of the socket pair; counts the program's output and CPU per test.

    ``pending``: the planned calls (..callplan) whose replies are on their way, as
    ``(test index, global name, args, kwargs)``; the test running now is ``current``.
    """

    def __init__(self, channel: Any) -> None:
        self.channel = channel
        self.cpu = 0.0
        self.pending: collections.deque[tuple[int, str, Any, Any]] = collections.deque()
        self.current = -1
        self.prefetch = True

    def send(self, request: dict[str, Any]) -> None:
        try:
            self.channel.send(json.dumps(request, allow_nan=True).encode("utf-8", "surrogatepass"))
        except ChannelClosed as exc:
            raise _ProgramGone(str(exc)) from None

    def ask(self, request: dict[str, Any]) -> Any:
        self.send(request)
        return self.receive()

    def planned(self, name: str, args: Any, kwargs: Any) -> bool:
        """Whether the next planned call is this one (then its reply is the next to receive)."""
        if not self.pending:
            return False
        test, planned_name, planned_args, planned_kwargs = self.pending[0]
        if test == self.current and planned_name == name and planned_args == args and planned_kwargs == kwargs:
            self.pending.popleft()
            return True
        self.abandon()
        return False

    def abandon(self) -> None:
        """Not the planned call: receive (and drop) the rest of the batch; live calls from now on."""
        self.prefetch = False
        self.skip_until(None)

    def skip_until(self, test: int | None) -> None:
        """Drop the replies of planned calls (of tests before ``test``; None: all) not made."""
        while self.pending and (test is None or self.pending[0][0] < test):
            self.pending.popleft()
            try:
                self.receive()
            except _ProgramGone:
                raise
            except BaseException:  # noqa: BLE001 - the program's exception, for a call not made
                pass

    def receive(self) -> Any:
        try:
            reply = json.loads(self.channel.recv())
        except ChannelAbuse as exc:
            raise _ProgramGone(str(exc), abuse=True) from None
        except ChannelClosed as exc:
            raise _ProgramGone(str(exc)) from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise _ProgramGone(str(exc), abuse=True) from None
        if type(reply) is not dict:
            raise _ProgramGone("malformed reply", abuse=True)
        if "skip" in reply:
            return None, None
        cpu = reply.get("c")
        if type(cpu) is float and cpu > 0:
            self.cpu += cpu
        output = reply.get("o")
        if type(output) is list and len(output) == 4:
            _add_output(sys.stdout, output[0], output[1])
            _add_output(sys.stderr, output[2], output[3])
        if "x" in reply:
            raise _remote_exception(reply["x"])
        try:
            value = from_tree(reply.get("r"), self._deref)
            changed = reply.get("m")
            return value, changed
        except (NotPlainData, RecursionError) as exc:
            raise ResultNotPlainData(f"the program sent something that is not plain data: {exc}") from None

    def _deref(self, tag: str, data: Any) -> Any:
        if tag == "h" and type(data) is int:
            return Remote(self, {"h": data}, None)
        raise NotPlainData(f"unknown tag {tag!r}")


def _add_output(stream: Any, text: Any, total: Any) -> None:
    if isinstance(stream, BoundedText) and type(text) is str and type(total) is int:
        stream.write(text)
        stream.total += max(0, total - len(text))


def _target_tree(value: Any) -> Any:
    if isinstance(value, Remote):
        return value._sbx_ref
    raise NotPlainData(f"a {type(value).__name__} defined by the test cannot be passed to the program")


class Remote:
    """Something of the program's: a global (by name) or an object it keeps (by reference)."""

    __slots__ = ("_sbx_link", "_sbx_ref", "__name__")

    def __init__(self, link: _Link, ref: dict[str, Any], name: str | None) -> None:
        object.__setattr__(self, "_sbx_link", link)
        object.__setattr__(self, "_sbx_ref", ref)
        object.__setattr__(self, "__name__", name or "<object of the program>")

    def _sbx_op(self, op: str, **fields: Any) -> Any:
        value, _changed = self._sbx_link.ask({"op": op, "t": self._sbx_ref, **fields})
        return value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            request = {"op": "call", "t": self._sbx_ref, "a": to_tree(list(args), _target_tree),
                       "k": to_tree(kwargs, _target_tree)}
        except NotPlainData as exc:
            raise TypeError(f"cannot pass this argument to the program: {exc}") from None
        link = self._sbx_link
        ref = self._sbx_ref
        if link.pending and "g" in ref and link.planned(ref["g"], request["a"], request["k"]):
            value, changed = link.receive()
        else:
            value, changed = link.ask(request)
        if type(changed) is list:
            _apply_changes(args, kwargs, changed, self._sbx_link._deref)
        return value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._sbx_op("getattr", n=name)

    def __iter__(self) -> Any:
        iterator = self._sbx_op("iter")
        if not isinstance(iterator, Remote):
            return iter(iterator)
        return _RemoteIterator(iterator)

    def __len__(self) -> int:
        value = self._sbx_op("len")
        if type(value) is not int:
            raise ResultNotPlainData("len() of an object of the program did not give an int")
        return value

    def __getitem__(self, key: Any) -> Any:
        try:
            tree = to_tree(key, _target_tree)
        except NotPlainData as exc:
            raise TypeError(f"cannot pass this key to the program: {exc}") from None
        return self._sbx_op("getitem", k=tree)

    def __str__(self) -> str:
        value = self._sbx_op("str")
        return value if type(value) is str else ""

    def __repr__(self) -> str:
        value = self._sbx_op("repr")
        return value if type(value) is str else ""

    # Comparisons and hashing are the judge's own, by identity (``object``'s): an object of the
    # program is equal to nothing but itself, whatever its class says.
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        if "g" in self._sbx_ref:  # a function or class of the program: true, as in Python
            return True
        raise ResultNotPlainData(
            f"{self.__name__} is not plain data (builtin types only): the sandbox does not test its "
            "truth, since that would run the program's own __bool__")


class _RemoteIterator:
    def __init__(self, remote: Remote) -> None:
        self._remote = remote

    def __iter__(self) -> _RemoteIterator:
        return self

    def __next__(self) -> Any:
        return self._remote._sbx_op("next")


def _apply_changes(args: tuple[Any, ...], kwargs: dict[str, Any], changed: list[Any], deref: Any) -> None:
    """Mirror the program's in-place changes of mutable arguments (``xs.sort()``) on ours."""
    for item in changed:
        if type(item) is not list or len(item) != 2:
            continue
        where, tree = item
        if type(where) is int and 0 <= where < len(args):
            mine = args[where]
        elif type(where) is str and where in kwargs:
            mine = kwargs[where]
        else:
            continue
        try:
            new = from_tree(tree, deref)
        except NotPlainData:
            continue
        if type(mine) is not type(new) or mine == new:
            continue
        if type(mine) in (list, bytearray):
            mine[:] = new
        else:
            mine.clear()
            mine.update(new)


def _remote_exception(info: Any) -> BaseException:
    if type(info) is not list or len(info) != 4 or not all(type(x) is str for x in info):
        return _ProgramGone("malformed exception", abuse=True)
    name, base_name, message, tb = info
    base = _PRISTINE_BUILTINS.get(base_name)
    if not (isinstance(base, type) and issubclass(base, BaseException)) or base in (_ProgramGone,):
        base = Exception
    try:
        klass = type(name if name.isidentifier() else base.__name__, (base,),
                     {"_sbx_traceback": tb, "__module__": "builtins" if name == base_name else "solution"})
        exc = klass(message)
    except TypeError:  # a base that cannot be subclassed or built from one message
        exc = Exception(message)
        exc._sbx_traceback = tb  # type: ignore[attr-defined]
    return exc


def run_judge_process(payload: dict[str, Any], fd: int) -> NoReturn:
    """Entry point in the confined judge process (never returns)."""
    emit, finish = _reporter(payload["nonce"], RESULT_FD, os.write, os.close, os._exit, time.monotonic, json.dumps)
    judge(payload, Channel(fd), emit, finish, os._exit)


def judge(payload: dict[str, Any], channel: Any, emit: Any, finish: Any, stop: Any) -> NoReturn:
    """Run the set-up and tests of ``payload`` against the program at the other end of
    ``channel``; ``stop()`` ends without a verdict (the program process died)."""
    link = _Link(channel)
    limit = int(payload["limits"]["report_chars"])
    hard = int(payload["limits"]["output_bytes"])
    indices = list(payload["indices"])
    try:
        link.channel.recv()  # the program process is confined: what it sends from now on is the program's
    except ChannelClosed:
        emit("infra", -1, False, {"error": "the program process could not be set up"})
        stop(0)
    emit(P.REC_READY, -1, True, {})
    setup_code, compiled = _load_compiled(payload, indices) or _compile_tests(payload, indices, emit, finish, limit)
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
    test_ns = _namespace(link, loaded.get("names"))
    program_values = dict(test_ns)
    sys.stdout, sys.stderr = BoundedText(limit, hard), BoundedText(limit, hard)
    try:
        exec(setup_code, test_ns)  # noqa: S102
    except _ProgramGone as gone:
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
        except _ProgramGone as gone:
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


def _send_batch(link: _Link, plans: list[Any], upcoming: list[tuple[int, Any]], ns: dict[str, Any]) -> None:
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


def _namespace(link: _Link, names: Any) -> dict[str, Any]:
    """The tests' namespace: the program's globals as references, plain values and modules."""
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
            if module is None:
                try:
                    module = importlib.import_module(entry[1])
                except BaseException:  # noqa: BLE001 - not importable here: the tests import it themselves
                    continue
            ns[name] = module
    return ns


__all__ = ["Remote", "ResultNotPlainData", "run_judge_process"]
