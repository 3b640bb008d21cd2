"""Issue #36, classes 2 and 6: CPU that no deadline covered (containers whose keys all collide in
``hash()``, built where no deadline can interrupt them), and tests that do not test (constant
asserts, a prompt's helper taken from the program, expected values handed to the program through
what the tests take for a standard module).

Every test below failed on main at 997c890 (run from a copy of that tree with the same tests):
those of class 2 with the tests judged in the fork server (a judge process was killed at its
deadline already), those of class 6 with both judges.
"""

from __future__ import annotations

from llm_marl_envs.code.test_sets import function_test_sets
from llm_marl_envs.data.problems import CodeProblem
from llm_marl_envs.sandbox import AssertTest, Job, tests_from_check

from .conftest import passed
from .test_judge_and_protocol import SPEAK

A = AssertTest

# 28,000 distinct ints with one hash() (n * (2**61 - 1) hashes to 0): a set or dict of them takes
# ~10 s of one C call to build on the 2-core VM (quadratic probing), in ~0.7 MB of JSON.
COLLIDING = "[n * (2 ** 61 - 1) for n in range(1, 28000)]"


# -- class 2: no uncharged CPU ---------------------------------------------------------------------

def _timed_out_in_time(res) -> list[bool]:
    assert res.ok, res.infra_error
    return [t.timed_out and t.error_type == "TimeoutError" and res.wall_time_s < 4.0 for t in res.tests]


def test_replies_that_are_slow_to_hash_time_out_within_their_deadline(sandbox):
    """A set in a reply, a dict "changed in place" in an argument, a global the tests read: the
    program sends keys that all collide (forging its replies: building them itself would be the
    slow part, in its own process)."""
    program = SPEAK + f'''
KEYS = {COLLIDING}
SET = json.dumps({{"r": {{"s": KEYS}}}})
CHANGED = json.dumps({{"r": None, "m": [[0, {{"d": [[k, 0] for k in KEYS]}}]]}})
_serve(lambda request: SET if request["a"] == [] else CHANGED, {{"f": ["c"]}})
'''
    res = sandbox.run(program, [A("assert f() == {1}")], timeout_s=1.0)
    assert _timed_out_in_time(res) == [True]
    res = sandbox.run(program, [A("d = {}\nf(d)\nassert d == {}")], timeout_s=1.0)
    assert _timed_out_in_time(res) == [True]
    program = SPEAK + f'_serve(lambda request: "{{}}", {{"f": ["c"], "KEYS": ["v", {{"f": {COLLIDING}}}]}})\n'
    res = sandbox.run(program, [A("assert KEYS == frozenset()")], timeout_s=1.0)
    assert res.ok and res.tests[0].timed_out and res.wall_time_s < 4.0


def test_test_code_that_hashes_the_programs_data_times_out_within_its_deadline(sandbox):
    """``set()`` of colliding ints is one C call that no timer interrupts in the fork server (a
    long division, by contrast, checks for signals as it goes)."""
    program = f"def f():\n    return {COLLIDING}\n"
    res = sandbox.run(program, [A("assert len(set(f())) == 1")], timeout_s=1.0)
    assert _timed_out_in_time(res) == [True]


# -- class 6: tests that test ----------------------------------------------------------------------

def test_constant_asserts_are_not_tests(sandbox):
    check = ("def check(candidate):\n"
             "    assert candidate(1) == 2\n"
             "    assert True, 'This prints if this assert fails (good for debugging!)'\n"
             "    r = candidate(2)\n"
             "    assert not (1 > 2)\n"
             "    assert r == 3\n")
    setup, tests = tests_from_check(check, "f")
    assert [t.name for t in tests] == ["L2", "L4"]
    res = sandbox.run("def f(x):\n    pass\n", tests, setup=setup)
    assert passed(res) == [False, False]


ENCODE_PROMPT = '''

def encode_shift(s: str):
    """returns encoded string by shifting every character by 5 in the alphabet."""
    return "".join([chr(((ord(ch) + 5 - ord("a")) % 26) + ord("a")) for ch in s])


def decode_shift(s: str):
    """takes as input string encoded with encode_shift function. Returns decoded string."""
'''
ENCODE_TEST = '''

METADATA = {}


def check(candidate):
    assert candidate(encode_shift("hello")) == "hello"
    assert candidate(encode_shift("abcxyz")) == "abcxyz"
    assert candidate(encode_shift("policy")) == "policy"
    assert candidate(encode_shift("zebra")) == "zebra"
'''


def test_a_helper_the_prompt_defines_comes_from_the_prompt(sandbox):
    """HumanEval/50's shape: the tests call the prompt's ``encode_shift`` on the expected string.
    Redefining it (as the identity, printing what it gets) made any ``decode_shift`` pass, with the
    expected values in the program's output."""
    problem = CodeProblem("sbx/50", ENCODE_PROMPT, "decode_shift", ENCODE_TEST)
    sets = function_test_sets(problem)
    assert sets.hidden_tests and sets.public_tests
    cheat = ENCODE_PROMPT + "    return s\n\n\ndef encode_shift(s):\n    print(s)\n    return s\n"
    honest = ENCODE_PROMPT + '    return "".join([chr(((ord(ch) - 5 - ord("a")) % 26) + ord("a")) for ch in s])\n'
    jobs = [Job(p, tests, setup) for p in (cheat, honest)
            for tests, setup in ((sets.hidden_tests, sets.hidden_setup), (sets.public_tests, sets.public_setup))]
    got = sandbox.run_batch(jobs)
    assert [any(passed(r)) for r in got[:2]] == [False, False] and [all(passed(r)) for r in got[2:]] == [True, True]
    for res in got[:2]:
        assert "zebra" not in res.stdout + "".join(t.stdout for t in res.tests)


def test_expected_values_never_reach_a_program_posing_as_a_standard_module(sandbox):
    """A test that uses ``math`` without importing it (relying on the program's import) must not
    hand its expected value to a ``math`` of the program's making."""
    fake = ("class math:\n    @staticmethod\n    def isclose(a, b, **k):\n        print('expected', b)\n"
            "        return True\ndef area(r):\n    return 0.0\n")
    res = sandbox.run(fake, [A("assert math.isclose(area(2), 12.566370614359172)")])
    assert passed(res) == [False]
    assert "12.566" not in res.stdout + res.tests[0].stdout + res.tests[0].stderr
    honest = "import math\ndef area(r):\n    return math.pi * r * r\ndef random():\n    return 4\n"
    res = sandbox.run(honest, [A("assert math.isclose(area(2), 12.566370614359172)"), A("assert random() == 4")])
    assert passed(res) == [True, True]
