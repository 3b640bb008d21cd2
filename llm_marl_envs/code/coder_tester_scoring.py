"""Scoring one coder/tester turn: read the tester's tests, run everything in the sandbox, reward.

Per turn, three sandbox jobs run in one batch (model-written code never runs in this
process):

1. the coder's program on the golden tests -> ``coder_golden_pass`` (the joint reward);
2. the tester's tests on the reference solution -> which of them are *valid*
   (``tester_valid``: the fraction the reference passes; absent when the dataset has no
   reference solution, and then every tester test counts as valid);
3. the tester's tests on the coder's program -> ``coder_tester_pass`` (the fraction of the
   valid tester tests the coder passes) and ``tester_agreement``: 1 when the valid tester
   tests and the golden tests agree on whether the coder's program is correct (both pass
   it, or both catch a failure), 0 when they disagree or the tester wrote no valid test.

Tester tests (see :func:`parse_tester_tests`): Python asserts for function problems, a test
per top-level statement with an ``assert`` (a HumanEval ``def check(candidate)`` works too);
``<input>...</input><output>...</output>`` pairs for stdio problems. A tester's definition
of the entry point is dropped (it would replace the coder's function).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from llm_marl_envs.code.coder_tester_problems import CoderTesterProblem
from llm_marl_envs.code.extract import extract_code
from llm_marl_envs.sandbox import AssertTest, IOTest, Job, SandboxError

__all__ = ["TesterTests", "TurnScore", "coder_program", "parse_tester_tests", "score_turn"]

_IO_PAIR = re.compile(r"<input>\n?(.*?)</input>\s*<output>\n?(.*?)</output>", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class TesterTests:
    """The tests read from a tester answer, with the format problems found."""

    tests: tuple[AssertTest | IOTest, ...]
    setup: str = ""
    issues: tuple[str, ...] = ()


def parse_tester_tests(problem: CoderTesterProblem, answer: str, max_tests: int) -> TesterTests:
    """Read the tester's tests (module docstring); at most ``max_tests``."""
    issues: list[str] = []
    if problem.kind == "stdio":
        pairs = _IO_PAIR.findall(answer)
        tests: list[Any] = [IOTest(i, o, name=f"tester {k + 1}") for k, (i, o) in enumerate(pairs)]
        setup = ""
    else:
        from llm_marl_envs.sandbox import tests_from_check

        code = _drop_definitions(extract_code(answer).code, problem.entry_point, issues)
        try:
            setup, tests = (tests_from_check(code, problem.entry_point, prompt=problem.prelude) if code.strip()
                            else ("", []))
        except ValueError:
            setup, tests = "", []
            issues.append("the tests do not parse as Python")
        tests = [AssertTest(t.code, name=f"tester {k + 1}") for k, t in enumerate(tests)]
    if not tests:
        issues.append("no tests found" + (" (expected <input>...</input><output>...</output> pairs)"
                                          if problem.kind == "stdio" else " (expected Python asserts)"))
    if len(tests) > max_tests:
        issues.append(f"{len(tests)} tests cut to {max_tests}")
        tests = tests[:max_tests]
    return TesterTests(tuple(tests), setup, tuple(issues))


def _drop_definitions(code: str, name: str, issues: list[str]) -> str:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    kept = [n for n in tree.body if not (isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                                         and n.name == name)]
    if len(kept) == len(tree.body):
        return code
    issues.append(f"the tester's own definition of `{name}` dropped")
    return "\n".join(ast.unparse(n) for n in kept)


def coder_program(problem: CoderTesterProblem, answer: str) -> str:
    """The coder's program: the problem's prelude (function problems) plus the extracted code."""
    code = extract_code(answer).code
    if problem.kind == "function" and problem.prelude and code.strip():
        return f"{problem.prelude}\n\n\n{code}\n"
    return code


@dataclass
class TurnScore:
    """Everything one turn's runs gave: the components and the per-test outcomes for feedback."""

    golden_pass: float
    coder_components: dict[str, float]
    tester_components: dict[str, float]
    tester_results: list[Any] = field(default_factory=list)  #: TestResult of each tester test on the coder
    valid: list[bool] = field(default_factory=list)


def score_turn(sandbox: Any, problem: CoderTesterProblem, program: str, tester: TesterTests,
               timeout_s: float | None) -> TurnScore:
    """Run the three jobs of the module docstring in one batch and compute the components."""
    jobs = [Job(program, list(problem.golden_tests), setup=problem.golden_setup, timeout_s=timeout_s)]
    has_tests = bool(tester.tests)
    check_reference = has_tests and problem.reference is not None
    if has_tests:
        jobs.append(Job(program, list(tester.tests), setup=tester.setup, timeout_s=timeout_s))
    if check_reference:
        jobs.append(Job(problem.reference, list(tester.tests), setup=tester.setup, timeout_s=timeout_s))
    results = sandbox.run_batch(jobs) if program.strip() or has_tests else []
    for r in results:
        if r.infra_error is not None:
            raise SandboxError(f"sandbox infrastructure error (not a wrong answer): {r.infra_error}")
    golden = results[0].pass_fraction if program.strip() else 0.0
    golden_all = program.strip() != "" and results[0].all_passed
    tester_components: dict[str, float] = {}
    coder_components = {"coder_golden_pass": golden}
    on_coder: list[Any] = []
    valid: list[bool] = []
    if has_tests:
        on_coder = list(results[1].tests) if program.strip() else []
        passed_on_coder = [bool(program.strip()) and t.passed for t in results[1].tests]
        valid = [t.passed for t in results[2].tests] if check_reference else [True] * len(tester.tests)
        if check_reference:
            tester_components["tester_valid"] = sum(valid) / len(valid)
        n_valid = sum(valid)
        caught = [p for p, v in zip(passed_on_coder, valid) if v]
        coder_components["coder_tester_pass"] = (sum(caught) / n_valid) if n_valid else 0.0
        agree = n_valid > 0 and all(caught) == golden_all
        tester_components["tester_agreement"] = float(agree)
    else:
        tester_components["tester_agreement"] = 0.0
        if problem.reference is not None:
            tester_components["tester_valid"] = 0.0
        coder_components["coder_tester_pass"] = 0.0
    return TurnScore(golden, coder_components, tester_components, on_coder, valid)
