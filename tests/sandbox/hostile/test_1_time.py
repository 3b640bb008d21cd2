"""Hostile programs that try to run forever: each times out and the next test still runs.

Also records the caller's state first (see conftest.py).
"""

from __future__ import annotations

import os
import time

from .conftest import CANARY, A, outcome


def test_00_record_state(sandbox, private_tmp_before):
    assert os.environ["SBX_SECRET_CANARY"] == CANARY  # set in the caller; must never reach a job
    assert private_tmp_before


def test_infinite_loop_times_out_and_the_next_test_still_runs(sandbox):
    t0 = time.monotonic()
    res = sandbox.run("def f(x):\n    while True:\n        pass\n", [A("f(1)"), A("assert 1 + 1 == 2")])
    assert outcome(res) == [(False, "TimeoutError"), (True, None)]
    assert res.tests[0].timed_out and time.monotonic() - t0 < 4


def test_infinite_loop_while_loading(sandbox):
    res = sandbox.run("while True:\n    pass\n", [A("assert 1"), A("assert 2")])
    assert outcome(res) == [(False, "TimeoutError")] * 2
    assert all(t.timed_out for t in res.tests) and "while the program was loading" in res.program_error


def test_busy_daemon_threads_do_not_break_the_harness(sandbox):
    program = ("import threading\ndef spin():\n    while True:\n        pass\n"
               "for _ in range(4):\n    threading.Thread(target=spin, daemon=True).start()\n"
               "def f():\n    return 7\n")
    assert outcome(sandbox.run(program, [A("assert f() == 7")])) == [(True, None)]


def test_busy_threads_joined_forever_time_out(sandbox):
    program = ("import threading\ndef spin():\n    while True:\n        pass\n"
               "def f():\n    ts = [threading.Thread(target=spin) for _ in range(4)]\n"
               "    [t.start() for t in ts]\n    [t.join() for t in ts]\n")
    res = sandbox.run(program, [A("f()"), A("assert True")])
    assert outcome(res) == [(False, "TimeoutError"), (True, None)] and res.tests[0].timed_out


def test_ignoring_sigalrm_sigterm_does_not_prevent_the_kill(sandbox):
    program = ("import signal\nfor s in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
               "    signal.signal(s, signal.SIG_IGN)\nsignal.alarm(1)\ndef f():\n    while True:\n        pass\n")
    res = sandbox.run(program, [A("f()")])
    assert outcome(res) == [(False, "TimeoutError")] and res.tests[0].timed_out


def test_sleeping_forever_times_out(sandbox):
    res = sandbox.run("import time\ndef f():\n    time.sleep(3600)\n", [A("f()")], timeout_s=0.3)
    assert outcome(res) == [(False, "TimeoutError")]
