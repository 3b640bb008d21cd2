"""Per-job isolation: nothing of an earlier job is readable, no memory escapes the per-process
limits, no extra CPU share, hard limits, only allow-listed host paths, and a dead zygote
means a fresh worker.
"""

from __future__ import annotations

import os
import uuid

import pytest

from llm_marl_envs.sandbox import AssertTest, Job, Sandbox

from ..conftest import small_config
from .conftest import MEMSCAN, passed

# -- 2. nothing of an earlier job is readable ----------------------------------------------------

def test_the_next_job_cannot_read_the_previous_jobs_program_and_tests(one_worker):
    first = Job("def g():\n    return 1\nSECRET = 'progsecret-55123Y'\n",
                [AssertTest("assert g() == 1, 'testsecret-77012Y'")])
    assert passed(one_worker.run_batch([first])[0]) == [True]
    probe = MEMSCAN + "def leaked():\n    return _scan(rb'(?:prog|test)secret-[0-9]{5}Y')\n"
    res = one_worker.run(probe, [AssertTest("assert leaked() == [], leaked()")])
    assert passed(res) == [True], res.tests[0].error_message


# -- 3./4. memory that per-process limits do not count ------------------------------------------

SHM = ("import ctypes\n"
       "libc = ctypes.CDLL(None, use_errno=True)\n"
       "KEY = 0x5b1c0de\n"
       "def create():\n    return libc.shmget(KEY, 64 << 20, 0o1666)\n"  # IPC_CREAT | 0666
       "def find():\n    return libc.shmget(KEY, 0, 0)\n"
       "def queue():\n    return libc.msgget(KEY, 0o1666)\n")


def test_sysv_shared_memory_does_not_outlive_its_job(one_worker):
    one_worker.run(SHM, [AssertTest("create()")])
    res = one_worker.run(SHM, [AssertTest("assert find() == -1"), AssertTest("assert create() == -1"),
                               AssertTest("assert queue() == -1")])
    assert passed(res) == [True, True, True], [t.error_message for t in res.tests]


def test_memfd_cannot_hold_memory_beyond_the_limit(sandbox):
    program = ("import ctypes, os\n"
               "def hold():\n"
               "    libc = ctypes.CDLL(None, use_errno=True)\n"
               "    fd = libc.memfd_create(b'x', 0)\n"
               "    if fd < 0:\n        return 'denied'\n"
               "    try:\n        os.posix_fallocate(fd, 0, 600 << 20)\n"  # limit: 256 MB
               "    except OSError:\n        return 'refused'\n"
               "    return 'held'\n"
               "def hold_os():\n"
               "    try:\n        fd = os.memfd_create('y')\n    except OSError:\n        return 'denied'\n"
               "    os.posix_fallocate(fd, 0, 600 << 20)\n    return 'held'\n")
    res = sandbox.run(program, [AssertTest("assert hold() != 'held'"), AssertTest("assert hold_os() != 'held'")])
    assert passed(res) == [True, True]


# -- 5. CPU shares ------------------------------------------------------------------------------

def test_a_job_cannot_make_new_sessions_or_leave_its_cpu(sandbox):
    program = ("import ctypes, os\n"
               "libc = ctypes.CDLL(None, use_errno=True)\n"
               "def new_session():\n"
               "    pid = libc.fork()\n"
               "    if pid == 0:\n        os._exit(0 if libc.setsid() != -1 else 1)\n"
               "    _, status = os.waitpid(pid, 0)\n"
               "    return os.waitstatus_to_exitcode(status) == 0\n"
               "def move():\n"
               "    try:\n        os.sched_setaffinity(0, set(range(os.cpu_count())))\n"
               "    except OSError:\n        return False\n"
               "    return True\n")
    res = sandbox.run(program, [AssertTest("assert new_session() is False"), AssertTest("assert move() is False")])
    assert passed(res) == [True, True], [t.error_message for t in res.tests]


# -- 6. hard limits and the readable host paths ---------------------------------------------------

def test_core_and_stack_have_hard_limits(sandbox):
    program = ("import resource\n"
               "def core():\n    return resource.getrlimit(resource.RLIMIT_CORE)\n"
               "def stack_hard():\n    return resource.getrlimit(resource.RLIMIT_STACK)[1]\n"
               "def raise_core():\n"
               "    try:\n        resource.setrlimit(resource.RLIMIT_CORE, (1 << 30, 1 << 30))\n"
               "    except (ValueError, OSError):\n        return False\n    return True\n")
    tests = [AssertTest("assert core() == (0, 0)"),
             AssertTest("import resource\nassert stack_hard() != resource.RLIM_INFINITY"),
             AssertTest("assert raise_core() is False")]
    assert passed(sandbox.run(program, tests)) == [True, True, True]


@pytest.fixture()
def host_file():
    """A world-readable file in a host directory outside the allow-list (not /root, not /home)."""
    base = "/var/lib" if os.access("/var/lib", os.W_OK) else None
    if base is None:
        pytest.skip("needs to create a directory under /var/lib (run as root, as CI does)")
    directory = os.path.join(base, f"sbx-probe-{uuid.uuid4().hex[:8]}")
    os.mkdir(directory, 0o755)
    path = os.path.join(directory, "data.txt")
    with open(path, "w") as f:
        f.write("host data\n")
    os.chmod(path, 0o644)
    yield path
    os.unlink(path)
    os.rmdir(directory)


def test_only_allow_listed_host_paths_are_readable(sandbox, host_file):
    program = ("import os\n"
               "def readable(p):\n"
               "    try:\n        with open(p) as f:\n            f.read()\n        return True\n"
               "    except OSError:\n        return False\n")
    tests = [AssertTest(f"assert readable({host_file!r}) is False"),
             AssertTest("assert readable('/etc/hostname') is False"),
             AssertTest("import json, os\nassert readable(os.__file__) and readable(json.__file__)")]
    assert passed(sandbox.run(program, tests)) == [True, True, True], sandbox.isolation.get("notes")


def test_a_dead_zygote_means_a_fresh_worker_not_a_wrong_answer():
    import signal
    import time

    from ..conftest import processes_named

    with Sandbox(small_config(workers=1)) as sb:
        assert passed(sb.run("def f():\n    return 1\n", [AssertTest("assert f() == 1")])) == [True]
        before = set(processes_named("sbx-zygote"))
        zygotes = [pid for pid in before if os.getppid() != pid and _under(pid, sb.worker_pids())]
        assert len(zygotes) == 1
        os.kill(zygotes[0], signal.SIGKILL)
        time.sleep(0.05)
        res = sb.run("def f():\n    return 1\n", [AssertTest("assert f() == 1")])
        assert passed(res) == [True]  # retried on a fresh worker (infra_retries)


def _under(pid: int, roots: list[int]) -> bool:
    """Whether ``pid`` descends from one of ``roots``."""
    while pid > 1:
        if pid in roots:
            return True
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            return False
    return False
