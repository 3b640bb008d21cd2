"""Issue #36, classes 1, 3, 4, 5 and 7: processes that outlive their job, a job that slows its
worker down for later jobs, host files locked from a job, the fork server's settings read from
``/proc``, an I/O job's output multiplied in the caller; and jobs that read each other's memory
or stdin.

Every test below failed on main at 997c890 (run from a copy of that tree with the same tests).
"""

from __future__ import annotations

import tracemalloc

import pytest

from llm_marl_envs.sandbox import IOTest, Sandbox

from ..conftest import job_processes, server_pids, small_config
from .conftest import A, outcome

# Re-creates itself for ever through /bin/sh (a system binary), in a process group of its own:
# every member starts its successor at once and starts another one whenever it dies, so that
# killing whatever is a child of the fork server, round after round, never ends the chain.
CHAIN = r'''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
CHAIN = b'while :; do /bin/sh -c "$0" "$0" & wait $!; done'
def spawn():
    if libc.fork() == 0:
        libc.setpgid(0, 0)
        libc.execv(b"/bin/sh", (ctypes.c_char_p * 5)(b"sh", b"-c", CHAIN, CHAIN, None))
        libc._exit(1)
    return 1
'''
# Test code (a judge process, as the judge's uid) that leaves a process behind.
SLEEPER = ("import ctypes\nlibc = ctypes.CDLL(None)\nif libc.fork() == 0:\n    libc.setpgid(0, 0)\n"
           "    libc.execv(b'/bin/sleep', (ctypes.c_char_p * 3)(b'sleep', b'30', None))\n    libc._exit(1)\n")
# What a later job of the same worker sees of processes of its own uid that are not its own.
OTHERS = r'''
import os
def others():
    me, found = os.getuid(), []
    for p in os.listdir('/proc'):
        try:
            status = open(f'/proc/{p}/status').read()
        except OSError:
            continue
        if int(status.split('Uid:')[1].split()[0]) == me and status.split()[1] != 'sbx-job':
            found.append(status.split()[1])
    return found
'''


@pytest.fixture(scope="module")
def lone():
    """A pool of one fork server: consecutive jobs run on the same worker."""
    with Sandbox(small_config(workers=1)) as sb:
        yield sb


# -- class 1: nothing a job starts outlives its reply ---------------------------------------------

def test_no_process_of_a_job_exists_once_its_reply_is_sent(lone):
    """Self-re-creating /bin/sh chains in their own process group (program), a re-exec'd sleeper
    left by test code (judge process) and by an I/O program: all gone when the reply arrives, and
    the next job of the worker finds no process of its uid but its own (on main, the chain survived
    the 5 s clean-up and was there)."""
    res = lone.run(CHAIN, [A("import time\nassert spawn() == 1\ntime.sleep(0.2)"), A(SLEEPER + "assert 1")])
    assert outcome(res) == [(True, None), (True, None)]
    assert job_processes(lone) == []  # right after the reply (not waiting for the worker to be idle)
    assert outcome(lone.run(SLEEPER + "print('ok')\n", [IOTest("", "ok\n")])) == [(True, None)]
    assert job_processes(lone) == []
    res = lone.run(OTHERS, [A("assert others() == [], others()")])
    assert outcome(res) == [(True, None)], res.tests[0].error_message


# -- class 3: a job cannot change its worker for later jobs ---------------------------------------

RENICE = r'''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def direct():
    try:
        with open('/proc/self/autogroup', 'w') as f:
            f.write('19')
        return True
    except OSError:
        return False
def through_exec():
    # an exec'd image is dumpable again: it owns its /proc files (the kernel allows 10 writes/s)
    script = b'for i in $(seq 40); do echo 19 > /proc/self/autogroup 2>/dev/null && exit 0; sleep 0.05; done; exit 1'
    pid = libc.fork()
    if pid == 0:
        libc.execv(b"/bin/sh", (ctypes.c_char_p * 4)(b"sh", b"-c", script, None))
        libc._exit(2)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
'''


def _autogroup_nice(pid: int) -> int:
    with open(f"/proc/{pid}/autogroup") as f:  # "/autogroup-123 nice 19"
        return int(f.read().split()[-1])


def test_a_job_cannot_renice_its_workers_scheduler_group(lone):
    res = lone.run(RENICE, [A("assert direct() is False"), A("assert through_exec() == 0")])
    assert outcome(res) == [(True, None), (True, None)]
    assert lone.wait_idle()
    assert [_autogroup_nice(pid) for pid in server_pids(lone)] == [0]


# -- class 4: no lockable host inode, no channel between jobs -------------------------------------

