"""Judging in the fork server (worker/served.py): only test code that cannot change the fork
server is judged there, with the same results as a judge process gives, and a program that
hangs or dies cannot stall its worker."""

from __future__ import annotations

import pytest

from llm_marl_envs.sandbox import AssertTest, Job, Sandbox, tests_from_check
from llm_marl_envs.sandbox.worker.purity import servable

from .conftest import small_config


def _ok(setup: str, *tests: str) -> bool:
    return servable(setup, list(tests)) is not None


def test_only_test_code_that_cannot_change_or_stall_the_server_is_servable():
    humaneval = ("METADATA = {'author': 'jt'}\ncandidate = f\nimport math\nimport random\n")
    assert _ok(humaneval, "assert candidate([1.0, 2.5], 0.3) == True\n", "assert abs(candidate(1.33) - 0.33) < 1e-6",
               "assert math.isclose(candidate(2), 1.5, rel_tol=1e-9)", "r = candidate('a')\nassert r == 'b', 'msg'",
               "assert sorted(candidate([3, 1]), reverse=True) == [3, 1]", "assert candidate(-1) is None",
               "assert candidate(3 * 5 * 7) == (3 + 5 + 7, 2 ** 10, 0**0)",
               "assert candidate(1) == {1, -2} and candidate(2) == {'a': candidate(3)} != set()")
    for test in [
        "import math\nmath.pi = 3",  # changes a module of the server
        "candidate.x = 1", "x = candidate(1)\nx[0] = 2",  # assignments other than to names
        "assert getattr(candidate, 'f')", "assert __import__('os')", "exec('1')", "open('/etc/passwd')",
        "assert [0] * 10 ** 9", "assert 2 ** 100000 > 1", "assert '%999999999d' % 1",  # unbounded work
        "assert 10 ** 10 ** 10", "assert (2 ** 64) ** 64 > 1", "assert candidate(1) * 3",
        "assert sum(range(10 ** 12))", "assert [x for x in candidate(1)]", "assert (lambda: 1)()",
        "assert round(10, -10 ** 9) == 0", "assert type('A', (), {})", "assert f'{candidate(1)}'",
        "for i in [1]:\n    assert candidate(i)", "assert math.factorial(10 ** 6)",
        "assert candidate(1).__class__", "assert max([1], key=len)",
        # hashing the program's data: one C call no timer interrupts (issue #36)
        "assert set(candidate(1)) == {1}", "assert frozenset(candidate(1))", "assert dict(candidate(1))",
        "assert {candidate(1)} == {1}", "assert {candidate(1): 1}",
    ]:
        assert not _ok("candidate = f\n", test), test
    assert not _ok("import os\n", "assert os.getcwd()")  # a used import of a module other than math
    assert not _ok("from random import randint\n", "assert randint(1, 2)")
    assert not _ok("candidate = f\n", "assert candidate(1) ==")  # does not parse


@pytest.fixture(scope="module")
def pools():
    with Sandbox(small_config(workers=1)) as served, Sandbox(small_config(workers=1, judge_in_server=False)) as judged:
        yield served, judged


PROGRAMS = [
    "def f(x):\n    return x * 2\n",
    "def f(x):\n    return x + 1\n",
    "def f(x):\n    if x == 2:\n        raise ValueError('two')\n    return [x] if x > 5 else x * 2\n",
    "def f(x):\n    print('called', x)\n    return float('nan') if x == 3 else (x, x)\n",
    "import os\ndef f(x):\n    if x == 3:\n        os._exit(7)\n    return x * 2\n",
    "def f(x):\n    while x == 2:\n        pass\n    return x * 2\n",
    "def f(x) return",
    "raise RuntimeError('at load')\n",
    "class R:\n    def __eq__(self, o):\n        return True\ndef f(x):\n    return R()\n",
]
TESTS = [AssertTest("assert candidate(1) == 2"), AssertTest("assert f(2) == 4, 'two'"),
         AssertTest("assert candidate(3) == 6"), AssertTest("r = f(1)\nassert abs(r - 2) < 1e-9"),
         AssertTest("assert f(8) == [8]")]


