"""Feedback text from real sandbox runs (code/feedback.py)."""

from __future__ import annotations

import pytest

from llm_marl_envs.code.feedback import (
    COMPILE_ERROR,
    EXCEPTION,
    FAILED,
    INFRA_ERROR,
    PASSED,
    TIMEOUT,
    WRONG_ANSWER,
    FeedbackConfig,
    analyze,
    clean_text,
    parse_failures,
    render_feedback,
    trim_traceback,
    truncate_middle,
)
from llm_marl_envs.code.problem_tests import PUBLIC_SETUP, Example, example_assert
from llm_marl_envs.sandbox import AssertTest, ExecResult, IOTest, default_sandbox


@pytest.fixture(scope="module")
def sandbox():
    return default_sandbox()


ADD_TESTS = [IOTest("1 2\n", "3\n", name="t0"), IOTest("5 5\n", "10\n", name="t1"), IOTest("0 0\n", "0\n", name="t2")]


def test_stdio_wrong_answer_shows_input_expected_got(sandbox):
    program = "a, b = map(int, input().split())\nprint(a * b)\n"
    res = sandbox.run(program, ADD_TESTS)
    fb = analyze(res)
    assert fb.status == FAILED and (fb.passed, fb.total) == (1, 3)
    assert [f.kind for f in fb.failures] == [WRONG_ANSWER, WRONG_ANSWER]
    text = fb.render()
    assert text.splitlines()[0] == "Public tests: 1/3 passed."
    assert "Test 1 (t0): wrong answer\n  input: 1 2\n  expected: 3\n  got: 2" in text
    blocks = parse_failures(text)
    assert [(b["test"], b["input"], b["expected"], b["got"]) for b in blocks] == [("1", "1 2", "3", "2"), ("2", "5 5", "10", "25")]


def test_exception_shows_type_message_and_trimmed_traceback(sandbox):
    program = "def solve(a, b):\n    return a // b\n\na, b = map(int, input().split())\nprint(solve(a, b))\n"
    res = sandbox.run(program, [IOTest("1 0\n", "0\n", name="div")])
    (f,) = analyze(res).failures
    assert f.kind == EXCEPTION and f.error_type == "ZeroDivisionError"
    text = render_feedback(res)
    assert "Test 1 (div): exception ZeroDivisionError: integer division or modulo by zero" in text
    assert "  input: 1 0" in text and "traceback:" in text and "return a // b" in text
    assert "/tmp/" not in text  # run-specific paths reduced to base names


def test_timeout_is_reported_without_times(sandbox):
    res = sandbox.run("while True:\n    pass\n", [IOTest("", "1\n", name="loop")], timeout_s=0.5)
    (f,) = analyze(res).failures
    assert f.kind == TIMEOUT
    text = render_feedback(res)
    assert "Test 1 (loop): time limit exceeded" in text
    assert "0.5" not in text and " s)" not in text


def test_syntax_error_has_line_and_column(sandbox):
    res = sandbox.run("def f(:\n    return 1\n", ADD_TESTS)
    fb = analyze(res)
    assert fb.status == COMPILE_ERROR and fb.passed == 0
    text = fb.render()
    assert text.startswith("Public tests: 0/3 passed. The program does not compile:")
    assert "line 1" in text


def test_program_crashing_at_load_time_is_explained(sandbox):
    res = sandbox.run('raise ValueError("boom")\ndef f():\n    pass\n', [AssertTest("assert f() is None", name="L2")])
    fb = analyze(res)
    assert fb.program_error == "ValueError: boom" and fb.failures[0].kind == EXCEPTION
    assert "The program raised an error while loading:\n  ValueError: boom" in fb.render()


def test_function_example_assert_reports_input_expected_got(sandbox):
    test = AssertTest(example_assert(Example("add(2, 3)", "5"), "add"), name="public_0")
    ok = sandbox.run("def add(a, b):\n    return a + b\n", [test], setup=PUBLIC_SETUP + "\ncandidate = add\n")
    assert analyze(ok).status == PASSED
    bad = sandbox.run("def add(a, b):\n    return [a, b]\n", [test], setup=PUBLIC_SETUP + "\ncandidate = add\n")
    (f,) = analyze(bad).failures
    assert (f.kind, f.input, f.expected, f.got) == (WRONG_ANSWER, "add(2, 3)", "5", "[2, 3]")
    assert "  input: add(2, 3)\n  expected: 5\n  got: [2, 3]" in render_feedback(bad)


def test_float_examples_compare_with_tolerance(sandbox):
    test = AssertTest(example_assert(Example("half(1)", "0.5"), "half"), name="p")
    setup = PUBLIC_SETUP + "\ncandidate = half\n"
    assert analyze(sandbox.run("def half(x):\n    return x / 2 + 1e-12\n", [test], setup=setup)).status == PASSED
    assert analyze(sandbox.run("def half(x):\n    return 0.6\n", [test], setup=setup)).status == FAILED


def test_modes_and_limits():
    long = "x" * 5000
    fake = ExecResult(
        tests=[_tr(f"t{i}", stdin=long, expected="1", got="2") for i in range(5)], total=5
    )  # a result as the sandbox builds it, with huge inputs
    text = render_feedback(fake, FeedbackConfig(max_failures=2, max_field_chars=100, max_total_chars=2000))
    assert len(text) <= 2100 and "characters omitted" in text
    assert "(3 more failing tests not shown)" in text
    assert render_feedback(fake, FeedbackConfig(mode="pass_fail")) == "Public tests: 0/5 passed."
    assert render_feedback(fake, FeedbackConfig(mode="none")) == ""
    with pytest.raises(ValueError):
        FeedbackConfig(mode="verbose")


def test_infra_error_is_never_a_wrong_answer():
    res = ExecResult(total=3, infra_error="fork server died")
    fb = analyze(res)
    assert fb.status == INFRA_ERROR and fb.is_infra_error and not fb.failures
    text = fb.render()
    assert "infrastructure error" in text and "not scored" in text and "0/3" not in text


def test_helpers():
    assert truncate_middle("abc", 10) == "abc"
    cut = truncate_middle("a" * 100 + "b" * 100, 80)
    assert cut.startswith("aaa") and cut.endswith("bbb") and "omitted" in cut and len(cut) <= 90
    tb = "Traceback (most recent call last):\n" + "\n".join(f'  File "/tmp/j{i}/solution.py", line {i}' for i in range(20))
    trimmed = trim_traceback(clean_text(tb), 3)
    assert trimmed.splitlines() == ["...", '  File "solution.py", line 17', '  File "solution.py", line 18',
                                    '  File "solution.py", line 19']  # fmt: skip
    assert clean_text("<object at 0x7f00deadbeef>") == "<object at 0x...>"


def _tr(name: str, **kw):
    from llm_marl_envs.sandbox import TestResult

    return TestResult(name=name, passed=False, kind="io", **kw)
