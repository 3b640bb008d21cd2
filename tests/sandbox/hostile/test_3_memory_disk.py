"""Hostile programs that exhaust memory, the stack, the disk or file descriptors."""

from __future__ import annotations

from .conftest import A, outcome


def test_memory_bomb_single_allocation(sandbox):
    res = sandbox.run("def f():\n    return bytearray(10 ** 10)\n", [A("f()"), A("assert 1")])
    assert outcome(res) == [(False, "MemoryError"), (True, None)] and res.tests[0].memory_exceeded


def test_memory_bomb_growing(sandbox):
    res = sandbox.run("def f():\n    x = []\n    while True:\n        x.append(bytearray(10 ** 7))\n", [A("f()")])
    assert outcome(res) == [(False, "MemoryError")] and res.tests[0].memory_exceeded


def test_recursion_bomb(sandbox):
    res = sandbox.run("def f(n):\n    return f(n + 1)\n", [A("f(0)"), A("assert 1")])
    assert outcome(res) == [(False, "RecursionError"), (True, None)]
    tb = res.tests[0].traceback
    assert 'File "solution.py", line 2, in f' in tb and "more times]" in tb and len(tb) <= 2200


def test_c_stack_recursion_bomb_crashes_only_the_job(sandbox):
    program = ("import sys\nsys.setrecursionlimit(10 ** 8)\ndef f():\n    a, b = [], []\n"
               "    for _ in range(200000):\n        a, b = [a], [b]\n    return a == b\n")
    res = sandbox.run(program, [A("f()"), A("assert 1")], timeout_s=5)
    assert outcome(res) == [(False, "ProcessCrashed"), (True, None)]
    assert "SIGSEGV" in res.tests[0].error_message


def test_disk_fill_one_big_file(sandbox):
    program = "def f():\n    with open('big', 'wb') as fh:\n        for _ in range(100):\n            fh.write(b'x' * 10 ** 6)\n"
    res = sandbox.run(program, [A("f()")])
    assert outcome(res) == [(False, "OSError")] and "[Errno 27] File too large" in res.tests[0].error_message


def test_disk_fill_many_files(sandbox):
    program = ("def f():\n    for i in range(10 ** 6):\n        with open(f'f{i}', 'wb') as fh:\n"
               "            fh.write(b'x' * 10 ** 6)\n")
    res = sandbox.run(program, [A("f()")])
    assert outcome(res) == [(False, "OSError")] and "[Errno 28] No space left on device" in res.tests[0].error_message


def test_too_many_open_files(sandbox):
    res = sandbox.run("def f():\n    return [open('/dev/null') for _ in range(10000)]\n", [A("f()")])
    assert outcome(res) == [(False, "OSError")] and "[Errno 24] Too many open files" in res.tests[0].error_message