def _summary(res):
    assert res.ok, res.infra_error
    return (res.compile_error, res.program_error, res.stdout,
            [(t.passed, t.error_type, t.error_message, t.traceback, t.stdout, t.timed_out) for t in res.tests])


def test_the_server_judges_exactly_as_a_judge_process_does(pools):
    served, judged = pools
    for _ in range(2):  # first use: compiled in the job; second: compiled by the caller
        for program in PROGRAMS:
            mine, reference = served.run(program, TESTS, setup="candidate = f\n"), judged.run(program, TESTS, setup="candidate = f\n")
            assert (mine.judge, reference.judge) == ("server", "process")
            assert _summary(mine) == _summary(reference), program


def test_test_code_that_could_change_the_server_goes_to_a_judge_process(pools):
    served, _ = pools
    res = served.run("def f():\n    return 1\n", [AssertTest("import math\nmath.pi = 3\nassert math.pi == 3")])
    assert [t.passed for t in res.tests] == [True] and res.judge == "process"
    # the next job on the same worker sees the real math.pi, whichever judge it gets
    for test in ["import math\nassert math.pi > 3.14", "assert f() == 1 and math.pi > 3.14"]:
        res = served.run("import math\ndef f():\n    return 1\n", [AssertTest(test)])
        assert [t.passed for t in res.tests] == [True], res.tests[0].error_message
    assert res.judge == "server"  # (math: the fork server's own, bound for the program's import)


def test_a_hanging_or_dying_program_does_not_stall_the_worker(pools):
    served, _ = pools
    hang = "def f(x):\n    import time\n    time.sleep(100)\n"
    res = served.run(hang, [AssertTest("assert f(1) == 1"), AssertTest("assert f(2) == 1")])
    assert [(t.passed, t.error_type) for t in res.tests] == [(False, "TimeoutError")] * 2 and res.judge == "server"
    flood = "def f(x):\n    print('x' * (4 << 20))\n    return x\n"
    res = served.run(flood, [AssertTest("assert f(1) == 1")])
    assert res.tests[0].error_type == "OutputLimitExceeded"
    setup, tests = tests_from_check("def check(candidate):\n    assert candidate(2) == 3\n", "inc")
    res = served.run_batch([Job("def inc(x):\n    return x + 1\n", tests, setup)] * 4)
    assert all(r.all_passed for r in res)


def test_test_code_judged_in_the_server_is_held_to_the_jobs_memory_and_time(pools):
    """Servable test code works on data the program sends and can chain assignments: in the fork
    server it gets the job's memory limit and deadline, a failure of the test, never the host's
    memory or a stalled worker."""
    served, _ = pools
    program = "def f(n):\n    return [7] * n\n"
    doubling = "a = f(1000)\n" + "a = a + a\n" * 40 + "assert len(a) > 0"  # 2**40 elements if nothing stops it
    slow = "a = f(200000)\n" + "b = sorted(a + a + a + a) == sorted(a + a + a + a)\n" * 200 + "assert b"  # (< 1 MB replies: see WatchedChannel.recv)
    assert servable("", [doubling]) is not None and servable("", [slow]) is not None
    res = served.run(program, [AssertTest(doubling), AssertTest("assert f(2) == [7, 7]")])
    assert res.judge == "server" and res.ok, res.infra_error
    assert [(t.passed, t.error_type) for t in res.tests] == [(False, "MemoryError"), (True, None)]
    res = served.run(program, [AssertTest(slow), AssertTest("assert f(2) == [7, 7]")])
    assert res.judge == "server" and res.ok, res.infra_error
    assert res.tests[0].passed is False and res.tests[0].timed_out, res.tests[0]
    assert res.wall_time_s < 10 * served.config.timeout_s
    res = served.run(program, [AssertTest("assert f(3) == [7, 7, 7]")])  # the worker is fine afterwards
    assert res.all_passed and res.judge == "server"
