"""Problems of ``code/coder_tester_v0``: function-writing (HumanEval shape) or stdin/stdout.

:class:`CoderTesterProblem` is one problem in the form the coder/tester task needs: the
statement both agents see, the golden tests (hidden from the agents), the reference
solution (when the dataset has one) and the kind of tests the tester writes:

- ``"function"`` (HumanEval, CoopHumanEval / MBPP JSONL): golden tests are the asserts of the
  problem's ``check``; the coder writes the entry point; the tester writes Python asserts
  (top-level, or a HumanEval-style ``def check(candidate)``).
- ``"stdio"`` (the shipped stdio sample; APPS, CodeContests, LiveCodeBench JSONL): golden
  tests are the private tests (the public ones when there are none); the coder writes a
  program reading stdin; the tester writes ``<input>...</input><output>...</output>`` pairs.

:func:`load_coder_tester_problems` resolves the task's ``dataset=`` argument.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from llm_marl_envs.data.humaneval import CodeProblem, load_code_problems
from llm_marl_envs.data.jsonl import iter_jsonl
from llm_marl_envs.data.stdio_problems import FORMATS as STDIO_FORMATS
from llm_marl_envs.data.stdio_problems import StdioProblem, load_stdio_problems, load_stdio_sample

__all__ = ["CoderTesterProblem", "from_code_problem", "from_stdio_problem", "load_coder_tester_problems"]


@dataclass(frozen=True)
class CoderTesterProblem:
    """One problem: statement, golden tests, optional reference (see the module docstring)."""

    task_id: str
    kind: str  #: "function" or "stdio"
    statement: str
    golden_tests: tuple = ()  #: sandbox AssertTest (function) or IOTest (stdio) objects
    golden_setup: str = ""
    reference: str | None = None
    entry_point: str = ""
    prelude: str = ""  #: function problems: imports / given helpers put before the coder's code
    golden_source: str = field(default="", repr=False)  #: the golden tests as a tester would write them


def from_code_problem(p: CodeProblem) -> CoderTesterProblem:
    """A function-writing problem; golden tests split from its ``check`` code."""
    from llm_marl_envs.sandbox import tests_from_check

    setup, tests = tests_from_check(p.test, p.entry_point, prompt=p.prompt)
    if not tests:
        raise ValueError(f"{p.task_id}: the check code has no assert")
    statement = (f"Write the Python function `{p.entry_point}`:\n```python\n{p.prompt.rstrip()}\n```")
    return CoderTesterProblem(p.task_id, "function", statement, tuple(tests), setup, p.reference_program,
                              p.entry_point, p.prelude(), p.test)


def from_stdio_problem(p: StdioProblem) -> CoderTesterProblem:
    """A stdin/stdout problem; golden tests are the private tests (else the public ones)."""
    from llm_marl_envs.sandbox import IOTest

    cases = p.private_tests or p.public_tests
    tests = tuple(IOTest(c.input, c.output, name=f"golden {i + 1}") for i, c in enumerate(cases))
    statement = f"Write a Python program that reads standard input and prints the answer.\n\n{p.statement}"
    source = "\n".join(f"<input>\n{c.input}</input>\n<output>\n{c.output}</output>" for c in cases)
    return CoderTesterProblem(p.task_id, "stdio", statement, tests, "", p.reference_solution, golden_source=source)


def load_coder_tester_problems(
    dataset: str | Path | Sequence[CodeProblem | StdioProblem], format: str = "auto"
) -> list[CoderTesterProblem]:
    """``"humaneval"``, ``"stdio_sample"``, a JSONL path, or a list of problems.

    For a path, ``format`` is ``"code"`` (CoopHumanEval / MBPP / HumanEval JSONL), one of the
    stdio formats (``"native"``, ``"apps"``, ``"code_contests"``, ``"livecodebench"``), or
    ``"auto"``: a first record with ``entry_point`` or ``test_list`` is code, else stdio (auto).
    """
    if isinstance(dataset, (str, Path)):
        name = str(dataset).lower()
        if name == "humaneval":
            return [from_code_problem(p) for p in load_code_problems("humaneval")]
        if name == "stdio_sample":
            return [from_stdio_problem(p) for p in load_stdio_sample()]
        if format == "auto":
            first = next(iter_jsonl(dataset), (0, {}))[1]
            format = "code" if "entry_point" in first or "test_list" in first else "auto"
            if format == "code":
                return [from_code_problem(p) for p in load_code_problems(dataset)]
        elif format == "code":
            return [from_code_problem(p) for p in load_code_problems(dataset)]
        if format not in STDIO_FORMATS:
            raise ValueError(f"format must be 'code' or one of {STDIO_FORMATS}, got {format!r}")
        return [from_stdio_problem(p) for p in load_stdio_problems(dataset, format=format)]
    out = []
    for p in dataset:
        if isinstance(p, CodeProblem):
            out.append(from_code_problem(p))
        elif isinstance(p, StdioProblem):
            out.append(from_stdio_problem(p))
        else:
            raise TypeError(f"problems must be CodeProblem or StdioProblem, got {type(p).__name__}")
    return out
