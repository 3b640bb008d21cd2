"""The problems of ``code/tree_search_v0``: what the agents see and the public/hidden test sets.

:func:`load_search_problems` resolves the environment's ``dataset=`` argument (HumanEval,
the shipped stdin/stdout sample, a JSONL file or a list of problems) into
:class:`SearchProblem` records: function-style problems get public tests from their
prompt's examples and hidden tests from the full ``check``; stdin/stdout problems keep
their public and private tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_marl_envs.code.problem_tests import PUBLIC_SETUP, public_tests_for
from llm_marl_envs.data.humaneval import CodeProblem, load_code_problems, load_humaneval
from llm_marl_envs.data.stdio_problems import StdioProblem, load_stdio_problems, load_stdio_sample
from llm_marl_envs.sandbox import AssertTest, IOTest, tests_from_check

FUNCTION = "function"
STDIO = "stdio"


@dataclass(frozen=True)
class SearchProblem:
    """A problem ready for the search: what the agents see, and the two test sets.

    ``kind`` is ``"function"`` (tests call ``candidate`` = the entry point) or ``"stdio"``.
    ``prelude`` goes in front of every program (imports and helpers the prompt provides).
    """

    task_id: str
    kind: str
    statement: str
    public_setup: str
    public_tests: tuple[Any, ...]
    hidden_setup: str
    hidden_tests: tuple[Any, ...]
    reference: str | None
    entry_point: str = ""
    prelude: str = ""
    public_source: str = "examples"  #: "examples" (from the prompt), "check" (fallback) or "io"
    #: how the feedback shows each public test's input ("" where a test does not show it)
    public_inputs: tuple[str, ...] = field(default_factory=tuple)
    validated: bool = False  #: the reference was run on the public tests (see ``validate_public``)
    dropped_public: tuple[str, ...] = ()  #: names of public tests dropped because the reference fails them

    def program(self, code: str) -> str:
        """The program actually run: the prelude (imports, given helpers) then ``code``."""
        return f"{self.prelude}\n\n{code}" if self.prelude else code


def function_problem(problem: CodeProblem, fallback_asserts: int = 3) -> SearchProblem:
    """Public tests from the prompt's examples, hidden tests from the full ``check``."""
    hidden_setup, hidden = tests_from_check(problem.test, problem.entry_point)
    source, public_asserts, public_inputs = public_tests_for(problem, fallback_asserts)
    binding = f"candidate = {problem.entry_point}\n"
    if public_asserts:
        public_setup = f"{hidden_setup}\n{PUBLIC_SETUP}\n{binding}"
        public = tuple(AssertTest(a, name=f"public_{i}") for i, a in enumerate(public_asserts))
    else:  # no example and no top-level assert in check: the public tests are the whole check
        source, public_setup, public = "check", hidden_setup, tuple(hidden)
        public_inputs = [""] * len(public)
    return SearchProblem(
        task_id=problem.task_id,
        kind=FUNCTION,
        statement=problem.prompt,
        public_setup=public_setup,
        public_tests=public,
        hidden_setup=hidden_setup,
        hidden_tests=tuple(hidden),
        reference=problem.reference_program,
        entry_point=problem.entry_point,
        prelude=problem.prelude(),
        public_source=source,
        public_inputs=tuple(public_inputs),
    )


def stdio_problem(problem: StdioProblem) -> SearchProblem:
    """Public tests = the problem's public tests, hidden tests = its private tests."""
    public = tuple(IOTest(c.input, c.output, name=f"public_{i}") for i, c in enumerate(problem.public_tests))
    hidden = tuple(IOTest(c.input, c.output, name=f"hidden_{i}") for i, c in enumerate(problem.private_tests))
    return SearchProblem(
        task_id=problem.task_id,
        kind=STDIO,
        statement=problem.statement,
        public_setup="",
        public_tests=public,
        hidden_setup="",
        hidden_tests=hidden or public,
        reference=problem.reference_solution,
        public_source="io",
        public_inputs=tuple(c.input.rstrip("\n") for c in problem.public_tests),
    )


def load_search_problems(
    dataset: str | Path | Sequence[CodeProblem | StdioProblem] = "humaneval",
    dataset_format: str = "auto",
    fallback_asserts: int = 3,
) -> list[SearchProblem]:
    """Resolve ``dataset=`` (see the module docstring) into search problems."""
    if isinstance(dataset, (str, Path)):
        name = str(dataset)
        if name.lower() == "humaneval":
            raw: list[Any] = load_humaneval()
        elif name.lower() == "stdio_sample":
            raw = load_stdio_sample()
        elif dataset_format in ("humaneval", "mbpp"):
            raw = load_code_problems(name)
        else:
            try:
                raw = load_stdio_problems(name, format=dataset_format)
            except ValueError as exc:
                if dataset_format != "auto" or "cannot tell the format" not in str(exc):
                    raise
                raw = load_code_problems(name)
    else:
        raw = list(dataset)
    out = []
    for p in raw:
        if isinstance(p, SearchProblem):
            out.append(p)
        elif isinstance(p, CodeProblem):
            out.append(function_problem(p, fallback_asserts))
        elif isinstance(p, StdioProblem):
            out.append(stdio_problem(p))
        else:
            raise TypeError(f"problems must be CodeProblem or StdioProblem, got {type(p).__name__}")
    if not out:
        raise ValueError("the dataset has no problems")
    return out
