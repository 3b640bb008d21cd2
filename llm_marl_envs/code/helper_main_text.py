"""The texts of ``code/helper_main_v0``: role instructions, the problem statement each agent
gets, and the feedback after a turn (``feedback="full" | "pass_fail" | "none"``).

:class:`HelperMainText` is a mixin of :class:`llm_marl_envs.code.helper_main_v0.raw_env`, kept
apart so that what the agents are shown reads in one place, apart from how turns are played
and scored. It uses the environment's ``problem``, ``helper_functions``, ``contract``,
``visibility``, ``feedback``, ``reward_config``, ``scorer``, ``turn`` and ``max_turns``.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any

from llm_marl_envs.code.feedback import FeedbackConfig, analyze
from llm_marl_envs.code.helper_main_scoring import Scored

HELPER_INSTRUCTIONS = (
    "You are the helper in a two-role Python team. For each problem you write the auxiliary "
    "function you are assigned; a teammate writes the problem's main function and calls yours. "
    "Answer with Python code only, in one ```python block. Do not write the main function."
)
MAIN_INSTRUCTIONS = (
    "You are the main agent in a two-role Python team. For each problem you write the function "
    "the problem asks for; a teammate writes helper function(s) you can call. Do not define the "
    "helper functions yourself. Answer with Python code only, in one ```python block."
)


class HelperMainText:
    """What helper/main agents are told: the problem and the feedback on a scored turn."""

    def _problem_text(self, agent: str) -> str:
        p = self.problem
        head = f"Problem {p.task_id}:\n```python\n{p.prompt.rstrip()}\n```\n"
        fn = p.entry_function()
        params = f"({ast.unparse(fn.args)})" if fn is not None else "(...)"
        if agent == "main":
            helpers = ", ".join(
                f"`{n}{params}`" if self.contract == "signature" else f"`{n}(...)`"
                for n in self.helper_functions.values()
            )
            see = (
                "You will be shown their code before you answer."
                if self.visibility == "sequential"
                else "You cannot see their code."
            )
            return (
                f"{head}\nWrite `{p.entry_point}`. Your teammate(s) write the helper function(s) {helpers}, "
                f"which you can call (do not define them yourself). {see}"
            )
        name = self.helper_functions[agent]
        sig = f"`{name}{params}` (the same parameters as `{p.entry_point}`)" if self.contract == "signature" else f"`{name}`"
        return (
            f"{head}\nWrite the helper function {sig}: it must return a value that helps solve the "
            f"problem. The main agent writes `{p.entry_point}` and will call `{name}`; do not write "
            f"`{p.entry_point}`."
        )

    def _feedback_text(self, agent: str, scored: Scored) -> str:
        asm, score = scored.assembly, scored.score
        turn = f"Turn {self.turn + 1} of {self.max_turns} is over."
        redo = "Write your complete answer again for the next turn (Python code only)."
        if self.feedback == "none":
            return f"{turn} {redo}"
        if self.feedback == "pass_fail":
            if scored.result is None:
                line = "Tests: not run; 0 passed."
            else:
                tests = scored.result.tests
                failing = [str(i + 1) for i, t in enumerate(tests) if not t.passed]
                failing += [str(i + 1) for i in range(len(tests), score.n_tests)]
                line = f"Tests: {score.passed}/{score.n_tests} passed." + (
                    f" Failing tests: {', '.join(failing)}." if failing else ""
                )
            return f"{turn}\n{line}\n{redo}"
        lines = [turn, f"Joint score: {score.total:.2f} / {self.reward_config.max_score:.2f}."]
        parts = []
        for a, name in self.helper_functions.items():
            problems = asm.missing.get(a, [])
            parts.append(f"{a} `{name}`: " + ("ok" if not problems else "; ".join(problems)))
        main_problems = asm.missing.get("main", [])
        parts.append(f"main `{asm.entry_point}`: " + ("ok" if not main_problems else "; ".join(main_problems)))
        lines.append("Structure: " + " | ".join(parts))
        mine = list(scored.extracted[agent].notes) + asm.notes.get(agent, [])
        if mine:
            lines.append("About your answer: " + "; ".join(mine))
        if asm.syntax_error:
            lines.append(f"Syntax: the combined program does not parse: {asm.syntax_error}")
        elif not asm.structure_passed:
            lines.append("Syntax: the combined program parses, but tests were not run (a definition is missing).")
        if scored.result is not None:
            lines.append(self._test_feedback(scored.result))
        c = score.components
        if score.passed >= 1 and asm.main_fn is not None:
            lines.append(
                "Cooperation: main calls the helper(s): "
                f"{'yes' if c['coop_calls_helper'] > 0 else 'no'}; main does its own work: "
                f"{'yes' if c['coop_not_thin'] > 0 else 'no'}; a helper's return value ignored: "
                f"{'yes' if c['coop_result_ignored'] < 0 else 'no'}."
            )
        lines.append(redo)
        return "\n".join(lines)

    def _test_feedback(self, result: Any) -> str:
        """Per-test feedback; a failing test the sandbox says nothing about shows its code."""
        fb = analyze(result)
        tests = self.scorer.tests_for(self.problem)[1]
        failures = tuple(
            dataclasses.replace(f, input=tests[f.index].code.strip())
            if f.input is None and f.index < len(tests) and f.kind != "timeout"
            else f
            for f in fb.failures
        )
        return dataclasses.replace(fb, failures=failures).render(FeedbackConfig(mode="detailed", label="Tests"))
