"""Programs that try to make a test report "passed" without solving it, or to read what they
must not (their own tests, earlier jobs), or to keep resources beyond their job.

Each attack test here failed on the sandbox before the trusted comparison (the tests are
judged in a process the program cannot reach) and the per-job isolation were added: every
hostile program below got full marks, or found what it looked for, or kept what it made.
The semantics tests (honest programs, planned calls) pass on both.
"""

from __future__ import annotations

import os
import uuid

import pytest

from llm_marl_envs.sandbox import AssertTest, Job, Sandbox, tests_from_check

from .conftest import small_config

# Reads every readable mapping of the job's own memory and returns what matches a pattern.
MEMSCAN = '''
def _scan(pattern):
    import re
    rx = re.compile(pattern)
    found = []
    with open('/proc/self/maps') as maps:
        regions = [line.split() for line in maps]
    with open('/proc/self/mem', 'rb', 0) as mem:
        for r in regions:
            if 'r' not in r[1] or (len(r) > 5 and r[5] in ('[vvar]', '[vsyscall]', '[vvar_vclock]')):
                continue
            a, b = (int(x, 16) for x in r[0].split('-'))
            if b - a > (256 << 20):
                continue
            try:
                mem.seek(a)
                data = mem.read(b - a)
            except (OSError, OverflowError, ValueError):
                continue
            found += rx.findall(data)
    return sorted(set(found))
'''


# Every test here runs twice: with the tests judged in the fork server where they are of the
# kind it may judge (the default, see worker/purity.py), and always in a judge process.
JUDGES = [pytest.param(True, id="judged-in-server"), pytest.param(False, id="judge-process")]


@pytest.fixture(scope="module", params=JUDGES)
def sandbox(request):
    with Sandbox(small_config(judge_in_server=request.param)) as sb:
        yield sb


@pytest.fixture(scope="module", params=JUDGES)
def one_worker(request):
    """A pool of one: consecutive jobs run on the same fork server."""
    with Sandbox(small_config(workers=1, judge_in_server=request.param)) as sb:
        yield sb


def _passed(res) -> list[bool]:
    assert res.ok, res.infra_error
    return [t.passed for t in res.tests]


# -- 1. the comparison cannot be influenced by the program ---------------------------------------

def test_an_object_equal_to_everything_does_not_pass(sandbox):
    program = ("class Anything:\n    def __eq__(self, other):\n        return True\n"
               "    def __ne__(self, other):\n        return False\n    __hash__ = object.__hash__\n"
               "def add(a, b):\n    return Anything()\n")
    tests = [AssertTest("assert add(1, 2) == 3"), AssertTest("assert add(2, 2) == 5"),
             AssertTest("assert not (add(1, 1) != 2)")]
    res = sandbox.run(program, tests)
    assert _passed(res) == [False, False, False]
    assert res.tests[0].error_type == "AssertionError"  # the judge's own ==: equal only to itself
    res = sandbox.run(program.replace("return Anything()", "return Anything()\ndef truthy():\n    return Anything()"),
                      [AssertTest("assert truthy()")])
    assert _passed(res) == [False] and res.tests[0].error_type == "ResultNotPlainData"


def test_subclasses_of_builtin_types_are_not_trusted_either(sandbox):
    program = ("class Liar(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
               "def f(x):\n    return Liar(0)\n"
               "class L(list):\n    def __eq__(self, other):\n        return True\n"
               "def g():\n    return [L()]\n")
    res = sandbox.run(program, [AssertTest("assert f(1) == 7"), AssertTest("assert g() == [[1, 2]]")])
    assert _passed(res) == [False, False]


def test_walking_the_frames_to_the_harness_does_not_forge_passes(sandbox):
    program = (
        "import sys\n"
        "f = sys._getframe()\n"
        "while f is not None:\n"
        "    loc = f.f_locals\n"
        "    if 'emit' in loc and 'finish' in loc:\n"
        "        idx = loc.get('test_indices') or loc.get('indices') or [0, 1]\n"
        "        for i in idx:\n"
        "            loc['emit']('begin', i, True, {})\n"
        "            loc['emit']('result', i, True, {})\n"
        "        loc['finish']()\n"
        "    f = f.f_back\n"
        "def add(a, b):\n    return 0\n"
    )
    res = sandbox.run(program, [AssertTest("assert add(1, 2) == 3"), AssertTest("assert add(2, 2) == 4")])
    assert _passed(res) == [False, False]


