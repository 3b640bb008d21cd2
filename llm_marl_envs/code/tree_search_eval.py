"""Running candidate programs for ``code/tree_search_v0``: public-test validation, hidden tests, the final reward.

A mixin of :class:`llm_marl_envs.code.tree_search_v0.raw_env`. Every program runs in the
sandbox; infrastructure failures are flagged (or raised with ``on_infra_error="raise"``),
never scored as a wrong answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from llm_marl_envs.code.feedback import COMPILE_ERROR, analyze
from llm_marl_envs.code.search_problems import SearchProblem
from llm_marl_envs.code.test_sets import held_out_sets
from llm_marl_envs.code.tree import Node
from llm_marl_envs.sandbox import ExecResult, SandboxError


class TreeSearchEvaluation:
    """Sandbox runs and scores of the tree-search environment (mixed into its class)."""

    def validate_problems(self) -> int:
        """Run the public-test validation (``validate_public``) on every problem now; returns
        how many problems had public tests dropped. Otherwise it happens lazily at ``reset``."""
        if self.validate_public:
            for i, p in enumerate(self.problems):
                if not p.validated:
                    self.problems[i] = self._validated(p)
        return sum(1 for p in self.problems if p.dropped_public)

    def _validated(self, p: SearchProblem) -> SearchProblem:
        """``p`` without the public tests its reference solution fails (docstring typos).

        Where the reference fails every public test, new public tests are held out (seeded)
        from the hidden ones, which are then no longer scored. Without a reference, or on a sandbox infrastructure error, ``p`` is returned
        unchanged (and not marked validated, so the check is retried next time).
        """
        if not p.reference:
            return p
        res = self._run(p.reference, p.public_setup, p.public_tests, problem=p)
        if res.infra_error is not None or len(res.tests) != len(p.public_tests):
            return p
        keep = [i for i, t in enumerate(res.tests) if t.passed]
        dropped = tuple(p.public_tests[i].name for i in range(len(p.public_tests)) if i not in keep)
        if not dropped:
            return replace(p, validated=True)
        if not keep:  # new public tests held out from the hidden ones, never the hidden tests themselves
            t = held_out_sets(p.task_id, p.hidden_setup, p.hidden_tests, p.entry_point, self.split_config)
            return replace(p, validated=True, dropped_public=dropped, public_setup=t.public_setup,
                           public_tests=t.public_tests, public_inputs=t.public_inputs, public_source=t.public_source,
                           hidden_tests=t.hidden_tests, test_split=t.split.to_dict())  # fmt: skip
        inputs = p.public_inputs if len(p.public_inputs) == len(p.public_tests) else ("",) * len(p.public_tests)
        return replace(p, validated=True, dropped_public=dropped,
                       public_tests=tuple(p.public_tests[i] for i in keep),
                       public_inputs=tuple(inputs[i] for i in keep))  # fmt: skip

    def _run(self, code: str, setup: str, tests: Sequence[Any], problem: SearchProblem | None = None) -> Any:
        program = (problem or self.problem).program(code)
        try:
            return self.sandbox.run(program, tests, setup=setup, timeout_s=self.timeout_s)
        except SandboxError as exc:  # a sandbox configured with raise_on_infra_error=True
            if self.on_infra_error == "raise":
                raise
            return ExecResult(total=len(tests), infra_error=str(exc))

    def _score(self, passed: int, total: int, mode: str) -> float:
        if total == 0:
            return 0.0
        return float(passed == total) if mode == "binary" else passed / total

    def _hidden(self, node: Node) -> tuple[float | None, int, int, str | None]:
        """(score, passed, total, infra_error) of ``node`` on the hidden tests."""
        total = len(self.problem.hidden_tests)
        if not node.program.strip() or node.status == COMPILE_ERROR:
            return 0.0, 0, total, None
        result = self._run(node.program, self.problem.hidden_setup, self.problem.hidden_tests)
        fb = analyze(result)
        if fb.is_infra_error:
            self._infra(f"hidden tests of node {node.id}: {fb.infra_error}")
            return None, 0, total, fb.infra_error
        return self._score(fb.passed, fb.total, self.final_reward_mode), fb.passed, fb.total, None

    def _finish(self) -> float:
        best = self.tree.best()
        if best is None:
            self.final = {"best_node": -1, "hidden_score": None, "infra_error": "no node could be scored"}
            return 0.0
        if best.id in self._hidden_runs:
            score, passed, total, infra = self._hidden_runs[best.id]
        else:
            score, passed, total, infra = self._hidden(best)
            best.hidden_score = score
        self.final = {
            "best_node": best.id,
            "best_public_score": best.score,
            "hidden_score": score,
            "hidden_passed": passed,
            "hidden_total": total,
            "infra_error": infra,
            "n_nodes": len(self.tree),
            "test_split": dict(self.problem.test_split),
        }
        return 0.0 if score is None else float(score)

    def _infra(self, message: str) -> None:
        if self.on_infra_error == "raise":
            raise SandboxError(f"sandbox infrastructure error (not a wrong answer): {message}")
