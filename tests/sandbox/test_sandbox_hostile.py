"""Hostile programs: each must end in a precise, harmless outcome.

Runs on the shared small pool (1 s per test, 256 MB). The last test checks that nothing was
left behind: no job processes, no temporary files, the caller unharmed.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import tempfile
import threading
import time

import pytest

from llm_marl_envs.sandbox import AssertTest, IOTest

from .conftest import job_processes, processes_named, server_pids

A = AssertTest
CANARY = "sbx-canary-7f3a91"
CALLER_CWD = os.getcwd()
CALLER_SIGNALS = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)}


def outcome(res):
    assert res.ok, res.infra_error
    return [(t.passed, t.error_type) for t in res.tests]


@pytest.fixture(scope="module")
def private_tmp_before(sandbox):
    """What each fork server's private /tmp holds before the hostile programs run."""
    assert sandbox.wait_idle()
    return {pid: sorted(os.listdir(f"/proc/{pid}/root/tmp")) for pid in server_pids(sandbox)}


@pytest.fixture(scope="module")
def outside_file():
    base = next(b for b in ("/opt", "/srv", "/var/lib", "/usr/local") if os.path.isdir(b) and os.access(b, os.W_OK))
    directory = tempfile.mkdtemp(prefix="sbx-outside-", dir=base)
    os.chmod(directory, 0o755)
    path = os.path.join(directory, "precious.txt")
    with open(path, "w") as f:
        f.write("precious")
    os.chmod(path, 0o644)
    yield path
    shutil.rmtree(directory)


def test_00_record_state(sandbox, private_tmp_before):
    os.environ["SBX_SECRET_CANARY"] = CANARY  # set in the caller; must never reach a job
    assert private_tmp_before


# -- time ----------------------------------------------------------------------------------
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


# -- processes -----------------------------------------------------------------------------
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
               "def via_libc():\n    return libc.kill(libc.getppid(), 9), ctypes.get_errno()\n")
    res = sandbox.run(program, [A("via_os()"), A("assert via_libc() == (-1, 1)"),
                                A("libc.kill(-1, 9)"), A("assert 1")])
    assert outcome(res) == [(False, "PermissionError"), (True, None), (True, None), (True, None)]
    assert sandbox.worker_pids() == before


def test_killing_its_own_process_group(sandbox):
    program = "import ctypes, os\ndef f():\n    ctypes.CDLL(None).kill(0, 9)\ndef g():\n    os.killpg(0, 9)\n"
    res = sandbox.run(program, [A("g()"), A("f()"), A("assert 2")])
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


# -- memory, recursion, disk, files --------------------------------------------------------
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


def test_files_outside_the_job_directory_are_untouched(sandbox, outside_file):
    program = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nP = " + repr(outside_file) + "\n"
        "def guard_remove():\n    os.remove(P)\n"
        "def libc_unlink():\n    return libc.unlink(P.encode()), ctypes.get_errno()\n"
        "def overwrite():\n    open(P, 'w').write('pwned')\n"
        "def create_next_to_it():\n    open(os.path.join(os.path.dirname(P), 'new.txt'), 'w')\n"
        "def rename():\n    return libc.rename(P.encode(), (P + '.moved').encode()), ctypes.get_errno()\n"
    )
    # With the allow-list of readable paths the directory is not even visible (ENOENT);
    # without a mount namespace the job user may not write there (EACCES).
    tests = [A("guard_remove()"), A("assert libc_unlink() in ((-1, 13), (-1, 2))"), A("overwrite()"),
             A("create_next_to_it()"), A("assert rename() in ((-1, 13), (-1, 2))")]
    res = sandbox.run(program, tests)
    denied = ("PermissionError", "FileNotFoundError")
    assert [t.passed for t in res.tests] == [False, True, False, False, True]
    assert res.tests[0].error_type == "PermissionError"  # (the guard)
    assert res.tests[2].error_type in denied and res.tests[3].error_type in denied
    assert sandbox.wait_idle()
    with open(outside_file) as f:
        assert f.read() == "precious"
    assert os.listdir(os.path.dirname(outside_file)) == ["precious.txt"]


