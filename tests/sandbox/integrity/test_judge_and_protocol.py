"""Issue #30, classes 1-4: programs that shape the judge's namespace, change the tests' control
flow through the exceptions they raise, decide the verdict through the protocol, or escape a limit
while their messages are decoded.

Most programs here speak the judge's protocol themselves: they write their own messages into
their end of the socket pair (descriptor 3 of the program process) instead of letting the
sandbox's program side answer. Every test below failed on main at 2c0baee (run from a copy of
that tree with the same tests); each runs with both judges (see conftest.py).
"""

from __future__ import annotations

from llm_marl_envs.sandbox import AssertTest, Job

from .conftest import passed

A = AssertTest

# The program side, spoken by the program itself: ``_send`` frames a message, ``_serve`` answers
# every request with ``reply(request)``.
SPEAK = '''
import os, json, sys
def _send(data):
    if isinstance(data, str):
        data = data.encode()
    os.write(3, len(data).to_bytes(4, "big") + data)
def _recv():
    head = b""
    while len(head) < 4:
        chunk = os.read(3, 4 - len(head))
        if not chunk:
            os._exit(0)
        head += chunk
    size, body = int.from_bytes(head, "big"), b""
    while len(body) < size:
        body += os.read(3, size - len(body))
    return json.loads(body)
def _serve(reply, names):
    _send(json.dumps({"ok": {}, "names": names}))
    while True:
        _send(reply(_recv()))
'''


# -- class 1: the program shapes the judge's namespace -------------------------------------------

def test_a_program_cannot_bind_the_tests_builtins(sandbox):
    """``__builtins__`` named by the program: every builtin the tests look up (abs, set, ...) would
    be the program's, and the expected values handed to them would reach the program."""
    program = SPEAK + '''
SEEN = []
def reply(request):
    if request["op"] in ("getitem", "getattr"):
        return '{"r": {"h": 0}}'
    if request["op"] == "call" and request["t"] == {"h": 0}:
        return '{"r": 0}'
    return '{"r": 1}'
_serve(reply, {"f": ["c"], "__builtins__": ["c"], "__name__": ["v", "x"]})
'''
    tests = [A("assert abs(f(2) - 5) < 1e-6"), A("assert set([f(1)]) == set([7])"), A("assert len([f(0)]) == 3")]
    assert passed(sandbox.run(program, tests)) == [False, False, False]


def test_a_builtin_dict_from_the_program_is_not_the_tests(sandbox):
    program = SPEAK + '''
_serve(lambda request: '{"r": 1}', {"f": ["c"], "__builtins__": ["v", {"d": [["abs", 0]]}]})
'''
    res = sandbox.run(program, [A("assert f() == 1"), A("assert abs(-f()) == 1")])
    assert passed(res) == [True, True]


def test_the_setup_computes_expected_values_with_the_real_builtins(sandbox):
    """A program defining ``sorted`` must not compute the expected value the set-up derives
    with it; a function under test named like a builtin stays reachable through an alias."""
    program = "def sorted(xs):\n    return 'x'\ndef f(xs):\n    return 'x'\n"
    res = sandbox.run(program, [A("assert f([3, 1, 2]) == expected")], setup="expected = sorted([3, 1, 2])\n")
    assert passed(res) == [False]
    res = sandbox.run("def sorted(xs):\n    return 42\n", [A("assert candidate([1]) == 42")], setup="candidate = sorted\n")
    assert passed(res) == [True]


EVIL_TEST_MODULE = '''
import gc
for _obj in gc.get_objects():
    if type(_obj).__name__ == "function" and _obj.__name__ == "finish" and _obj.__closure__:
        _emit = [c.cell_contents for c in _obj.__closure__ if callable(c.cell_contents)
                 and getattr(c.cell_contents, "__name__", "") == "emit"]
        if _emit:
            for _i in range(3):
                _emit[0]("begin", _i, True, {})
                _emit[0]("result", _i, True, {})
            _obj()
'''


def test_a_module_named_by_the_program_is_not_imported_by_the_judge(sandbox):
    """``unittest.__main__`` discovers tests in the current directory (the job directory, which
    the program writes) when it is imported: the program's code would run inside the judge."""
    program = (f"open('test_sbx_evil.py', 'w').write({EVIL_TEST_MODULE!r})\n" + SPEAK
               + "_serve(lambda request: '{\"r\": 1}', {\"f\": [\"c\"], \"u\": [\"m\", \"unittest.__main__\"],"
                 " \"s\": [\"m\", \"test_sbx_evil\"]})\n")
    res = sandbox.run(program, [A("assert f() == 2"), A("assert f() == 3"), A("assert f() == 4")])
    assert passed(res) == [False, False, False]


def test_the_judge_cannot_import_from_the_job_directory(sandbox):
    """Test code importing a module: never one the program wrote (neither cwd nor sys.path is the
    job directory for the judge)."""
    program = "open('heapq.py', 'w').write('def nlargest(*a):\\n    return [99]\\n')\n" \
              "open('sbx_helper.py', 'w').write('X = 1\\n')\ndef f():\n    return [3]\n"
    setup = "import os, sys\n"
    tests = [A("import heapq\nassert heapq.nlargest(1, [3]) == f()"),
             A("import sys\nassert '' not in sys.path and os.getcwd() not in sys.path"),
             A("try:\n    import sbx_helper\nexcept ImportError:\n    pass\nelse:\n    raise AssertionError('imported')")]
    assert passed(sandbox.run(program, tests, setup=setup)) == [True, True, True]


# -- class 2: exceptions that change the tests' control flow -------------------------------------

