"""The program process of an assert-mode job: runs the program, then answers the judge's calls.

This process runs untrusted code and is never told the tests. It loads the program as module
``solution`` (its top-level output goes to the run's stdout/stderr), tells the judge what the
program defined (functions and classes by name, plain-data constants by value), and then
serves the judge's requests one at a time: call a function, get an attribute, iterate, ...
Each request comes only once the previous one was answered, so this process never holds the
arguments of a call the tests have not made yet (see .remote.Link). Every answer is plain data
(:mod:`.plaindata`) or a reference to an object kept here; an exception raised by the program
travels as its type name, builtin base class, message and traceback. Nothing it sends decides a
test: the judge compares the values itself.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import sys
import time
import types
from typing import Any, NoReturn

from .channel import Channel, ChannelClosed
from .harness import PROGRAM_FILE, BoundedText, _compile, _flush, _syntax_error_text
from .plaindata import NotPlainData, from_tree, to_tree
from .report import describe, safe_str, type_name

_MUTABLE = (list, dict, set, bytearray)


def run_program_process(payload: dict[str, Any], fd: int) -> NoReturn:
    """Entry point in the confined program process of an assert-mode run (never returns)."""
    channel = Channel(fd)
    dumps, exit_now, clock, cpu = json.dumps, os._exit, time.perf_counter, time.process_time
    limit = int(payload["limits"]["report_chars"])
    hard = int(payload["limits"]["output_bytes"])
    try:
        code = _compile(payload["program"], PROGRAM_FILE)
    except BaseException as exc:  # noqa: BLE001
        _send(channel, dumps({"compile": _syntax_error_text(exc, limit)}))
        exit_now(0)
    del payload
    sys.stdin = io.StringIO("")
    module = types.ModuleType("solution")
    module.__file__ = PROGRAM_FILE
    sys.modules["solution"] = module
    namespace = module.__dict__
    start_wall, start_cpu = clock(), cpu()
    ok, info = True, {}
    try:
        exec(code, namespace)  # noqa: S102 - in the confined program process
    except SystemExit as exc:
        if exc.code not in (None, 0):
            ok, info = False, describe(exc, limit)
    except BaseException as exc:  # noqa: BLE001
        ok, info = False, describe(exc, limit)
    _flush(sys.stdout, sys.stderr)
    info.update(wall_time_s=clock() - start_wall, cpu_time_s=cpu() - start_cpu)
    if not ok:
        _send(channel, dumps({"error": info}))
        exit_now(0)
    _send(channel, dumps({"ok": info, "names": _names(namespace)}))
    _serve(channel, namespace, limit, hard, dumps, cpu)
    exit_now(0)


def _send(channel: Channel, text: str) -> None:
    try:
        channel.send(text.encode("utf-8", "surrogatepass"))
    except ChannelClosed:
        os._exit(0)


def _names(namespace: dict[str, Any]) -> dict[str, list[Any]]:
    """What the program defined at top level: ``c`` callables, ``m`` modules, ``v`` plain values,
    ``o`` other objects (reached through references)."""
    names: dict[str, list[Any]] = {}
    for key, value in list(namespace.items()):
        if type(key) is not str or key.startswith("__"):
            continue
        try:
            if type(value) is types.ModuleType:
                name = value.__name__
                names[key] = ["m", name if type(name) is str else ""]
            elif callable(value):
                names[key] = ["c"]
            else:
                names[key] = ["v", to_tree(value)]
        except BaseException:  # noqa: BLE001 - not plain data, or a hostile __class__
            names[key] = ["o"]
    return names


def _serve(channel: Channel, namespace: dict[str, Any], limit: int, hard: int, dumps, cpu) -> None:  # noqa: ANN001
    responder = Responder(namespace, limit, hard, dumps, cpu)
    loads = json.loads
    while True:
        try:
            request = loads(channel.recv())
        except ChannelClosed:
            return
        _send(channel, responder.respond(request))


class Responder:
    """Answers the judge's requests on the program's namespace, one reply per request."""

    def __init__(self, namespace: dict[str, Any], limit: int, hard: int, dumps, cpu) -> None:  # noqa: ANN001
        self.namespace, self.limit, self.hard, self.dumps, self.cpu = namespace, limit, hard, dumps, cpu
        self.handles: list[Any] = []

    def ref(self, obj: Any) -> dict[str, int]:
        self.handles.append(obj)
        return {"h": len(self.handles) - 1}

    def deref(self, tag: str, data: Any) -> Any:
        if tag == "h" and type(data) is int and 0 <= data < len(self.handles):
            return self.handles[data]
        if tag == "g" and type(data) is str and data in self.namespace:
            return self.namespace[data]
        raise NotPlainData(f"unknown reference {tag}:{data!r}")

    def respond(self, request: dict[str, Any]) -> str:
        limit, dumps, cpu = self.limit, self.dumps, self.cpu
        out, err = BoundedText(limit, self.hard), BoundedText(limit, self.hard)
        sys.stdout, sys.stderr = out, err
        started = cpu()
        try:
            reply = _answer(request, self.deref, self.ref)
        except BaseException as exc:  # noqa: BLE001 - the program raised (or exited)
            reply = {"x": _exception(exc, limit)}
        _flush(out, err)
        try:
            text = dumps(reply)
        except BaseException as exc:  # noqa: BLE001 - e.g. a str subclass slipped through
            text = dumps({"x": _exception(exc, limit)})
        extra = f',"c":{cpu() - started!r}'
        if out.total or err.total:
            extra += "," + dumps({"o": [out.getvalue(), out.total, err.getvalue(), err.total]})[1:-1]
        return text[:-1] + extra + "}"


def _answer(request: dict[str, Any], deref: Any, ref: Any) -> dict[str, Any]:
    op, target = request["op"], from_tree(request["t"], deref)
    if op == "call":
        args = from_tree(request["a"], deref)
        kwargs = from_tree(request["k"], deref)
        value = target(*args, **kwargs)
        reply = {"r": to_tree(value, ref)}
        changed = [[i, to_tree(a, ref)] for i, a in enumerate(args) if type(a) in _MUTABLE]
        changed += [[k, to_tree(v, ref)] for k, v in kwargs.items() if type(v) in _MUTABLE]
        if changed:
            reply["m"] = changed
        return reply
    if op == "getattr":
        value = getattr(target, request["n"])
    elif op == "iter":
        value = iter(target)
    elif op == "next":
        value = next(target)
    elif op == "len":
        value = len(target)
    elif op == "getitem":
        value = target[from_tree(request["k"], deref)]
    elif op == "str":
        value = str(target)
        value = value if type(value) is str else ""
    elif op == "repr":
        value = repr(target)
        value = value if type(value) is str else ""
    else:
        raise NotPlainData(f"unknown operation {op!r}")
    return {"r": to_tree(value, ref)}


def _exception(exc: BaseException, limit: int) -> list[str]:
    """[type name, name of its first builtin base class, message, traceback]."""
    base = "Exception"
    try:
        for klass in type(exc).__mro__:
            if getattr(builtins, klass.__name__, None) is klass:
                base = klass.__name__
                break
    except BaseException:  # noqa: BLE001
        pass
    info = describe(exc, limit)
    return [type_name(exc), base, safe_str(info.get("error_message", ""), limit), str(info.get("traceback", ""))]