def test_temporary_directories_are_private(sandbox, tmp_path):
    (tmp_path / "caller.txt").write_text("mine")
    marker = "sbx-marker-" + str(os.getpid())
    program = (
        "import os\ndef f():\n    open('/tmp/" + marker + "', 'w').write('x')\n"
        "    open('/dev/shm/" + marker + "', 'w').write('x')\n"
        "    return os.path.exists(" + repr(str(tmp_path)) + "), os.getcwd()\n"
    )
    res = sandbox.run(program, [A(f"assert f() == (False, {sandbox.isolation['job_dir']!r})")])
    assert outcome(res) == [(True, None)] and sandbox.wait_idle()
    assert not os.path.exists("/tmp/" + marker) and not os.path.exists("/dev/shm/" + marker)
    assert (tmp_path / "caller.txt").read_text() == "mine"


PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")


def _litter(pid: int) -> list[str]:
    """What a fork server's private temporary directories hold besides its own entries."""
    found = []
    for d in PRIVATE_DIRS:
        if os.path.isdir(f"/proc/{pid}/root{d}"):
            found += [f"{d}/{p}" for p in os.listdir(f"/proc/{pid}/root{d}") if p.startswith("sbx-litter")]
    return found


def test_whatever_a_job_leaves_in_the_temporary_directories_is_wiped(sandbox):
    if not sandbox.isolation["private_tmp"]:
        pytest.skip("no private temporary directories without a mount namespace")
    program = (
        "import ctypes, os\n"
        f"DIRS = {PRIVATE_DIRS!r}\n"
        "def litter():\n"
        "    made = []\n"
        "    for d in DIRS:\n"
        "        if os.access(d, os.W_OK):\n"
        "            os.makedirs(os.path.join(d, 'sbx-litter-dir', 'sub'))\n"
        "            open(os.path.join(d, 'sbx-litter-dir', 'sub', 'f'), 'w').write('x')\n"
        "            open(os.path.join(d, 'sbx-litter.txt'), 'w').write('x')\n"
        "            os.symlink('/etc/passwd', os.path.join(d, 'sbx-litter-link'))\n"
        "            made.append(d)\n"
        "    for d in made:  # created and deleted (os.unlink is guarded): nothing to wipe there\n"
        "        open(os.path.join(d, 'sbx-litter-gone'), 'w').close()\n"
        "        assert ctypes.CDLL(None).unlink(os.path.join(d, 'sbx-litter-gone').encode()) == 0\n"
        "    return made\n"
    )
    res = sandbox.run(program, [A("assert len(litter()) >= 2, litter()")])
    assert outcome(res) == [(True, None)]
    assert sandbox.wait_idle()
    for pid in server_pids(sandbox):
        assert _litter(pid) == []


def test_secrets_of_the_caller_are_not_readable(sandbox):
    program = (
        "import os, glob\nprint(sorted(os.listdir('/root')), os.getuid(), os.getgid(), os.getgroups())\n"
        "seen = [repr(sorted(os.environ.items()))]\n"
        "for p in glob.glob('/proc/*/environ') + glob.glob('/proc/*/cmdline'):\n"
        "    try:\n        seen.append(open(p, 'rb').read().decode('latin-1'))\n"
        "    except OSError as e:\n        seen.append(type(e).__name__)\n"
        "def shadow():\n    open('/etc/shadow').read()\n"
        "print('\\n'.join(seen))\n"
    )
    res = sandbox.run(program, [A("shadow()")])
    assert outcome(res) in ([(False, "PermissionError")], [(False, "FileNotFoundError")])  # (hidden: not allow-listed)
    assert CANARY not in res.stdout and "SBX_SECRET_CANARY" not in res.stdout
    assert "'PATH', '/usr/local/bin:/usr/bin:/bin'" in res.stdout
    assert f"('HOME', {sandbox.isolation['job_dir']!r})" in res.stdout
    if sandbox.isolation["privileges_dropped"]:
        assert "65534 65534 []" in res.stdout


