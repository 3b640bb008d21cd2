"""Hostile programs that fork, kill, exit or crash: contained to their own job."""

from __future__ import annotations

import threading
import time

import pytest

from ..conftest import job_processes, processes_named
from .conftest import A, outcome


def test_fork_bomb_through_os_fork_is_blocked_by_the_guard(sandbox):
    res = sandbox.run("import os\nwhile True:\n    os.fork()\n", [A("assert 1")])
    assert outcome(res) == [(False, "PermissionError")]
    assert res.program_error == "PermissionError: [Errno 1] os.fork() is disabled in the sandbox"


def test_guard_blocks_processes_and_destructive_calls(sandbox):
    program = ("import os, shutil, subprocess, multiprocessing\n"
               "def run():\n    subprocess.run(['true'])\n"
               "def system():\n    os.system('true')\n"
               "def rmtree():\n    os.makedirs('d/e')\n    shutil.rmtree('d')\n"
               "def popen():\n    os.popen('true')\n"
               "def mp():\n    multiprocessing.Process(target=print).start()\n")
    res = sandbox.run(program, [A("run()"), A("system()"), A("rmtree()"), A("popen()"), A("mp()")])
    assert outcome(res) == [(False, "PermissionError")] * 5
    messages = [t.error_message for t in res.tests]
    assert messages[0] == "[Errno 1] subprocess.Popen() is disabled in the sandbox"
    assert messages[2] == "[Errno 1] os.rmdir() is disabled in the sandbox"


def test_fork_bomb_through_libc_is_contained(sandbox):
    bomb = "import ctypes\nlibc = ctypes.CDLL(None)\nwhile True:\n    libc.fork()\n"
    threads_job = ("import threading\ndef f():\n    ts = [threading.Thread(target=lambda: None) for _ in range(8)]\n"
                   "    [t.start() for t in ts]\n    [t.join() for t in ts]\n    return len(ts)\n")
    results = {}
    bomber = threading.Thread(target=lambda: results.setdefault("bomb", sandbox.run(bomb, [A("assert 1")])))
    bomber.start()
    time.sleep(0.3)  # the bomb is now running in one worker: the other must be unaffected
    results["other"] = sandbox.run(threads_job, [A("assert f() == 8")])
    bomber.join()
    assert outcome(results["bomb"]) == [(False, "TimeoutError")]
    if sandbox.isolation["user_ns"]:  # RLIMIT_NPROC is per worker only with a user namespace
        assert outcome(results["other"]) == [(True, None)]
    else:
        assert results["other"].ok
    assert job_processes(sandbox) == []


def test_daemon_process_does_not_outlive_its_job(sandbox):
    program = (
        "import ctypes, os, time\nlibc = ctypes.CDLL(None)\n"
        "def f():\n    if libc.fork() == 0:\n        libc.setsid()\n        if libc.fork() == 0:\n"
        "            libc.prctl(15, b'sbxdaemon42', 0, 0, 0)\n            time.sleep(60)\n"
        "        os._exit(0)\n    time.sleep(0.2)\n    return 1\n"
    )
    res = sandbox.run(program, [A("assert f() == 1")])
    assert outcome(res) == [(True, None)]
    assert job_processes(sandbox) == [] and processes_named("sbxdaemon42") == []


def test_killing_the_parent_or_everything_fails_harmlessly(sandbox):
    iso = sandbox.isolation
    if not (iso["pid_ns"] or iso["privileges_dropped"]):
        pytest.skip("kill(-1) from a job running as the caller's own user, without a PID namespace, "
                    "would kill the caller's processes: this configuration does not protect against it")
    before = sandbox.worker_pids()
    program = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
               "def via_os():\n    os.kill(os.getppid(), 9)\n"
               "def via_libc():\n    return libc.getppid(), libc.kill(libc.getppid(), 9), ctypes.get_errno()\n")
    # With PID namespaces the fork server is outside the job's own: it has no pid there (getppid() is
    # 0, and kill(0) is the job's own process group). Without, it is another user's: EPERM.
    parent = "assert via_libc()[0] == 0" if iso["pid_ns"] else "assert via_libc()[1:] == (-1, 1)"
    res = sandbox.run(program, [A("via_os()"), A(parent), A("libc.kill(-1, 9)"), A("assert 1")])
    assert outcome(res) == [(False, "PermissionError"), (True, None), (True, None), (True, None)]
    assert sandbox.worker_pids() == before


def test_killing_its_own_process_group(sandbox):
    """``kill(0, SIGKILL)`` kills the processes of the job's group; with PID namespaces the job
    process itself, the init of its namespace, ignores a signal it sends itself (as every init does)."""
    program = ("import ctypes, os, time\nlibc = ctypes.CDLL(None)\n"
               "def f():\n    pid = libc.fork()\n    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n"
               "    libc.kill(0, 9)\n    return os.waitpid(pid, 0)[1] & 0x7F\n"
               "def g():\n    os.killpg(0, 9)\n")
    res = sandbox.run(program, [A("g()"), A("assert f() == 9"), A("assert 2")])
    if sandbox.isolation["pid_ns"]:
        assert outcome(res) == [(False, "PermissionError"), (True, None), (True, None)]
    else:
        assert outcome(res) == [(False, "PermissionError"), (False, "ProcessCrashed"), (True, None)]
        assert "SIGKILL" in res.tests[1].error_message


def test_os_exit_in_the_middle_of_the_tests(sandbox):
    res = sandbox.run("import os\ndef f():\n    os._exit(0)\n", [A("assert 1"), A("f()"), A("assert 2")])
    assert outcome(res) == [(True, None), (False, "ProcessExited"), (True, None)]
    assert "code 0" in res.tests[1].error_message


def test_sys_exit_in_the_middle_of_the_tests(sandbox):
    program = "import sys\nsys.exit(0)\ndef never():\n    pass\n"
    assert outcome(sandbox.run(program, [A("assert 1")])) == [(True, None)]  # exit(0) while loading is fine
    res = sandbox.run("import sys\ndef f():\n    sys.exit(0)\n", [A("assert 1"), A("f()"), A("assert 2")])
    assert outcome(res) == [(True, None), (False, "SystemExit"), (True, None)]


def test_segfault_through_ctypes(sandbox):
    res = sandbox.run("import ctypes\ndef f():\n    ctypes.string_at(0)\n", [A("assert 1"), A("f()"), A("assert 2")])
    assert outcome(res) == [(True, None), (False, "ProcessCrashed"), (True, None)]
    assert "SIGSEGV" in res.tests[1].error_message


def test_thread_bomb_hits_the_process_limit(sandbox):
    program = ("import threading, time\ndef f():\n    while True:\n"
               "        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n")
    res = sandbox.run(program, [A("f()"), A("assert 1")])
    assert outcome(res) == [(False, "RuntimeError"), (True, None)]
    assert res.tests[0].error_message == "can't start new thread"
