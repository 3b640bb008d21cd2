"""The public (visible) and hidden (scoring) test sets of a code problem, disjoint by rule.

The code tasks get their two test sets from here only; the split itself is
:func:`llm_marl_envs.data.test_split.split_tests` (the rule, the seeded hold-out and the
record). This module supplies, per problem kind, the candidate tests and the identity of a
test (:func:`case_key`):

- **function-style** (:func:`function_test_sets`, HumanEval / MBPP / EvalPlus /
  BigCodeBench / call-based problems): visible candidates = the examples written in the
  prompt (:func:`~llm_marl_envs.code.problem_tests.parse_examples`, and ``>>> assert``
  lines as written, :func:`~llm_marl_envs.code.problem_tests.prompt_asserts`); hidden candidates =
  the tests of the full ``check`` (``tests_from_check``). A hidden test that is the same
  call with the same expected value as an example is not scored (the agents read it in the
  prompt). Where the prompt has no example, up to ``fallback_asserts`` tests of ``check``
  are held out (seeded) as the public tests and are no longer scored; those of the form
  ``candidate(...) == value`` are rewritten to report input / expected / got.
- **stdin/stdout** (:func:`stdio_test_sets`): visible candidates = the public tests,
  hidden candidates = the private tests; identity = stdin and expected stdout compared
  line by line with trailing whitespace ignored.

Every result has passed :func:`~llm_marl_envs.data.test_split.assert_disjoint`; its
``split`` (a :class:`~llm_marl_envs.data.test_split.TestSplit`) says what was done and
whether the score is a hidden-test or a visible-test score.
"""

from __future__ import annotations

import ast
from collections.abc import Hashable
from dataclasses import dataclass, replace
from typing import Any

from llm_marl_envs.code.problem_tests import (
    PUBLIC_SETUP,
    example_assert,
    io_assert,
    parse_examples,
    prompt_asserts,
)
from llm_marl_envs.data.problems import CodeProblem
from llm_marl_envs.data.stdio_problems import StdioProblem
from llm_marl_envs.data.test_split import SplitConfig, TestSplit, split_tests
from llm_marl_envs.sandbox import AssertTest, IOTest, tests_from_check

__all__ = ["TestSets", "function_test_sets", "held_out_sets", "stdio_test_sets", "case_key"]


@dataclass(frozen=True)
class TestSets:
    """A problem's public and hidden tests (``public_source``: "examples", "io", "held_out",
    "none" or "shared"; ``public_inputs``: the input each public test shows, or "")."""

    __test__ = False  # not a pytest test class

    public_setup: str
    public_tests: tuple[Any, ...]
    public_inputs: tuple[str, ...]
    public_source: str
    hidden_setup: str
    hidden_tests: tuple[Any, ...]
    split: TestSplit


def function_test_sets(
    problem: CodeProblem, fallback_asserts: int = 3, config: SplitConfig | None = None
) -> TestSets:
    """Public tests = the prompt's examples (or a seeded hold-out of ``check``), hidden = the rest."""
    cfg = replace(config or SplitConfig(), max_held_out=max(0, fallback_asserts))
    entry = problem.entry_point
    hidden_setup, hidden = tests_from_check(problem.test, entry, prompt=problem.prompt)
    examples = parse_examples(problem.prompt, entry)
    shown = [AssertTest(example_assert(ex, entry), name=f"public_{i}") for i, ex in enumerate(examples)]
    inputs = {case_key(t): ex.call for t, ex in zip(shown, examples)}
    shown += [
        AssertTest(a, name=f"public_{len(shown) + i}")
        for i, a in enumerate(prompt_asserts(problem.prompt, entry))
    ]
    public_setup = f"{hidden_setup}\n{PUBLIC_SETUP}\ncandidate = {entry}\n"
    vis, hid, record = split_tests(shown, hidden, case_key, problem.task_id, "examples", cfg)
    if record.visible_source == "held_out":
        vis, shown_inputs = _reported(vis, entry)
    else:
        shown_inputs = tuple(inputs.get(case_key(t), "") for t in vis)
    return TestSets(public_setup, vis, shown_inputs, record.visible_source, hidden_setup, hid, record)