def test_forging_records_with_the_nonce_found_in_memory_does_not_pass(sandbox):
    program = (
        "import os, sys, gc\n"
        "def _forge(n, count):\n"
        "    lines = f'{n} program -1 1 0 {{}}\\n{n} setup -1 1 0 {{}}\\n'\n"
        "    for i in range(count):\n"
        "        lines += f'{n} begin {i} 1 0 {{}}\\n{n} result {i} 1 0 {{}}\\n'\n"
        "    for fd in range(3, 40):\n"
        "        try:\n"
        "            os.write(fd, (lines + f'{n} end -1 1 0 {{}}\\n').encode())\n"
        "        except OSError:\n"
        "            pass\n"
        "    os._exit(0)\n"
        "f = sys._getframe()\n"
        "while f is not None:\n"
        "    if 'nonce' in f.f_locals:\n"
        "        _forge(f.f_locals['nonce'], 2)\n"
        "    f = f.f_back\n"
        "for o in gc.get_objects():\n"  # the nonce in a closure cell or an object's dict
        "    if callable(o) and getattr(o, '__closure__', None):\n"
        "        for c in o.__closure__:\n"
        "            try:\n"
        "                v = c.cell_contents\n"
        "            except ValueError:\n"
        "                continue\n"
        "            if isinstance(v, str) and len(v) == 32 and all(ch in '0123456789abcdef' for ch in v):\n"
        "                _forge(v, 2)\n"
        "def add(a, b):\n    return 0\n"
    )
    res = sandbox.run(program, [AssertTest("assert add(1, 2) == 3"), AssertTest("assert add(2, 2) == 4")])
    assert _passed(res) == [False, False]


def test_rewriting_cached_small_integers_through_ctypes_does_not_pass(sandbox):
    program = (
        "import ctypes, sys\n"
        "def f(x):\n    return 201\n"
        "_digit = ctypes.c_uint32.from_address(id(217) + 24)\n"  # ob_digit[0] of 217 (CPython, 64-bit)
        "_digit.value = 201\n"
    )
    res = sandbox.run(program, [AssertTest("assert f(1) == 217")])
    assert _passed(res) == [False]


def test_patching_the_comparison_helpers_of_the_program_process_does_not_pass(sandbox):
    program = ("import builtins, operator, math\n"
               "builtins.isinstance = lambda *a: True\n"
               "math.isclose = lambda *a, **k: True\n"
               "operator.eq = lambda a, b: True\n"
               "def f(x):\n    return 1.0\n")
    tests = [AssertTest("import math\nassert math.isclose(f(1), 2.0)"),
             AssertTest("assert isinstance(f(1), str)")]
    assert _passed(sandbox.run(program, tests)) == [False, False]


def test_a_program_cannot_read_its_own_tests_to_answer_them(sandbox):
    program = MEMSCAN + ("def secret_answer():\n"
                         "    hits = _scan(rb'tok-[0-9]{5}X')\n"
                         "    return hits[0].decode() if hits else ''\n")
    res = sandbox.run(program, [AssertTest('assert secret_answer() == "tok-93771X"')])
    assert _passed(res) == [False]


def test_exit_and_signal_games_in_a_test_do_not_pass(sandbox):
    program = ("import os, sys, signal\n"
               "def a():\n    sys.exit(0)\n"
               "def b():\n    os._exit(0)\n"
               "def c():\n    os.kill(os.getpid(), signal.SIGKILL)\n"
               "def d():\n    raise SystemExit\n")
    tests = [AssertTest("assert a() == 1"), AssertTest("assert b() == 1"),
             AssertTest("assert c() == 1"), AssertTest("assert d() == 1")]
    assert _passed(sandbox.run(program, tests)) == [False, False, False, False]


# -- honest programs keep their exact semantics ---------------------------------------------------

