"""The comparison cannot be influenced by the program: attacks that try to make a test report
"passed" without the program's functions returning the right values.
"""

from __future__ import annotations

from llm_marl_envs.sandbox import AssertTest

from .conftest import MEMSCAN, passed

# -- 1. the comparison cannot be influenced by the program ---------------------------------------

def test_an_object_equal_to_everything_does_not_pass(sandbox):
    program = ("class Anything:\n    def __eq__(self, other):\n        return True\n"
               "    def __ne__(self, other):\n        return False\n    __hash__ = object.__hash__\n"
               "def add(a, b):\n    return Anything()\n")
    tests = [AssertTest("assert add(1, 2) == 3"), AssertTest("assert add(2, 2) == 5"),
             AssertTest("assert not (add(1, 1) != 2)")]
    res = sandbox.run(program, tests)
    assert passed(res) == [False, False, False]
    assert res.tests[0].error_type == "AssertionError"  # the judge's own ==: equal only to itself
    res = sandbox.run(program.replace("return Anything()", "return Anything()\ndef truthy():\n    return Anything()"),
                      [AssertTest("assert truthy()")])
    assert passed(res) == [False] and res.tests[0].error_type == "ResultNotPlainData"


def test_subclasses_of_builtin_types_are_not_trusted_either(sandbox):
    program = ("class Liar(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
               "def f(x):\n    return Liar(0)\n"
               "class L(list):\n    def __eq__(self, other):\n        return True\n"
               "def g():\n    return [L()]\n")
    res = sandbox.run(program, [AssertTest("assert f(1) == 7"), AssertTest("assert g() == [[1, 2]]")])
    assert passed(res) == [False, False]


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
    assert passed(res) == [False, False]


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
    assert passed(res) == [False, False]


def test_rewriting_cached_small_integers_through_ctypes_does_not_pass(sandbox):
    program = (
        "import ctypes, sys\n"
        "def f(x):\n    return 201\n"
        "_digit = ctypes.c_uint32.from_address(id(217) + 24)\n"  # ob_digit[0] of 217 (CPython, 64-bit)
        "_digit.value = 201\n"
    )
    res = sandbox.run(program, [AssertTest("assert f(1) == 217")])
    assert passed(res) == [False]


def test_patching_the_comparison_helpers_of_the_program_process_does_not_pass(sandbox):
    program = ("import builtins, operator, math\n"
               "builtins.isinstance = lambda *a: True\n"
               "math.isclose = lambda *a, **k: True\n"
               "operator.eq = lambda a, b: True\n"
               "def f(x):\n    return 1.0\n")
    tests = [AssertTest("import math\nassert math.isclose(f(1), 2.0)"),
             AssertTest("assert isinstance(f(1), str)")]
    assert passed(sandbox.run(program, tests)) == [False, False]


def test_a_program_cannot_read_its_own_tests_to_answer_them(sandbox):
    program = MEMSCAN + ("def secret_answer():\n"
                         "    hits = _scan(rb'tok-[0-9]{5}X')\n"
                         "    return hits[0].decode() if hits else ''\n")
    res = sandbox.run(program, [AssertTest('assert secret_answer() == "tok-93771X"')])
    assert passed(res) == [False]


def test_exit_and_signal_games_in_a_test_do_not_pass(sandbox):
    program = ("import os, sys, signal\n"
               "def a():\n    sys.exit(0)\n"
               "def b():\n    os._exit(0)\n"
               "def c():\n    os.kill(os.getpid(), signal.SIGKILL)\n"
               "def d():\n    raise SystemExit\n")
    tests = [AssertTest("assert a() == 1"), AssertTest("assert b() == 1"),
             AssertTest("assert c() == 1"), AssertTest("assert d() == 1")]
    assert passed(sandbox.run(program, tests)) == [False, False, False, False]
