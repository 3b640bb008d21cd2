"""Honest programs keep their exact semantics, with the tests compiled in the job or sent compiled
by the caller, and only plain data crosses from the program to the judge.
"""

from __future__ import annotations

import pytest

from llm_marl_envs.sandbox import AssertTest, tests_from_check

from .conftest import passed

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
    assert passed(res) == [True] * 13 + [False], [(t.name, t.error_type, t.error_message) for t in res.tests]
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
    assert passed(sandbox.run(good, tests, setup=setup)) == [True, True, True]
    assert passed(sandbox.run(bad, tests, setup=setup)) == [False, True, True]


# -- a test set's later uses (compiled by the caller) ----------------------------------------------

def test_a_stateful_program_keeps_its_semantics_from_use_to_use(one_worker):
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
    for _ in range(3):  # first use: compiled in the job; then compiled by the caller
        res = one_worker.run(program, tests, setup=setup)
        assert passed(res) == expected, [(t.name, t.error_type, t.error_message) for t in res.tests]
        assert res.tests[2].error_type == "ZeroDivisionError"
    assert one_worker.test_code_hits == hits + 2


def test_answers_in_another_order_do_not_pass(one_worker):
    # A program that answers with the expected values in whatever order still only gives
    # values: the judge compares each with its own expectation.
    program = "answers = iter([2, 1])\ndef f(x):\n    return next(answers)\n"
    tests = [AssertTest("assert f(1) == 1"), AssertTest("assert f(2) == 2")]
    for _ in range(3):
        assert passed(one_worker.run(program, tests)) == [False, False]


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
