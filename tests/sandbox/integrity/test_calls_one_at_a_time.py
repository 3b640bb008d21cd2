"""No argument of a call reaches the program before the call is made (the hole call plans opened).

From a test set's second use, the judge used to ask the program process for the calls of a run of
consecutive tests in one message (call plans), so the program could read later tests' arguments
from its own process before answering earlier ones. In a chained test set, where a later test's
argument is an earlier test's expected value (``f(a) == b``, ``f(b) == c``, ...), a program that
answers each call with the next argument it finds passed all but the last test. The programs below
look for later arguments in every way a program can read its own process: the frames above its
function (``sys._getframe``: the program side's locals and globals), every object the garbage
collector tracks (``gc``, with the bytes and text they hold), the raw memory of its heap, stack and
anonymous mappings (``ctypes``), and what waits unread on its descriptors (``MSG_PEEK``). Each run
uses the same test set twice, as GRPO and pass@k do: the first use always made live calls, the
second got the plans. The attack tests failed on main at 8de34aa (run from a copy of that tree
with the same tests), with both judges; the I/O test is a guard for a property that already held.
"""

from __future__ import annotations

import pytest

from llm_marl_envs.sandbox import AssertTest, IOTest

from .conftest import MEMSCAN, passed
from .test_judge_and_protocol import SPEAK

BASE, STEP, N = 91_234_567, 17, 4  # f(BASE) == BASE + STEP == the next test's argument, ...
CHAIN = [AssertTest(f"assert f({BASE + STEP * i}) == {BASE + STEP * (i + 1)}") for i in range(N)]

# Every int a program can reach (in containers, and as digits in bytes and text), three ways; the
# cheat answers a call with the smallest such number just above its argument (the next test's).
READERS = MEMSCAN + '''
import gc, os, re, socket, sys
_DIGITS = re.compile(rb"[0-9]{8}")  # (the arguments here have 8 digits)
def _ints(obj, out, depth=0):
    kind = type(obj)
    if depth > 12:
        return
    if kind is int:
        out.add(obj)
    elif kind in (list, tuple, set, frozenset):
        for item in obj:
            _ints(item, out, depth + 1)
    elif kind is dict:
        for key, item in obj.items():
            _ints(key, out, depth + 1)
            _ints(item, out, depth + 1)
    elif kind in (bytes, bytearray, str) and len(obj) < (1 << 20):
        data = obj.encode("utf-8", "replace") if kind is str else bytes(obj)
        out.update(int(m) for m in _DIGITS.findall(data))
def seen_in_frames():  # the locals and globals of every frame above the program's function
    out, frame = set(), sys._getframe(1)
    while frame is not None:
        _ints(dict(frame.f_locals), out)
        if frame.f_globals is not globals():
            _ints(dict(frame.f_globals), out)
        frame = frame.f_back
    return out
def seen_by_gc():  # every object the garbage collector tracks, and their attributes
    out = set()
    for obj in gc.get_objects():
        _ints(obj, out)
        attrs = getattr(obj, "__dict__", None)
        if type(attrs) is dict:
            _ints(attrs, out)
    return out
def seen_in_memory(x):  # the raw bytes of the heap, stack and anonymous mappings; unread input
    out = {int(m) for m in _scan(str(x)[:3].encode() + rb"[0-9]{5}")}  # (numbers near x, fast)
    for fd in range(64):
        try:
            sock = socket.socket(fileno=fd)
        except OSError:
            continue
        try:
            _ints(sock.recv(1 << 20, socket.MSG_PEEK | socket.MSG_DONTWAIT), out)
        except OSError:
            pass
        finally:
            sock.detach()
    return out
def next_after(x, found):
    later = [n for n in found if x < n < x + 1000]
    return min(later) if later else x
'''
CHEATS = {way: READERS + f"def f(x):\n    return next_after(x, {call})\n"
          for way, call in (("frames", "seen_in_frames()"), ("gc", "seen_by_gc()"), ("memory", "seen_in_memory(x)"))}


@pytest.mark.parametrize("way", sorted(CHEATS))
def test_a_program_cannot_see_a_later_calls_arguments(one_worker, way):
    assert passed(one_worker.run(f"def f(x):\n    return x + {STEP}\n", CHAIN)) == [True] * N
    for _ in range(2):  # (on main, a test set's second use got call plans)
        res = one_worker.run(CHEATS[way], CHAIN)
        assert passed(res) == [False] * N, [(t.name, t.error_message) for t in res.tests]


# The program side spoken by the program itself: each reply is the number of call arguments the
# program has been sent so far, counting what waits unread on its channel after a pause.
COUNTING = SPEAK + '''
import select, socket, time
_channel = socket.socket(fileno=3)
def _unread():
    time.sleep(0.02)  # time for a judge that sends ahead to do so
    if not select.select([3], [], [], 0)[0]:
        return 0
    return len(_channel.recv(1 << 20, socket.MSG_PEEK | socket.MSG_DONTWAIT)) or 0
_sent = 0
_send(json.dumps({"ok": {}, "names": {"f": ["c"]}}))
while True:
    request = _recv()
    calls = [c for group in request.get("groups", [[None]]) for c in group]
    _sent += len(calls)
    ahead = 1000 if _unread() else 0
    for _call in calls:
        _send(json.dumps({"r": _sent + ahead}))
'''


def test_the_judge_sends_one_call_at_a_time(one_worker):
    """Each message to the program holds one call, and none is sent before the last was answered:
    the k-th call finds exactly k arguments sent (on main, from the second use, the first call of a
    run of planned tests found them all)."""
    tests = [AssertTest(f"assert f({k}) == {k}") for k in range(1, 5)] + [AssertTest("assert f(5) == 5 and f(6) == 6")]
    for _ in range(2):
        assert passed(one_worker.run(COUNTING, tests)) == [True] * 5


def test_an_io_program_sees_neither_other_inputs_nor_expected_outputs(one_worker):
    """I/O tests: each runs in a process of its own with its own stdin; the expected outputs never
    leave the caller. Chained as above (a test's expected output is the next test's input; the last
    one's is nobody's input), a program that looks everywhere it can prints what it found."""
    tests = [IOTest(f"{BASE + STEP * i}\n", f"{BASE + STEP * (i + 1)}\n") for i in range(N)]
    scan = READERS + "x = int(input())\nprint(next_after(x, seen_by_gc() | seen_in_memory(x)))\n"
    assert passed(one_worker.run(f"print(int(input()) + {STEP})", tests)) == [True] * N
    res = one_worker.run(scan, tests)
    assert passed(res) == [False] * N, [(t.got, t.stderr) for t in res.tests]