def test_jobs_do_not_see_how_their_fork_server_was_started(sandbox):
    program = "import sys\nprint(sys.argv, sorted(vars(sys.modules['__main__'])))\n"
    res = sandbox.run(program, [A("pass")])
    assert res.stdout.strip() == "['solution.py'] ['__doc__', '__loader__', '__name__', '__package__', '__spec__']"


def test_no_network_even_to_a_local_listener(sandbox):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    port = listener.getsockname()[1]
    try:
        program = (
            "import socket, ctypes, struct\n"
            f"def python_level():\n    socket.create_connection(('127.0.0.1', {port}), timeout=0.5)\n"
            f"def raw_socket():\n    socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(('127.0.0.1', {port}))\n"
            "def libc_level():\n    libc = ctypes.CDLL(None, use_errno=True)\n    fd = libc.socket(2, 1, 0)\n"
            f"    addr = struct.pack('!HH4s8x', 2, {port}, bytes([127, 0, 0, 1]))\n"
            "    addr = struct.pack('<H', 2) + addr[2:]\n"
            "    return libc.connect(fd, addr, 16), ctypes.get_errno()\n"
        )
        res = sandbox.run(program, [A("python_level()"), A("raw_socket()"), A("r = libc_level()\nassert r[0] == -1, r")])
        assert outcome(res) == [(False, "PermissionError"), (False, "PermissionError"), (True, None)]
        listener.settimeout(0.2)
        with pytest.raises(socket.timeout):
            listener.accept()
    finally:
        listener.close()


def test_chdir_does_not_confuse_the_harness(sandbox):
    # (The tests run in the judge's process: they see the program's state through its functions.)
    program = "import os\nos.chdir('/')\ndef f():\n    open('x.txt', 'w')\ndef cwd():\n    return os.getcwd()\n"
    res = sandbox.run(program, [A("assert cwd() == '/'"), A("f()")])
    assert outcome(res) == [(True, None), (False, "PermissionError")]
    assert os.getcwd() == CALLER_CWD


# -- output --------------------------------------------------------------------------------
def test_closing_stdout_and_stderr(sandbox):
    program = "import os, sys\nsys.stdout.close()\nos.close(1)\nos.close(2)\ndef f():\n    return 2\n"
    res = sandbox.run(program, [A("print('still here')\nassert f() == 2")])
    assert outcome(res) == [(True, None)] and res.tests[0].stdout == "still here\n"


def test_printing_100_mb_in_a_test(sandbox):
    t0 = time.monotonic()
    res = sandbox.run("def f():\n    for _ in range(100):\n        print('x' * 10 ** 6)\n    return 1\n",
                      [A("assert f() == 1")])
    assert outcome(res) == [(False, "OutputLimitExceeded")]
    assert len(res.tests[0].stdout) < 2200 and time.monotonic() - t0 < 5


def test_printing_100_mb_to_stdout(sandbox):
    t0 = time.monotonic()
    res = sandbox.run("import sys\nfor _ in range(100):\n    sys.stdout.write('x' * 10 ** 6)\n", [IOTest("", "x\n")])
    assert outcome(res) == [(False, "OutputLimitExceeded")]
    assert len(res.tests[0].got) < 2200 and time.monotonic() - t0 < 5


def test_non_utf8_output(sandbox):
    program = "import os, sys\nsys.stdout.buffer.write(b'\\xff\\xfe')\nsys.stdout.flush()\nos.write(1, b'\\x80ok\\n')\n"
    res = sandbox.run(program, [IOTest("", "ok\n")])
    assert outcome(res) == [(False, None)]
    assert res.tests[0].got == "\ufffd\ufffd\ufffdok\n"
    res = sandbox.run("import sys\ndef f():\n    sys.stdout.buffer.write(b'\\xc3')\n    print('\\udcff')\n",
                      [A("f()")])
    assert outcome(res) == [(True, None)]
    res.tests[0].stdout.encode("utf-8")  # always valid text


