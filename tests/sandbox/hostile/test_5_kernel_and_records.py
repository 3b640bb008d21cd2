"""Issue #30, classes 3-5: forged records in stdin/stdout mode, flags of the caller that would
drop asserts, output copied to the caller unbounded, and host-wide kernel resources outside
every per-job limit (inodes, inotify, AIO, ptys, socket families the network namespace ignores).

Every test below failed on main at 2c0baee (run from a copy of that tree with the same tests).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

from llm_marl_envs.sandbox import IOTest, Job
from llm_marl_envs.sandbox.assemble import build_request
from llm_marl_envs.sandbox.batch import reply_deadline
from llm_marl_envs.sandbox.pool import WorkerProcess

from ..conftest import small_config
from .conftest import A, outcome

# The I/O harness's record writer, found from the program's own frame (it is the caller's frame).
FIND_EMIT = "import sys, time\nemit = sys._getframe(1).f_locals.get('emit') or (lambda *a, **k: None)\n"


# -- class 3: records only the trusted side writes (stdin/stdout mode) ---------------------------

def test_forged_records_cannot_restart_an_io_tests_deadline(sandbox):
    program = FIND_EMIT + ("print('ok', flush=True)\n"
                           "for _ in range(5):\n    time.sleep(0.3)\n    emit('begin', 0, True, {})\n"
                           "emit('result', 0, True, {'exit_code': 0})\n")
    res = sandbox.run(program, [IOTest("", "ok\n")])
    assert outcome(res) == [(False, "TimeoutError")] and res.tests[0].timed_out


def test_forged_record_fields_cannot_make_the_caller_raise_or_lose_the_batch(sandbox):
    program = FIND_EMIT + "emit('result', 0, True, {'exit_code': 'x', 'cpu_time_s': 'slow'})\nimport os\nos._exit(3)\n"
    jobs = [Job(program, [IOTest("", "")]), Job("print(input())", [IOTest("hi\n", "hi\n")])] * 2
    results = sandbox.run_batch(jobs)
    assert [r.ok for r in results] == [True] * 4
    assert [r.tests[0].passed for r in results] == [False, True, False, True]
    assert results[0].tests[0].exit_code == 3


# -- class 4: limits that bind ---------------------------------------------------------------------

def test_asserts_are_kept_whatever_the_callers_optimisation_flags(tmp_path):
    """From a test set's second use the caller compiles it (cache_test_code): under ``-O`` that
    must still keep its asserts."""
    script = textwrap.dedent("""
        from llm_marl_envs.sandbox import AssertTest, Sandbox, SandboxConfig
        with Sandbox(SandboxConfig(workers=1, timeout_s=2.0, memory_mb=256)) as sb:
            got = [sb.run("def f():\\n    return 1\\n", [AssertTest("assert f() == 2")]).passed for _ in range(3)]
        print(got)
    """)
    env = {**os.environ, "PYTHONOPTIMIZE": "2", "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-O", "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[0, 0, 0]", out.stderr[-2000:]


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_output_and_type_names_are_bounded_before_they_reach_the_caller():
    """What the fork server sends back is already cut to ``report_chars`` (but an I/O test's
    stdout, which the caller compares)."""
    config = small_config(workers=1, report_chars=500)
    program = ("import sys\nprint('x' * 900000)\nsys.stderr.write('y' * 900000)\n"
               "E = type('E' * 200000, (Exception,), {})\ndef f():\n    print('z' * 900000)\n    raise E('m' * 900000)\n")
    jobs = [Job(program, [A("f()")]), Job(program, [A("import math\nfor _ in [1]:\n    f()")]),
            Job("import sys\nsys.stderr.write('y' * 900000)\nraise type('E' * 200000, (Exception,), {})()\n",
                [IOTest("", "")])]
    worker = WorkerProcess(config, 0)
    try:
        worker.wait_ready()
        for i, job in enumerate(jobs):
            request = build_request(job, config)
            reply = worker.call({"op": "job", "id": i, "job": request}, reply_deadline(request["limits"]))
            assert not reply.get("infra_error"), reply
            assert max(map(len, _strings(reply))) <= 2 * 500 + 200
    finally:
        worker.kill()


# -- class 5: host-wide kernel resources ---------------------------------------------------------

KERNEL = '''
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
def refused(result):
    return result == -1 and ctypes.get_errno() == errno.EPERM
def inotify():
    return refused(libc.inotify_init1(0)) and refused(libc.inotify_init())
def aio():
    ctx = ctypes.c_ulong(0)
    return refused(libc.syscall(206 if os.uname().machine == "x86_64" else 0, 8, ctypes.byref(ctx)))
def vsock():
    return all(refused(libc.socket(family, 1, 0)) for family in (40, 5, 17, 31))  # VSOCK, APPLETALK, PACKET, BLUETOOTH
def ptys():
    try:
        os.openpty()
    except OSError:
        pass
    else:
        return False
    try:
        fd = os.open("/dev/ptmx", os.O_RDWR)
    except OSError:
        return True
    import fcntl, struct
    try:
        fcntl.ioctl(fd, 0x80045430, struct.pack("I", 0))  # TIOCGPTN: the pty's number
    except OSError:
        return True
    return False
def pts_of_others():
    return [p for p in os.listdir("/dev/pts") if p.isdigit()] if os.path.isdir("/dev/pts") else []
def inodes():
    os.makedirs("/tmp/sbx-litter-inodes", exist_ok=True)
    for i in range(40000):
        try:
            os.close(os.open(f"/tmp/sbx-litter-inodes/{i}", os.O_CREAT | os.O_WRONLY, 0o600))
        except OSError:
            return i
    return i
'''


def test_host_wide_kernel_objects_are_refused(sandbox):
    if not sandbox.isolation.get("seccomp"):
        import pytest
        pytest.skip("no seccomp filter on this machine")
    tests = [A("assert inotify()"), A("assert aio()"), A("assert vsock()"), A("assert ptys()"),
             A("assert pts_of_others() == []")]
    res = sandbox.run(KERNEL, tests)
    assert [t.passed for t in res.tests] == [True] * 5, [t.error_message for t in res.tests]


def test_the_private_tmpfs_has_an_inode_limit(sandbox):
    if not sandbox.isolation.get("mount_ns"):
        import pytest
        pytest.skip("no private /tmp on this machine")
    started = time.monotonic()
    res = sandbox.run(KERNEL, [A("assert inodes() < 20000, inodes()")], timeout_s=5.0)
    assert res.tests[0].passed, res.tests[0].error_message
    assert time.monotonic() - started < 10


def test_jobs_of_different_workers_never_share_a_host_uid(sandbox):
    if not sandbox.isolation.get("privileges_dropped"):
        import pytest
        pytest.skip("not root: no other users to run as")
    program = "import os, time\ntime.sleep(0.3)\nprint(os.getuid())\n"
    results = sandbox.run_batch([Job(program, [IOTest("", "")])] * (2 * sandbox.size))
    uids = {int(r.tests[0].got) for r in results}
    assert len(uids) == sandbox.size, uids


def test_io_tests_are_judged_by_their_exit_status(sandbox):
    """What replaced the program's own result record: exit status 0 (however reached) and the
    output; a non-zero status names the exception the harness printed, informatively."""
    res = sandbox.run("import os\nprint('ok', flush=True)\nos._exit(0)\n", [IOTest("", "ok\n")])
    assert outcome(res) == [(True, None)]
    res = sandbox.run("x = [0] * (1 << 40)\n", [IOTest("", "")])
    assert outcome(res) == [(False, "MemoryError")] and res.tests[0].memory_exceeded and res.tests[0].exit_code == 1