def stdio_test_sets(problem: StdioProblem, config: SplitConfig | None = None) -> TestSets:
    """Public tests = the problem's public tests, hidden = its private tests (see the module doc)."""
    public = [IOTest(c.input, c.output, name=f"public_{i}") for i, c in enumerate(problem.public_tests)]
    private = [IOTest(c.input, c.output, name=f"hidden_{i}") for i, c in enumerate(problem.private_tests)]
    vis, hid, record = split_tests(public, private, case_key, problem.task_id, "io", config)
    if record.visible_source == "held_out":
        vis = tuple(replace(t, name=f"public_{i}") for i, t in enumerate(vis))
    inputs = tuple(t.stdin.rstrip("\n") for t in vis)
    return TestSets("", vis, inputs, record.visible_source, "", hid, record)


def held_out_sets(
    task_id: str,
    hidden_setup: str,
    hidden: tuple[Any, ...],
    entry_point: str,
    config: SplitConfig | None = None,
) -> TestSets:
    """New public tests held out (seeded) from ``hidden`` alone: used when a problem's own
    public tests all turn out wrong (its reference fails them), instead of showing hidden tests."""
    vis, hid, record = split_tests((), hidden, case_key, task_id, "held_out", config)
    vis, inputs = _reported(vis, entry_point) if entry_point else (vis, tuple(_shown_input(t) for t in vis))
    setup = f"{hidden_setup}\n{PUBLIC_SETUP}\ncandidate = {entry_point}\n" if entry_point else hidden_setup
    return TestSets(setup, vis, inputs, record.visible_source, hidden_setup, hid, record)


def case_key(test: Any) -> Hashable:
    """The identity of a test: ``("io", stdin, stdout)`` (normalised lines) for an I/O test;
    ``("call", args, expected)`` for an assert comparing one call with a literal (plain
    ``assert f(x) == y``, a comparison helper ``assert h(f(x), y, ...)`` such as the public
    tests' reporting form, or call-based APPS cases' ``f(x) in (y, [y])``); else the
    normalised code."""
    if isinstance(test, IOTest):
        return ("io", _lines(test.stdin), _lines(test.expected_stdout))
    code = test.code if isinstance(test, AssertTest) else str(test)
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return ("code", code.strip())
    if len(tree.body) == 1 and isinstance(tree.body[0], ast.Assert):
        pair = _call_and_expected(tree.body[0].test)
        if pair is not None:
            return ("call", *pair)
    return ("code", ast.unparse(tree))


# ---------------------------------------------------------------------------- internals
def _reported(tests: tuple[Any, ...], entry: str) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    """Held-out ``check`` tests renamed ``public_<i>``; ``candidate(...) == v`` asserts rewritten
    to report input / expected / got."""
    out, inputs = [], []
    for i, t in enumerate(tests):
        node = _single_assert(t.code)
        converted = io_assert(node, entry) if node is not None else None
        if converted is None:
            out.append(AssertTest(t.code, name=f"public_{i}"))
            inputs.append("")
        else:
            out.append(AssertTest(converted[0], name=f"public_{i}"))
            inputs.append(converted[1])
    return tuple(out), tuple(inputs)


def _shown_input(test: Any) -> str:
    return test.stdin.rstrip("\n") if isinstance(test, IOTest) else ""


def _single_assert(code: str) -> ast.Assert | None:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    return tree.body[0] if len(tree.body) == 1 and isinstance(tree.body[0], ast.Assert) else None


def _call_and_expected(test: ast.expr) -> tuple[str, str] | None:
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        call, expected = test.left, test.comparators[0]
    elif (  # call-based APPS cases: ``candidate(...) in (v, [v])`` (data/call_based.py)
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.In)
        and isinstance(test.comparators[0], ast.Tuple)
        and test.comparators[0].elts
    ):
        call, expected = test.left, test.comparators[0].elts[0]
    elif isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and len(test.args) >= 2:
        # a comparison helper: the public tests' ``_io_equal(_got := call, _exp := value)``,
        # EvalPlus' ``_ep_close(call, value, atol)``
        call, expected = (a.value if isinstance(a, ast.NamedExpr) else a for a in test.args[:2])
    else:
        return None
    if not isinstance(call, ast.Call):
        return None
    args = ast.Tuple(elts=list(call.args), ctx=ast.Load())
    kwargs = sorted((k.arg or "**", _value(k.value)) for k in call.keywords)
    return f"{_value(args)}|{kwargs}", _value(expected)


def _value(node: ast.expr) -> str:
    """``repr`` of a literal's value (so ``1.0`` and ``1.00`` agree), else its source."""
    try:
        return repr(ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return ast.unparse(node)


def _lines(text: str) -> tuple[str, ...]:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return tuple(lines)
