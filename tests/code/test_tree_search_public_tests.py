"""Public tests of function-style problems parsed from the prompt (code/problem_tests.py)."""

from __future__ import annotations

from llm_marl_envs.code.problem_tests import Example, parse_examples, public_tests_for
from llm_marl_envs.data.humaneval import CodeProblem, load_humaneval

PROMPT = '''def f(xs, k=0):
    """Do things.
    >>> f([1, 2],
    ...   3)
    [3]
    >>> f([])

    f([5]) == 5
    f("a b") ➞ 'b a'
    f(2) => True
    f(3) ==> -1
    f(4) -> 1.5
    f(6) should return None.
    f(n) -> f(n - 1) + 1
    g(1) == 2
    f(x) = 7
    """
'''


def test_every_example_style_is_parsed_and_non_literals_are_ignored():
    assert parse_examples(PROMPT, "f") == [
        Example("f([1, 2], 3)", "[3]"),
        Example("f([])", "None"),
        Example("f([5])", "5"),
        Example("f('a b')", "'b a'"),
        Example("f(2)", "True"),
        Example("f(3)", "-1"),
        Example("f(4)", "1.5"),
        Example("f(6)", "None"),
    ]


def test_fallback_to_check_asserts_reports_inputs_where_it_can():
    problem = CodeProblem(
        task_id="x", prompt='def f(a):\n    """No examples here."""\n', entry_point="f",
        test="def check(candidate):\n    assert True\n    assert candidate(1) == 2\n"
             "    assert abs(candidate(2) - 3) < 1e-6\n    assert candidate(3) == 4\n    assert candidate(9) == 10\n",
    )  # fmt: skip
    source, asserts, inputs = public_tests_for(problem, fallback_asserts=3)
    assert source == "check" and len(asserts) == 3
    assert inputs == ["f(1)", "", "f(3)"]
    assert asserts[1] == "assert abs(candidate(2) - 3) < 1e-06"


def test_humaneval_public_tests_come_from_the_docstrings():
    problems = {p.task_id: p for p in load_humaneval()}
    source, asserts, inputs = public_tests_for(problems["HumanEval/0"])
    assert source == "examples"
    assert inputs == ["has_close_elements([1.0, 2.0, 3.0], 0.5)", "has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)"]
    counts = {"examples": 0, "check": 0}
    for p in problems.values():
        counts[public_tests_for(p)[0]] += 1
    assert counts == {"examples": 130, "check": 34}