def test_plain_data_semantics_are_kept(sandbox):
    program = (
        "import math\n"
        "def nan():\n    return float('nan')\n"
        "def pair():\n    return (1, 2)\n"
        "def lst():\n    return [1, 2]\n"
        "def mixed():\n    return {'a': [1, (2.5, None)], (1, 'x'): {3, 4}, 'b': b'\\x00\\xff', 'c': 1+2j,\n"
        "            'f': frozenset({1}), 'z': -0.0, 'i': float('inf'), 'big': 10 ** 5000, 't': True}\n"
        "def div(a, b):\n    if b == 0:\n        raise ValueError('b is zero')\n    return a / b\n"
        "class MyError(KeyError):\n    pass\n"
        "def mine():\n    raise MyError('k')\n"
        "LIMIT = 7\n"
        "calls = []\n"
        "def counted(x):\n    calls.append(x)\n    return len(calls)\n"
        "def sort_in_place(xs):\n    xs.sort()\n"
        "def gen(n):\n    yield from range(n)\n"
        "def loud(x):\n    print('loud', x)\n    return x\n"
    )
    tests = [
        AssertTest("assert math.isnan(nan())"),
        AssertTest("assert nan() != nan()"),
        AssertTest("assert pair() == (1, 2) and pair() != [1, 2] and isinstance(pair(), tuple)"),
        AssertTest("assert lst() == [1, 2] and lst() != (1, 2)"),
        AssertTest("m = mixed()\nassert m['a'] == [1, (2.5, None)] and m[(1, 'x')] == {3, 4}\n"
                   "assert m['b'] == b'\\x00\\xff' and m['c'] == 1+2j and m['f'] == frozenset({1})\n"
                   "assert math.copysign(1, m['z']) == -1 and m['i'] == float('inf') and m['big'] == 10 ** 5000\n"
                   "assert m['t'] is True"),
        AssertTest("try:\n    div(1, 0)\nexcept ValueError as e:\n    assert 'zero' in str(e)\nelse:\n    raise AssertionError"),
        AssertTest("assert abs(div(1, 3) - 0.3333333) < 1e-6"),
        AssertTest("try:\n    mine()\nexcept KeyError:\n    pass\nelse:\n    raise AssertionError"),
        AssertTest("assert LIMIT == 7"),
        AssertTest("assert counted(1) == 1 and counted(2) == 2"),
        AssertTest("xs = [3, 1, 2]\nsort_in_place(xs)\nassert xs == [1, 2, 3]"),
        AssertTest("assert list(gen(3)) == [0, 1, 2] and sum(gen(4)) == 6"),
        AssertTest("assert loud(5) == 5"),
        AssertTest("assert div(1, 0) == 1"),
    ]
    res = sandbox.run(program, tests)
    assert _passed(res) == [True] * 13 + [False], [(t.name, t.error_type, t.error_message) for t in res.tests]
    assert "loud 5" in res.tests[12].stdout
    assert res.tests[13].error_type == "ValueError" and "b is zero" in res.tests[13].error_message
    assert "solution.py" in res.tests[13].traceback


def test_humaneval_style_check_keeps_working(sandbox):
    test_code = ("METADATA = {}\n\ndef check(candidate):\n"
                 "    assert candidate([1.0, 2.0, 3.9], 0.3) == False\n"
                 "    assert candidate([1.0, 2.8, 3.0], 0.3) == True\n"
                 "    for x in range(3):\n        assert candidate([x, x + 0.1], 0.2)\n")
    setup, tests = tests_from_check(test_code, "has_close")
    good = ("def has_close(numbers, threshold):\n"
            "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n")
    bad = "def has_close(numbers, threshold):\n    return True\n"
    assert _passed(sandbox.run(good, tests, setup=setup)) == [True, True, True]
    assert _passed(sandbox.run(bad, tests, setup=setup)) == [False, True, True]


# -- 2. nothing of an earlier job is readable ----------------------------------------------------

