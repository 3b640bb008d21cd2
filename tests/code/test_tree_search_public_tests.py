"""Public tests of function-style problems parsed from the prompt (code/problem_tests.py)."""

from __future__ import annotations

from llm_marl_envs.code.problem_tests import Example, parse_examples
from llm_marl_envs.code.test_sets import case_key, function_test_sets
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


def test_without_examples_check_tests_are_held_out_seeded_and_no_longer_scored():
    problem = CodeProblem(
        task_id="x", prompt='def f(a):\n    """No examples here."""\n', entry_point="f",
        test="def check(candidate):\n    assert True\n    assert candidate(1) == 2\n"
             "    assert abs(candidate(2) - 3) < 1e-6\n    assert candidate(3) == 4\n    assert candidate(9) == 10\n",
    )  # fmt: skip
    sets = function_test_sets(problem, fallback_asserts=3)
    assert sets.public_source == "held_out" and sets.split.score_tests == "hidden"
    # min(3, 4 // 2) held out of 4 (the constant "assert True" is no test: it runs in the set-up)
    assert len(sets.public_tests) == 2 and len(sets.hidden_tests) == 2
    assert not {case_key(t) for t in sets.public_tests} & {case_key(t) for t in sets.hidden_tests}
    assert sets.split.held_out == tuple(sorted(sets.split.held_out)) and len(sets.split.held_out) == 2
    again = function_test_sets(problem, fallback_asserts=3)
    assert again == sets  # seeded by the task id: the same split every time
    for t, shown in zip(sets.public_tests, sets.public_inputs):  # "candidate(x) == y" asserts report their input
        assert (shown != "") == ("_io_message" in t.code)
    none = function_test_sets(problem, fallback_asserts=0)
    assert none.public_tests == () and len(none.hidden_tests) == 4 and none.public_source == "none"


def test_humaneval_public_tests_come_from_the_docstrings_and_are_not_scored():
    problems = {p.task_id: p for p in load_humaneval()}
    sets = function_test_sets(problems["HumanEval/0"])
    assert sets.public_source == "examples"
    assert sets.public_inputs == (
        "has_close_elements([1.0, 2.0, 3.0], 0.5)", "has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)"
    )
    counts = {"examples": 0, "held_out": 0, "none": 0, "shared": 0}
    for p in problems.values():
        sets = function_test_sets(p)
        counts[sets.public_source] += 1
        assert sets.hidden_tests, p.task_id
        if sets.split.score_tests == "hidden":
            assert not {case_key(t) for t in sets.public_tests} & {case_key(t) for t in sets.hidden_tests}, p.task_id
    # 3 problems have a single (looped) check test and no literal example: nothing shown;
    # HumanEval/34's only check assert is its docstring example: the score is a visible-test score
    assert counts == {"examples": 129, "held_out": 31, "none": 3, "shared": 1}
    assert function_test_sets(problems["HumanEval/34"]).split.score_tests == "visible"


def test_mbpp_prompt_asserts_are_examples():
    prompt = 'def f(a):\n    """\n    Add one.\n\n    Examples:\n    >>> assert f(1) == 2\n    >>> assert f(2) != 9\n    """\n'
    assert parse_examples(prompt, "f") == [Example("f(1)", "2")]
