"""The problems of ``code/tree_search_v0``: what the agents see and the public/hidden test sets.

:func:`load_search_problems` resolves the environment's ``dataset=`` argument (HumanEval,
the shipped stdin/stdout sample, a JSONL file or a list of problems) into
:class:`SearchProblem` records: function-style problems get public tests from their
prompt's examples (or a seeded hold-out of ``check``) and hidden tests from the rest of
``check``; stdin/stdout problems keep their public and private tests. Public and hidden
tests are always disjoint (:mod:`llm_marl_envs.code.test_sets`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_marl_envs.code.test_sets import function_test_sets, stdio_test_sets
from llm_marl_envs.data.humaneval import CodeProblem, load_code_problems, load_humaneval
from llm_marl_envs.data.stdio_problems import StdioProblem, load_stdio_problems, load_stdio_sample
from llm_marl_envs.data.test_split import SplitConfig

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
    public_source: str = "examples"  #: "examples", "io", "held_out", "none" or "shared" (code/test_sets.py)
    #: how the feedback shows each public test's input ("" where a test does not show it)
    public_inputs: tuple[str, ...] = field(default_factory=tuple)
    validated: bool = False  #: the reference was run on the public tests (see ``validate_public``)
    dropped_public: tuple[str, ...] = ()  #: names of public tests dropped because the reference fails them
    test_split: dict[str, Any] = field(default_factory=dict)  #: how the tests were split (data/test_split.py)

    def program(self, code: str) -> str:
        """The program actually run: the prelude (imports, given helpers) then ``code``."""
        return f"{self.prelude}\n\n{code}" if self.prelude else code


def function_problem(problem: CodeProblem, fallback_asserts: int = 3, split: SplitConfig | None = None) -> SearchProblem:
    """Public and hidden tests from :func:`~llm_marl_envs.code.test_sets.function_test_sets` (disjoint)."""
    t = function_test_sets(problem, fallback_asserts, split)
    return SearchProblem(
        task_id=problem.task_id, kind=FUNCTION, statement=problem.prompt, public_setup=t.public_setup,
        public_tests=t.public_tests, hidden_setup=t.hidden_setup, hidden_tests=t.hidden_tests,
        reference=problem.reference_program, entry_point=problem.entry_point, prelude=problem.prelude(),
        public_source=t.public_source, public_inputs=t.public_inputs, test_split=t.split.to_dict(),
    )  # fmt: skip


def stdio_problem(problem: StdioProblem, split: SplitConfig | None = None) -> SearchProblem:
    """Public and hidden tests from :func:`~llm_marl_envs.code.test_sets.stdio_test_sets` (disjoint)."""
    t = stdio_test_sets(problem, split)
    return SearchProblem(
        task_id=problem.task_id, kind=STDIO, statement=problem.statement, public_setup="",
        public_tests=t.public_tests, hidden_setup="", hidden_tests=t.hidden_tests,
        reference=problem.reference_solution, public_source=t.public_source,
        public_inputs=t.public_inputs, test_split=t.split.to_dict(),
    )  # fmt: skip


def load_search_problems(
    dataset: str | Path | Sequence[CodeProblem | StdioProblem] = "humaneval",
    dataset_format: str = "auto",
    fallback_asserts: int = 3,
    split: SplitConfig | None = None,
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
            out.append(function_problem(p, fallback_asserts, split))
        elif isinstance(p, StdioProblem):
            out.append(stdio_problem(p, split))
        else:
            raise TypeError(f"problems must be CodeProblem or StdioProblem, got {type(p).__name__}")
    if not out:
        raise ValueError("the dataset has no problems")
    return out