def test_the_next_job_cannot_read_the_previous_jobs_program_and_tests(one_worker):
    first = Job("def g():\n    return 1\nSECRET = 'progsecret-55123Y'\n",
                [AssertTest("assert g() == 1, 'testsecret-77012Y'")])
    assert _passed(one_worker.run_batch([first])[0]) == [True]
    probe = MEMSCAN + "def leaked():\n    return _scan(rb'(?:prog|test)secret-[0-9]{5}Y')\n"
    res = one_worker.run(probe, [AssertTest("assert leaked() == [], leaked()")])
    assert _passed(res) == [True], res.tests[0].error_message


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
    assert _passed(res) == [True, True, True], [t.error_message for t in res.tests]


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
    assert _passed(res) == [True, True]


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
    assert _passed(res) == [True, True], [t.error_message for t in res.tests]


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
    assert _passed(sandbox.run(program, tests)) == [True, True, True]


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
    assert _passed(sandbox.run(program, tests)) == [True, True, True], sandbox.isolation.get("notes")


# -- planned calls (second use of a test set: compiled tests with call plans) ---------------------

def test_planned_calls_keep_the_semantics(one_worker):
    program = ("calls = []\n"
               "def counted(x):\n    calls.append(x)\n    return len(calls)\n"
               "def div(a, b):\n    return a / b\n"
               "def pair(x):\n    return (x, [x])\n")
    setup = "candidate = counted\n"
    tests = [AssertTest("assert candidate(5) == 1"), AssertTest("assert counted(5) == 2"),
             AssertTest("assert div(1, 0) == div(1, 1)"),  # raises: div(1, 1) is not called
             AssertTest("assert div(1, 2) == 0.5 and pair(1) == (1, [1])"),  # BoolOp: live calls
             AssertTest("r = pair(2)\nassert r == (2, [2]) and counted(0) == 3"),
             AssertTest("assert pair(3) == [3, [3]]"), AssertTest("assert counted(1) == 4")]
    expected = [True, True, False, True, True, False, True]
    hits = one_worker.test_code_hits
    for _ in range(3):  # first use: live calls; then compiled tests with plans
        res = one_worker.run(program, tests, setup=setup)
        assert _passed(res) == expected, [(t.name, t.error_type, t.error_message) for t in res.tests]
        assert res.tests[2].error_type == "ZeroDivisionError"
    assert one_worker.test_code_hits == hits + 2


def test_planned_calls_cannot_be_answered_out_of_order(one_worker):
    # A program that answers with the expected values in whatever order still only gives
    # values: the judge compares each with its own expectation.
    program = "answers = iter([2, 1])\ndef f(x):\n    return next(answers)\n"
    tests = [AssertTest("assert f(1) == 1"), AssertTest("assert f(2) == 2")]
    for _ in range(3):
        assert _passed(one_worker.run(program, tests)) == [False, False]


def test_plain_data_decoding_rejects_anything_else():
    from llm_marl_envs.sandbox.worker import plaindata as pd

    for value in [None, True, 1, -0.0, float("inf"), "x\udcff", b"\x00", bytearray(b"a"), 1 + 2j, (1, [2]),
                  {(1, 2): {3}}, frozenset({1}), 10 ** 5000, -(10 ** 5000)]:
        assert pd.decode(pd.encode(value)) == value and type(pd.decode(pd.encode(value))) is type(value)
    for junk in ['{"x": 1}', '{"t": 1}', '{"d": [[[1], 2]]}', '{"c": ["a", 1]}', '{"b": "zz"}', "[1,", '{"t": [1], "s": [2]}']:
        with pytest.raises(pd.NotPlainData):
            pd.decode(junk)
    class Liar(int):
        pass
    with pytest.raises(pd.NotPlainData):
        pd.encode(Liar(1))


def test_a_dead_zygote_means_a_fresh_worker_not_a_wrong_answer():
    import signal
    import time

    from .conftest import processes_named

    with Sandbox(small_config(workers=1)) as sb:
        assert _passed(sb.run("def f():\n    return 1\n", [AssertTest("assert f() == 1")])) == [True]
        before = set(processes_named("sbx-zygote"))
        zygotes = [pid for pid in before if os.getppid() != pid and _under(pid, sb.worker_pids())]
        assert len(zygotes) == 1
        os.kill(zygotes[0], signal.SIGKILL)
        time.sleep(0.05)
        res = sb.run("def f():\n    return 1\n", [AssertTest("assert f() == 1")])
        assert _passed(res) == [True]  # retried on a fresh worker (infra_retries)


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