LOCKS = r'''
import fcntl, os, struct
def locked():
    got = []
    flock = struct.pack('hhqqi4x', fcntl.F_RDLCK, 0, 0, 0, 0)
    for path in ('/etc/passwd', os.__file__, '/dev/null', 'mine.txt'):
        if path == 'mine.txt':
            open(path, 'w').close()
        with open(path, 'rb') as f:
            for name, call in (('flock', lambda: fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)),
                               ('posix', lambda: fcntl.fcntl(f, fcntl.F_SETLK, flock)),
                               ('ofd', lambda: fcntl.fcntl(f, 37, flock))):  # F_OFD_SETLK
                try:
                    call()
                    got.append((path, name))
                except OSError:
                    pass
    fd = os.open(os.path.dirname(os.__file__), os.O_RDONLY)
    try:
        fcntl.fcntl(fd, fcntl.F_NOTIFY, fcntl.DN_ACCESS)  # which host files anyone reads
        got.append('dnotify')
    except OSError:
        pass
    return got
'''


def test_no_file_can_be_locked_or_watched_from_a_job(sandbox):
    """flock/POSIX/OFD locks on read-only host files (/etc/passwd, the standard library, /dev/null)
    blocked host processes and carried tokens between concurrent jobs of different workers."""
    res = sandbox.run(LOCKS, [A("assert locked() == [], locked()")])
    assert outcome(res) == [(True, None)], res.tests[0].error_message


# -- class 5: how the fork server was started is not readable -------------------------------------

def test_jobs_cannot_read_their_fork_servers_settings(sandbox):
    """``/proc/1/cmdline`` (the fork server's, and so its zygote's and its jobs') held the worker's
    settings: hidden and readable paths, uids, the jobs' environment."""
    settings = ["readable_paths", "hidden_paths", "judge_uid", "PYTHONHASHSEED", "/etc/passwd"]
    program = (f"import os\nSETTINGS = {settings!r}\nseen = []\n"
               "for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
               "    for what in ('cmdline', 'environ'):\n"
               "        try:\n            seen.append(open(f'/proc/{pid}/{what}', 'rb').read().decode('latin-1'))\n"
               "        except OSError:\n            pass\n"
               "print(len(seen) > 0, sorted({s for s in SETTINGS for text in seen if s in text}))\n")
    res = sandbox.run(program, [A("pass")])
    assert outcome(res) == [(True, None)] and res.stdout == "True []\n", res.stdout


# -- jobs of one uid cannot reach each other's memory or stdin ------------------------------------

def test_job_processes_are_not_dumpable_and_their_stdin_is_private(sandbox):
    """Another process of the job's uid (here its own child) can open neither the job's memory nor
    its stdin, and nobody can write the stdin (on main: both, the stdin memfd being 0777)."""
    program = r'''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
me = os.readlink('/proc/self')
r, w = os.pipe()
if libc.fork() == 0:
    got = []
    for path, mode in ((f'/proc/{me}/mem', 'rb'), (f'/proc/{me}/fd/0', 'rb'), ('/proc/self/fd/0', 'r+b')):
        try:
            open(path, mode).close()
            got.append(path.replace(me, 'job'))
        except OSError:
            pass
    os.write(w, repr(got).encode())
    os._exit(0)
os.close(w)
print(os.read(r, 1000).decode(), libc.prctl(3, 0, 0, 0, 0), input())
try:
    os.write(0, b'x')
    print('stdin written')
except OSError:
    print('stdin read-only')
'''
    res = sandbox.run(program, [IOTest("secret-input\n", "[] 0 secret-input\nstdin read-only\n")])
    assert outcome(res) == [(True, None)], res.tests[0].got


# -- class 7: the caller's memory per job is bounded before anything is copied --------------------

def test_an_io_jobs_output_is_not_multiplied_in_the_caller(sandbox):
    """4 MiB of bytes that are not UTF-8, or of newlines (the cap: twice the expected output),
    cost the caller ~100 MB each on main (JSON escapes, copies of the frame, a list of lines)."""
    expected = "x" * (2 << 20) + "\n"
    peaks = []
    for junk in (b"\\xff", b"\\n"):
        program = f"import sys\nsys.stdout.buffer.write(b'{junk.decode()}' * (4 << 20))\n"
        tracemalloc.start()
        try:
            res = sandbox.run(program, [IOTest("", expected)])
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert outcome(res) == [(False, None)] and res.tests[0].got.startswith(("\ufffd", "\n"))
    assert max(peaks) < 3 * (4 << 20), peaks
