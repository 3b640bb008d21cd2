"""Scoring helper/main answers end to end: extract, assemble, run in the sandbox, reward.

:class:`HelperMainScorer` holds the sandbox, the reward weights and a per-problem cache of
the parsed tests. The environment uses it for every turn and for counterfactual
re-scoring; :meth:`HelperMainScorer.score_many` batches many joint programs through the
sandbox's ``run_batch`` (the benchmark and the oracle check over all 164 problems use it).
Model-written code only ever runs inside the sandbox.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_marl_envs.code.extract import ExtractedCode, extract_code
from llm_marl_envs.code.helper_main_reward import (
    Assembly,
    RewardConfig,
    Score,
    assemble,
    needs_run,
    score_assembly,
)
from llm_marl_envs.code.helper_main_tests import instrument_tests
from llm_marl_envs.code.sandbox_handle import detach_sandbox, reattach_sandbox
from llm_marl_envs.data.humaneval import CodeProblem

__all__ = ["HelperMainScorer", "Submission", "Scored"]


@dataclass(frozen=True)
class Submission:
    """One joint answer to score: raw texts per agent (helpers and main)."""

    problem: CodeProblem
    texts: Mapping[str, str]
    masked: frozenset[str] = frozenset()


@dataclass
class Scored:
    """A scored joint answer: what was extracted, the assembled program, the run, the score."""

    extracted: dict[str, ExtractedCode]
    assembly: Assembly
    result: Any  #: sandbox ExecResult, or None when the program was not run
    score: Score


class HelperMainScorer:
    """Extract + assemble + run + score, for a fixed team layout.

    Args:
        helper_functions: helper agent -> the function name it owns (e.g. ``{"helper": "aux"}``).
        main_agent: name of the main agent.
        config: reward weights.
        sandbox: a ``llm_marl_envs.sandbox.Sandbox``; None = the process-wide default pool
            (created on first use).
        timeout_s: per-test time limit passed to the sandbox (None = its default).
    """

    def __init__(
        self,
        helper_functions: Mapping[str, str],
        main_agent: str = "main",
        config: RewardConfig | None = None,
        sandbox: Any = None,
        timeout_s: float | None = None,
    ) -> None:
        self.helper_functions = dict(helper_functions)
        self.main_agent = main_agent
        self.config = config or RewardConfig()
        self._sandbox = sandbox
        self._sandbox_token: Any = None  # set when unpickled: how to re-attach (sandbox_handle)
        self.timeout_s = timeout_s
        self._tests: dict[str, tuple[str, list]] = {}

    @property
    def sandbox(self):
        if self._sandbox is None:
            self._sandbox = reattach_sandbox(self._sandbox_token)
        return self._sandbox

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the sandbox (threads, pipes): the copy re-attaches lazily (``sandbox_handle``)."""
        state = dict(vars(self))
        if state["_sandbox"] is not None:
            state["_sandbox_token"] = detach_sandbox(state["_sandbox"])
        state["_sandbox"] = None
        return state

    def tests_for(self, problem: CodeProblem) -> tuple[str, list]:
        """``(setup, tests)`` of a problem's check code, instrumented to report input /
        expected / got on failure (:mod:`~llm_marl_envs.code.helper_main_tests`); cached."""
        key = f"{problem.task_id}\x00{hash(problem.test)}"
        if key not in self._tests:
            from llm_marl_envs.sandbox import tests_from_check

            setup, tests = tests_from_check(problem.test, problem.entry_point, prompt=problem.prompt)
            self._tests[key] = instrument_tests(setup, list(tests), problem.entry_point, _check_param(problem.test))
        return self._tests[key]

    def prepare(self, sub: Submission) -> tuple[dict[str, ExtractedCode], Assembly]:
        """Extract every agent's code and assemble the joint program (no execution)."""
        extracted = {a: extract_code(sub.texts.get(a, "")) for a in [*self.helper_functions, self.main_agent]}
        asm = assemble(
            sub.problem,
            {a: extracted[a].code for a in self.helper_functions},
            extracted[self.main_agent].code,
            self.helper_functions,
            self.main_agent,
            sub.masked,
        )
        return extracted, asm

    def score(self, sub: Submission) -> Scored:
        """Score one joint answer (runs the sandbox only when the reward needs the tests)."""
        return self.score_many([sub])[0]

    def score_many(self, subs: Sequence[Submission]) -> list[Scored]:
        """Score many joint answers, running the needed programs in one sandbox batch."""
        prepared = [self.prepare(s) for s in subs]
        to_run = [i for i, (_, asm) in enumerate(prepared) if needs_run(asm, self.config)]
        results: dict[int, Any] = {}
        if to_run:
            from llm_marl_envs.sandbox import Job

            jobs = []
            for i in to_run:
                setup, tests = self.tests_for(subs[i].problem)
                jobs.append(Job(prepared[i][1].program, tests, setup=setup, timeout_s=self.timeout_s))
            out = self.sandbox.run_batch(jobs)
            results = dict(zip(to_run, out))
        return [
            Scored(ext, asm, results.get(i), score_assembly(asm, results.get(i), self.config))
            for i, (ext, asm) in enumerate(prepared)
        ]


def _check_param(test_code: str) -> str:
    """Name of ``check``'s parameter (``candidate`` in HumanEval)."""
    try:
        tree = ast.parse(test_code)
    except SyntaxError:
        return "candidate"
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check" and node.args.args:
            return node.args.args[0].arg
    return "candidate"