def test_exception_whose_str_raises(sandbox):
    program = "class Evil(Exception):\n    def __str__(self):\n        raise ValueError('no')\ndef f():\n    raise Evil()\n"
    res = sandbox.run(program, [A("f()")])
    assert outcome(res) == [(False, "Evil")]
    assert res.tests[0].error_message == "<unprintable Evil object>"
    assert 'File "solution.py", line 5, in f' in res.tests[0].traceback


# -- faking a pass -------------------------------------------------------------------------
def test_faking_a_pass_by_printing_and_patching(sandbox):
    program = (
        "import builtins, json, os, sys\n"
        "print('All tests passed!')\n"
        "for i in range(3):\n    print(f'x result {i} 1 {{}}')\n"  # (writing to fd 3: see the flooding tests)
        "def check(candidate):\n    return True\n"
        "abs = lambda x: 0\n"
        "builtins.abs = lambda x: 0\n"
        "builtins.AssertionError = type('Fake', (Exception,), {})\n"
        "sys.exit = os._exit = lambda *a: None\n"
        "json.dumps = lambda *a, **k: '{\"passed\": true}'\n"
        "import atexit\natexit.register(lambda: print('OK'))\n"
        "def f():\n    return 3\n"
    )
    setup = "def check(candidate):\n    assert candidate() == 5\ncandidate = f\n"
    res = sandbox.run(program, [A("check(candidate)"), A("assert abs(f() - 5) < 1"), A("assert f() == 5")],
                      setup=setup)
    assert outcome(res) == [(False, "AssertionError")] * 3


def test_replacing_the_result_channel(sandbox):
    res = sandbox.run("import os\nos.dup2(os.open('/dev/null', os.O_WRONLY), 3)\ndef f():\n    return 1\n",
                      [A("assert f() == 1"), A("assert True")])
    assert [t.passed for t in res.tests] == [False, False] and res.ok


def test_flooding_the_result_channel(sandbox):
    program = "import os\nchunk = b'garbage ' * 8192\nfor _ in range(1200):\n    os.write(3, chunk)\n"
    res = sandbox.run(program, [A("assert True")])
    assert outcome(res) == [(False, "ResultChannelAbuse")]


# -- degenerate programs -------------------------------------------------------------------
def test_empty_program(sandbox):
    res = sandbox.run("", [A("f()"), IOTest("", ""), IOTest("", "x\n")])
    assert outcome(res) == [(False, "NameError"), (True, None), (False, None)]


def test_syntax_error(sandbox):
    res = sandbox.run("def f(\n", [A("f()")])
    assert outcome(res) == [(False, "SyntaxError")] and "solution.py, line 1" in res.compile_error


def test_one_megabyte_program(sandbox):
    program = "".join(f"v{i} = {i}\n" for i in range(90000)) + "def f():\n    return v89999\n"
    assert len(program) > 1_000_000
    res = sandbox.run(program, [A("assert f() == 89999")], timeout_s=10)
    assert outcome(res) == [(True, None)]


def test_reading_stdin_in_assert_mode(sandbox):
    res = sandbox.run("x = input()\ndef f():\n    return 1\n", [A("assert f() == 1")])
    assert outcome(res) == [(False, "EOFError")]


# -- afterwards ----------------------------------------------------------------------------
def test_zz_nothing_left_behind_and_the_caller_unharmed(sandbox, private_tmp_before):
    assert job_processes(sandbox) == []  # (waits until the last job is cleaned up)
    for pid, entries in private_tmp_before.items():
        assert sorted(os.listdir(f"/proc/{pid}/root/tmp")) == entries
        assert os.listdir(f"/proc/{pid}/root/dev/shm") == []
        assert _litter(pid) == []
    assert not [p for p in os.listdir(tempfile.gettempdir()) if p.startswith("llm-sandbox-job-")]
    assert os.getcwd() == CALLER_CWD and os.environ["SBX_SECRET_CANARY"] == CANARY
    assert {s: signal.getsignal(s) for s in CALLER_SIGNALS} == CALLER_SIGNALS
    assert outcome(sandbox.run("def f():\n    return 1\n", [A("assert f() == 1")])) == [(True, None)]
    del os.environ["SBX_SECRET_CANARY"]