def test_stop_iteration_from_the_program_cannot_end_the_tests_iteration(sandbox):
    program = "def ok(x):\n    raise StopIteration\ndef gen():\n    yield 1\n    yield 2\n"
    tests = [A("assert all(map(ok, [1, 2, 3]))"), A("assert not any(not ok(x) for x in [1, 2])"),
             A("assert [x for x in gen()] == [1, 2]"), A("assert list(gen()) == [1, 2]"),
             A("try:\n    ok(1)\nexcept RuntimeError as e:\n    assert 'StopIteration' in str(e) or 'StopIteration' in type(e).__name__")]
    assert passed(sandbox.run(program, tests)) == [False, False, True, True, True]


# -- class 3: the protocol must never decide the verdict -----------------------------------------

def _all_failed_and_ok(res, n):
    assert res.ok, res.infra_error
    assert [t.passed for t in res.tests] == [False] * n


def test_a_names_message_nested_too_deep_fails_the_tests(sandbox):
    program = SPEAK + "_send('{\"ok\": {}, \"names\": ' + '[' * 200000 + ']' * 200000 + '}')\nimport time\ntime.sleep(5)\n"
    _all_failed_and_ok(sandbox.run(program, [A("assert f() == 1"), A("assert True")]), 2)


def test_numbers_that_overflow_a_float_fail_the_tests(sandbox):
    program = SPEAK + "_send('{\"ok\": {\"wall_time_s\": 1' + '0' * 400 + '}, \"names\": {\"f\": [\"c\"]}}')\n" \
                      "_serve(lambda r: '{\"r\": 1' + '0' * 5000 + '}', {})\n"
    _all_failed_and_ok(sandbox.run(program, [A("assert f() == 1"), A("assert f() == 2")]), 2)


def test_a_non_finite_timing_does_not_void_the_job(sandbox):
    program = SPEAK + '_serve(lambda r: \'{"r": 5, "c": Infinity}\', {"f": ["c"]})\n'
    res = sandbox.run(program, [A("assert f() == 5"), A("assert f() == 6"), A("assert f() == 5")])
    assert passed(res) == [True, False, True]
    assert all(0 <= t.cpu_time_s < 1e6 for t in res.tests)


def test_the_channel_closed_in_the_middle_of_a_test_fails_the_tests(sandbox):
    program = SPEAK + '''
_send(json.dumps({"ok": {}, "names": {"f": ["c"]}}))
request = _recv()
_send('{"r": 1}')
os._exit(0)
'''
    tests = [A("assert f(1) == 2 and f(2) == 3"), A("assert f(3) == 2"), A("assert f(4) == 2")]
    res = sandbox.run(program, tests)
    _all_failed_and_ok(res, 3)
    assert sandbox.run("def f(x):\n    return x\n", [A("assert f(2) == 2")]).all_passed


def test_the_channel_closed_before_the_next_call_fails_the_tests(sandbox):
    """The program answers one call and closes its end: the judge's next message (the next test's
    call) fails. On main at 2c0baee that ended the fork server (an infra error after the retry); it
    must fail the test that was starting."""
    program = SPEAK + '''
import time
_send(json.dumps({"ok": {}, "names": {"f": ["c"]}}))
_recv()
_send('{"r": 1}')
os.close(3)
time.sleep(3)
'''
    tests = [A("a = 1\nassert f(a) == 2"), A("assert f(2) == 2"), A("assert f(3) == 2")]
    honest = "def f(x):\n    return 2\n"
    assert sandbox.run(honest, tests).all_passed  # (from a test set's second use, the caller sends it compiled)
    _all_failed_and_ok(sandbox.run(program, tests), 3)
    assert sandbox.run(honest, tests).all_passed


# -- class 4: limits bind wherever the program's messages are decoded ----------------------------

def test_decoding_a_reply_is_held_to_the_tests_deadline(sandbox):
    """A reply sent just before the deadline that takes long to rebuild: the test fails as timed
    out close to its deadline, also in the fork server (where the decoding is not in a process
    the deadline kills; on main it ran on, uncharged, until the whole reply was rebuilt)."""
    program = SPEAK + '''
import time
BIG = b'{"r": [' + b'[[[[0]]]],' * 400_000 + b'0]}'  # fast to parse, slow to rebuild as plain data
def reply(request):
    time.sleep(0.3)
    return BIG
_serve(reply, {"f": ["c"]})
'''
    res = sandbox.run(program, [A("assert len(f()) == 400001")], timeout_s=0.5)
    assert res.ok, res.infra_error
    assert not res.tests[0].passed and res.tests[0].timed_out
    assert res.tests[0].wall_time_s < 0.9, res.tests[0].wall_time_s


def test_exception_type_names_and_messages_are_bounded(sandbox):
    program = SPEAK + '''
NAME = "E" * 3_000_000
_serve(lambda r: json.dumps({"x": [NAME, "ValueError", "m" * 3_000_000, "t" * 3_000_000]}), {"f": ["c"]})
'''
    res = sandbox.run(program, [A("f()")])
    assert res.ok and not res.tests[0].passed
    assert len(res.tests[0].error_type) <= 200 and len(res.tests[0].traceback or "") <= 2100


def test_a_failing_job_does_not_harm_its_batch(sandbox):
    program = SPEAK + "_send('{\"ok\": {}, \"names\": ' + '[' * 200000 + '}')\n"
    jobs = [Job(program, [A("assert f() == 1")]), Job("def f():\n    return 1\n", [A("assert f() == 1")])] * 2
    results = sandbox.run_batch(jobs)
    assert [r.ok for r in results] == [True] * 4
    assert [r.tests[0].passed for r in results] == [False, True, False, True]
