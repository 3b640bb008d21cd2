"""``code/coder_tester_v0``: a coder writes the solution, a tester writes unit tests (PettingLLMs).

Roles: ``coder`` writes the program (the entry point of a function problem, or a stdin/stdout
program); ``tester`` writes unit tests (Python asserts, or ``<input>/<output>`` pairs for
stdio problems; :mod:`~llm_marl_envs.code.coder_tester_scoring`). Both see the problem and
act at the same time, so the task is parallelizable (``parallel_env()``). Everything runs
in the sandbox: the coder's program on the hidden golden tests, the tester's tests on the
reference solution and on the coder's program.

Turns (``max_turns``, default 2): after a turn that did not pass every golden test, the
coder is shown how its program did on the tester's tests (each failing test with its
error or input / expected / got) and the tester is shown the coder's program and which of
its tests it fails; both answer again. The golden tests stay hidden. The episode
terminates once the coder's program passes every golden test.

Reward (PettingLLMs' definitions, recorded per agent): joint = ``coder_golden_pass``, the
fraction of golden tests the coder's program passes, paid as the change since the previous
turn so the return is the final turn's pass ratio (``return_range() == (low, 1.0)``).
Components: coder -- ``coder_golden_pass``, ``coder_tester_pass`` (fraction of the tester's
valid tests it passes); tester -- ``tester_valid`` (fraction of its tests the reference
solution passes; absent without a reference), ``tester_agreement`` (its valid tests and the
golden tests agree on whether the coder's program is correct).
:data:`LOCAL_REWARD_COMPONENTS` names each agent's local reward (AT-GRPO's r_local_i).

Format issues (penalized by ``format_penalty`` per flagged agent and turn, 0 by default): a
coder answer without code; a tester answer without tests, with unparsable tests, more than
``max_tests`` tests, or a definition of the entry point.

Counterfactual masking: not offered. Under "rescore" nothing is regenerated, and the
tester's only influence on the joint reward is the feedback the coder read, so masking it
changes nothing; masking the coder leaves no program.

Data: ``dataset="humaneval"`` (164 problems, shipped), ``"stdio_sample"`` (8 shipped stdio
problems), or a JSONL path (CoopHumanEval / MBPP, APPS, CodeContests, LiveCodeBench; see
:func:`~llm_marl_envs.code.coder_tester_problems.load_coder_tester_problems`), or
``problems=``; ``split`` in ``"all" | "train" | "eval"`` (``eval_fraction``, ``split_seed``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llm_marl_envs.code.coder_tester_problems import CoderTesterProblem, load_coder_tester_problems
from llm_marl_envs.code.coder_tester_scoring import (
    TesterTests,
    TurnScore,
    coder_program,
    parse_tester_tests,
    score_turn,
)
from llm_marl_envs.code.sandbox_handle import SandboxResource, hidden_test_texts
from llm_marl_envs.core import Action, Role, TextCollabEnv, TurnOutcome, make_env_fn, make_parallel_env_fn
from llm_marl_envs.core.cycles import noop_when_idle
from llm_marl_envs.data.humaneval import split_problems
from llm_marl_envs.data.problems import choose_problem
from llm_marl_envs.sandbox import default_sandbox

__all__ = ["LOCAL_REWARD_COMPONENTS", "best_policy", "env", "parallel_env", "random_policy", "raw_env"]

CODER_INSTRUCTIONS = (
    "You are the coder in a two-role Python team. Write the solution to the problem in one ```python "
    "block. A teammate writes unit tests; you will see how your code does on them."
)
TESTER_INSTRUCTIONS = (
    "You are the tester in a two-role Python team. Write unit tests for the problem: Python assert "
    "statements in one ```python block for a function problem, or <input>...</input><output>...</output> "
    "pairs for a standard-input problem. A teammate writes the solution; you will see it."
)
#: the reward components that form each agent's local reward (AT-GRPO's r_local_i)
LOCAL_REWARD_COMPONENTS: dict[str, tuple[str, ...]] = {
    "coder": ("coder_golden_pass",),
    "tester": ("tester_valid", "tester_agreement"),
}
_FEEDBACK_TESTS = 5


class raw_env(SandboxResource, TextCollabEnv):
    """Coder/tester code writing (see the module docstring).

    Args:
        problems / dataset / format: the problems (see the module docstring).
        split, eval_fraction, split_seed: deterministic train/eval split.
        max_turns: turns per episode (ends early when every golden test passes).
        max_tests: tester tests kept per answer.
        sandbox / timeout_s: where and how long (per test) programs run.
        format_penalty: added once per flagged agent and turn; <= 0.
    """

    metadata = {"render_modes": ["ansi", "human"], "name": "coder_tester_v0"}
    simultaneous_turns = True  # blind turns: a parallel step is a whole turn
    shared_attributes = ("problems",)
    local_reward_components = LOCAL_REWARD_COMPONENTS

    def __init__(
        self,
        problems: Sequence[Any] | None = None,
        dataset: str | Path = "humaneval",
        format: str = "auto",
        split: str = "all",
        eval_fraction: float = 0.2,
        split_seed: int = 0,
        max_turns: int = 2,
        max_tests: int = 10,
        sandbox: Any = None,
        timeout_s: float | None = 2.0,
        format_penalty: float = 0.0,
        max_action_chars: int = 16_384,
        render_mode: str | None = None,
    ) -> None:
        if split not in ("all", "train", "eval"):
            raise ValueError(f"split must be 'all', 'train' or 'eval', got {split!r}")
        if max_tests < 1 or format_penalty > 0:
            raise ValueError("max_tests must be >= 1 and format_penalty <= 0")
        super().__init__([Role("coder", CODER_INSTRUCTIONS), Role("tester", TESTER_INSTRUCTIONS)],
                         max_turns=max_turns, max_action_chars=max_action_chars,
                         format_penalty=format_penalty, render_mode=render_mode)
        pool = load_coder_tester_problems(problems if problems is not None else dataset, format)
        if split != "all":
            train, evals = split_problems(pool, eval_fraction, split_seed)  # type: ignore[arg-type]
            pool = train if split == "train" else evals
        if not pool:
            raise ValueError("no problems to draw from (empty dataset or split)")
        self.problems: list[CoderTesterProblem] = list(pool)
        self._by_id = {p.task_id: i for i, p in enumerate(self.problems)}
        self.max_tests = max_tests
        self.sandbox = sandbox if sandbox is not None else default_sandbox()
        self.timeout_s = timeout_s
        self.problem = self.problems[0]
        self._turn: dict[str, Any] = {}
        self.scores: list[TurnScore] = []

    # ------------------------------------------------------------------ hooks
    def _setup(self, rng: np.random.Generator, options: dict) -> None:
        self.problem = choose_problem(self.problems, rng, options.get("task_id"), self._by_id)
        self.scores = []
        for agent in self.agents:
            self.tell(agent, f"Problem {self.problem.task_id}:\n{self.problem.statement}")

    def _on_action(self, agent: str, action: Action) -> None:
        """Read the program / the tests now (no execution) so format issues land on this step."""
        if agent == "coder":
            self._turn["program"] = coder_program(self.problem, action.text)
            if not self._turn["program"].strip():
                self.flag_format(agent, "no code found in the answer")
        else:
            self._turn["tests"] = parse_tester_tests(self.problem, action.text, self.max_tests)
            for issue in self._turn["tests"].issues:
                self.flag_format(agent, issue)

    def _begin_turn(self) -> None:
        self._turn = {"program": "", "tests": TesterTests(())}

    def _end_turn(self) -> TurnOutcome:
        program, tests = self._turn["program"], self._turn["tests"]
        score = score_turn(self.sandbox, self.problem, program, tests, self.timeout_s)
        previous = self.scores[-1].golden_pass if self.scores else 0.0
        self.scores.append(score)
        solved = score.golden_pass == 1.0
        if not solved and self.turn + 1 < self.max_turns:
            self._feedback(program, tests, score)
        components = {"golden_pass": score.golden_pass, "previous_golden_pass": previous,
                      "tester_tests": float(len(tests.tests))}
        agents = {"coder": dict(score.coder_components), "tester": dict(score.tester_components)}
        return TurnOutcome(score.golden_pass - previous, components, agents, terminated=solved)

    def _feedback(self, program: str, tests: Any, score: TurnScore) -> None:
        head = f"Turn {self.turn + 1} of {self.max_turns} is over."
        if not tests.tests:
            coder_note = "The tester wrote no tests this turn."
        else:
            fails = [self._describe(t) for t in score.tester_results if not t.passed]
            n = len(score.tester_results) or len(tests.tests)
            coder_note = f"Your code passes {n - len(fails) if score.tester_results else 0} of the tester's {n} tests."
            if fails:
                coder_note += "\nFailing:\n" + "\n".join(fails[:_FEEDBACK_TESTS])
        self.tell("coder", f"{head}\n{coder_note}\nWrite your complete solution again.")
        shown = self._fit(program, 4000) if program.strip() else "(no code)"
        failing = [r.name for r in score.tester_results if not r.passed]
        tester_note = (f"Your tests failing on it: {', '.join(failing[:10])}." if failing
                       else "It passes all your tests." if tests.tests else "You wrote no tests.")
        self.tell("tester", f"{head}\nThe coder's program:\n```python\n{shown}\n```\n{tester_note}\n"
                            "Write your complete tests again.")

    @staticmethod
    def _describe(t: Any) -> str:
        if t.kind == "io":
            return f"- {t.name}: input {t.stdin!r}, expected {t.expected!r}, got {t.got!r}"
        return f"- {t.name}: {t.error_type or 'failed'}: {(t.error_message or '')[:200]}"

    # ------------------------------------------------------------------ extras
    def _hidden_state(self) -> str:
        last = self.scores[-1] if self.scores else None
        return (f"task: {self.problem.task_id} ({self.problem.kind}); golden tests: {len(self.problem.golden_tests)}; "
                f"last golden pass: {last.golden_pass if last else None}")

    def secrets(self, agent: str) -> tuple[str, ...]:
        """The golden tests and the reference solution (the agents see only the tester's tests)."""
        return hidden_test_texts(self.problem.golden_tests, (), self.problem.reference)

    def return_range(self) -> tuple[float, float]:
        return (self.format_penalty * 2 * self.max_turns, 1.0)


env = make_env_fn(raw_env)
parallel_env = make_parallel_env_fn(raw_env)


@noop_when_idle
def best_policy(env: Any, agent: str) -> str:
    """The reference solution and the golden tests (requires a dataset with references)."""
    p = env.unwrapped.problem
    if agent == "coder":
        if p.reference is None:
            raise ValueError(f"{p.task_id} has no reference solution: the best policy is not available")
        return f"```python\n{p.reference}\n```"
    return p.golden_source if p.kind == "stdio" else f"```python\n{p.golden_source}\n```"


@noop_when_idle
def random_policy(env: Any, agent: str, rng: np.random.Generator) -> str:
    """A random pick among the best answer, an empty answer, prose, and a broken program / test."""
    p = env.unwrapped.problem
    broken = (f"```python\ndef {p.entry_point or 'main'}(*args):\n    return None\n```" if agent == "coder"
              else "```python\nassert 1 == 2\n```" if p.kind == "function" else "<input>\n1\n</input><output>\nx\n</output>")
    choices = [lambda: best_policy(env, agent), lambda: "", lambda: "I am not sure.", lambda: broken]
    return choices[int(rng.integers(len(choices)))]()



