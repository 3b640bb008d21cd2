"""Hostile output, attempts to fake a pass, and degenerate programs."""

from __future__ import annotations

import time

from llm_marl_envs.sandbox import IOTest

from .conftest import A, outcome


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
