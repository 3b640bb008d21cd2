"""Warming the judge and program code in the fork server, before the zygote is forked.

CPython 3.11 rewrites a function's bytecode in place as it warms up (quickening, then
specialisation) and fills its caches as code runs. Done in every job process, each such write
copies a page (copy-on-write) and the rewriting costs CPU; done here, once, every process the
zygote forks inherits warm code. This runs the real judge (:func:`.judge.judge`) against the
real program side (:class:`.program.Responder`) in this process, connected by a loopback
instead of a socket pair, on a small job with calls, a failing test and an exception, with the
tests compiled in the job and as the caller sends them; records go nowhere. It leaves no trace: the standard streams, ``sys.modules`` and
``linecache`` are restored.
"""

from __future__ import annotations

import json
import linecache
import sys
import time
from typing import Any, NoReturn

from . import protocol as P
from .child import ChildSpec
from .harness import _compile
from .program import Responder, _names

_PROGRAM = ("def f(x):\n    return x\n"
            "def g(x):\n    if x < 0:\n        raise ValueError('negative')\n    return [x, (x, 'a'), {x: 1.5}]\n"
            "LIMIT = 3\n")
_TESTS = ["assert candidate(1) == 1", "assert candidate(2) == 2", "assert g(3) == [3, (3, 'a'), {3: 1.5}]",
          "assert g(-1) == 1", "x = [candidate(i) for i in range(3)]\nassert x == [0, 1, 2] and LIMIT == 3",
          "print('out')\nassert candidate(1) == 2, 'no'"]


class _Done(Exception):
    pass


class _Loopback:
    """A channel whose other end is a :class:`Responder` in this very process."""

    def __init__(self, responder: Responder, first: list[bytes]) -> None:
        self.responder = responder
        self.queue = list(first)

    def send(self, data: bytes) -> None:
        streams = sys.stdout, sys.stderr
        try:
            self.queue.append(self.responder.respond(json.loads(data)).encode())
        finally:
            sys.stdout, sys.stderr = streams

    def recv(self) -> bytes:
        return self.queue.pop(0)


def warm_up(rounds: int = 8) -> None:
    """Run the judge and the program side together on a small job, ``rounds`` times."""
    from .judge import judge

    limits = {"report_chars": 4096, "output_bytes": 1 << 20}
    tests = [{"kind": "assert", "code": code, "name": f"L{i}"} for i, code in enumerate(_TESTS)]
    compiled = P.compile_test_set("candidate = f\n", tests)
    saved = sys.stdin, sys.stdout, sys.stderr
    saved_solution = sys.modules.get("solution")
    try:
        for round_ in range(rounds):
            ChildSpec(job_dir="/", env=None, stdin_fd=0, stdout_fd=1, stderr_fd=2, result_fd=3,
                      rlimits={"cpu_s": 1, "core_bytes": 0}, extra_fds=[4])
            namespace: dict[str, Any] = {"__name__": "solution", "__builtins__": __builtins__}
            exec(_compile(_PROGRAM, "solution.py"), namespace)  # noqa: S102 - our own code
            responder = Responder(namespace, 4096, 1 << 20, json.dumps, time.process_time)
            loaded = json.dumps({"ok": {"wall_time_s": 0.0, "cpu_time_s": 0.0}, "names": _names(namespace)})
            channel = _Loopback(responder, [b'"up"', loaded.encode()])
            payload = {"nonce": "warm-up", "setup": "candidate = f\n", "tests": tests, "limits": limits,
                       "indices": list(range(len(tests))), "compiled": compiled if round_ % 2 else None}

            def stop(_code: int = 0) -> NoReturn:
                raise _Done

            def emit(*_args: Any, **_kwargs: Any) -> None:
                pass

            try:
                judge(payload, channel, emit, stop, stop)
            except _Done:
                pass
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        if saved_solution is None:
            sys.modules.pop("solution", None)
        linecache.clearcache()


__all__ = ["warm_up"]
