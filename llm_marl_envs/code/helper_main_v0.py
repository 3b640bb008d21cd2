"""``code/helper_main_v0``: a helper and a main agent write one Python solution (MAGRPO).

Roles: ``helper`` writes an auxiliary function (``aux``); ``main`` writes the problem's
entry point and may call it. With ``n_helpers > 1`` the helpers are ``helper_0``,
``helper_1``... owning ``aux_0``, ``aux_1``... (names configurable with ``helper_names``).

Visibility (``visibility``):
  - ``"blind"`` (the paper): everyone sees the problem; main is told the helpers' function
    names (``contract="name"``: ``aux(...)``, as in the paper; ``contract="signature"``:
    ``aux`` takes the entry point's parameters) but never sees their code. Agents act in
    parallel, so the environment is parallelizable and ``parallel_env()`` works.
  - ``"sequential"``: helpers act first; main is shown their extracted code this turn.

Turns: ``max_turns`` (default 1). After a turn that did not pass every test, each agent gets
feedback on the joint program and answers again; the episode terminates as soon as all
tests pass. Feedback (``feedback``): ``"full"`` -- missing definitions, what assembly
dropped, syntax error with line/column, each failing test with input/expected/got or the
exception; ``"pass_fail"`` -- which tests fail; ``"none"`` -- only a request to revise.
Each agent sees only its own history plus the feedback.

Reward: the gated joint score of the turn's program, documented in
:mod:`llm_marl_envs.code.helper_main_reward` (max 4.0 by default, never negative). The
per-turn reward (``turn_reward``): ``"delta"`` (default) gives ``score_t - score_{t-1}``
(potential-based: the episode return is the final turn's score); ``"final"`` gives 0 until
the last turn and then its score. Either way the return is the final program's score
(plus format penalties), so ``return_range() == (min, 4.0)`` where ``min`` is 0, or
``format_penalty * n_agents * max_turns`` with a negative ``format_penalty``.
``infos[agent]["reward_components"]`` holds every component of the turn's score plus
``score``, ``previous_score``, ``tests_passed``, ``tests_total``, ``visible_test_score``
(1 from turn 2 on with feedback: earlier feedback showed the tests that score the turn).

Format issues (penalized by ``format_penalty`` per flagged agent and turn, 0 by default):
an answer with no code; assembly dropping something of the agent's (a helper writing the
entry point, main redefining ``aux``, top-level statements such as example calls).

Sandbox: every program runs in ``llm_marl_envs.sandbox`` (``sandbox=`` kwarg or the shared
default pool). An infrastructure failure raises
:class:`~llm_marl_envs.code.helper_main_reward.SandboxInfraError`; it is never scored.

Counterfactual masking (``counterfactual_modes = ("rescore",)``):
:meth:`raw_env.coalition_value` re-scores the *last scored turn's* joint program with the
agents outside ``unmasked`` replaced by placeholders (a helper's function becomes a stub
raising ``NotImplementedError``, main's entry point a stub that raises; a placeholder earns
no structure points). Nothing is regenerated. Values are on the score scale (0..4).

Data: ``problems=`` (a list of :class:`~llm_marl_envs.data.CodeProblem`) or
``dataset="humaneval"`` or a JSONL path (CoopHumanEval/MBPP shape); ``split`` in
``"all" | "train" | "eval"`` (deterministic, ``eval_fraction``, ``split_seed``). A problem
is drawn by the seeded RNG at each reset, or picked with ``options={"task_id": ...}``.

What the agents are told (instructions, problem statement, feedback) is in
:mod:`llm_marl_envs.code.helper_main_text`; scoring in :mod:`llm_marl_envs.code.helper_main_scoring`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llm_marl_envs.code.extract import extract_code
from llm_marl_envs.code.helper_main_policies import main_only_answers, oracle_answers
from llm_marl_envs.code.helper_main_reward import RewardConfig
from llm_marl_envs.code.helper_main_scoring import HelperMainScorer, Scored, Submission
from llm_marl_envs.code.helper_main_text import HELPER_INSTRUCTIONS, MAIN_INSTRUCTIONS, HelperMainText
from llm_marl_envs.code.sandbox_handle import hidden_test_texts
from llm_marl_envs.core import Action, Role, TextCollabEnv, TurnOutcome, make_env_fn, make_parallel_env_fn
from llm_marl_envs.core.cycles import noop_when_idle
from llm_marl_envs.data.humaneval import CodeProblem, load_code_problems, split_problems
from llm_marl_envs.data.problems import choose_problem

__all__ = ["best_policy", "env", "main_only_policy", "parallel_env", "random_policy", "raw_env"]

VISIBILITIES = ("blind", "sequential")
FEEDBACK_MODES = ("full", "pass_fail", "none")
TURN_REWARDS = ("delta", "final")
CONTRACTS = ("name", "signature")

class raw_env(HelperMainText, TextCollabEnv):
    """Helper/main collaborative code writing (see the module docstring).

    Args:
        problems: explicit problems (overrides ``dataset``).
        dataset: ``"humaneval"`` or a path to a CoopHumanEval/MBPP-format JSONL file.
        split: ``"all"``, ``"train"`` or ``"eval"``; ``eval_fraction`` and ``split_seed`` fix it.
        n_helpers: number of helper agents (>= 1).
        helper_names: the function each helper owns (default ``aux`` / ``aux_0, aux_1...``).
        visibility: ``"blind"`` (parallel, the paper) or ``"sequential"``.
        contract: what main is told about the helpers: ``"name"`` or ``"signature"``.
        max_turns: turns per episode (ends early when all tests pass).
        feedback: ``"full"``, ``"pass_fail"`` or ``"none"``.
        turn_reward: ``"delta"`` or ``"final"`` (both make the return the final score).
        reward: reward weights (:class:`RewardConfig`).
        sandbox: the sandbox to run programs in (None = the shared default pool).
        timeout_s: per-test time limit (None = the sandbox default).
        format_penalty: added once per flagged agent and turn; must be <= 0.
    """

    metadata = {"render_modes": ["ansi", "human"], "name": "helper_main_v0"}
    simultaneous_turns = True  # blind turns: a parallel step is a whole turn
    shared_attributes = ("scorer", "problems")
    counterfactual_modes = ("rescore",)

    def __init__(
        self,
        problems: Sequence[CodeProblem] | None = None,
        dataset: str | Path = "humaneval",
        split: str = "all",
        eval_fraction: float = 0.2,
        split_seed: int = 0,
        n_helpers: int = 1,
        helper_names: Sequence[str] | None = None,
        visibility: str = "blind",
        contract: str = "name",
        max_turns: int = 1,
        feedback: str = "full",
        turn_reward: str = "delta",
        reward: RewardConfig | None = None,
        sandbox: Any = None,
        timeout_s: float | None = None,
        format_penalty: float = 0.0,
        max_action_chars: int = 16_384,
        render_mode: str | None = None,
    ) -> None:
        for value, allowed, what in (
            (visibility, VISIBILITIES, "visibility"),
            (feedback, FEEDBACK_MODES, "feedback"),
            (turn_reward, TURN_REWARDS, "turn_reward"),
            (contract, CONTRACTS, "contract"),
            (split, ("all", "train", "eval"), "split"),
        ):
            if value not in allowed:
                raise ValueError(f"{what} must be one of {allowed}, got {value!r}")
        if n_helpers < 1:
            raise ValueError(f"n_helpers must be >= 1, got {n_helpers}")
        if format_penalty > 0:
            raise ValueError(f"format_penalty must be <= 0, got {format_penalty}")
        helper_agents = ["helper"] if n_helpers == 1 else [f"helper_{i}" for i in range(n_helpers)]
        if helper_names is None:
            helper_names = ["aux"] if n_helpers == 1 else [f"aux_{i}" for i in range(n_helpers)]
        helper_names = list(helper_names)
        if len(helper_names) != n_helpers or len(set(helper_names)) != n_helpers:
            raise ValueError(f"need {n_helpers} distinct helper_names, got {helper_names}")
        if not all(n.isidentifier() for n in helper_names):
            raise ValueError(f"helper_names must be Python identifiers, got {helper_names}")
        super().__init__(
            [Role(a, HELPER_INSTRUCTIONS) for a in helper_agents] + [Role("main", MAIN_INSTRUCTIONS)],
            max_turns=max_turns,
            max_action_chars=max_action_chars,
            format_penalty=format_penalty,
            render_mode=render_mode,
        )
        pool = load_code_problems(problems if problems is not None else dataset)
        if split != "all":
            train, evals = split_problems(pool, eval_fraction, split_seed)
            pool = train if split == "train" else evals
        if not pool:
            raise ValueError("no problems to draw from (empty dataset or split)")
        if any(p.entry_class() for p in pool):  # LeetCode `class Solution` problems: no function to split
            raise ValueError("helper_main needs top-level entry functions, not a class method: use tree_search_v0")
        clash = [p.task_id for p in pool if p.entry_point in helper_names]
        if clash:
            raise ValueError(f"helper_names {helper_names} clash with the entry point of {clash[:5]}")
        self.problems: list[CodeProblem] = pool
        self._by_id = {p.task_id: i for i, p in enumerate(pool)}
        self.helper_functions: dict[str, str] = dict(zip(helper_agents, helper_names))
        self.visibility = visibility
        self.contract = contract
        self.feedback = feedback
        self.turn_reward = turn_reward
        self.reward_config = reward or RewardConfig()
        self.scorer = HelperMainScorer(self.helper_functions, "main", self.reward_config, sandbox, timeout_s)
        self.simultaneous_turns = visibility == "blind"
        self._declare_parallelizable()
        self.problem: CodeProblem = pool[0]
        self.answers: dict[str, str] = {}
        self.history: list[Scored] = []  #: each scored turn
        self.turn_answers: list[dict[str, str]] = []  #: each turn's raw answers

    # ------------------------------------------------------------------ hooks
    def _setup(self, rng: np.random.Generator, options: dict) -> None:
        self.problem = choose_problem(self.problems, rng, options.get("task_id"), self._by_id)
        self.answers = {}
        self.history = []
        self.turn_answers = []
        for agent in self.agents:
            self.tell(agent, self._problem_text(agent))

    def _on_action(self, agent: str, action: Action) -> None:
        self.answers[agent] = action.text
        if not action.text.strip():
            self.flag_format(agent, "empty answer: no code")
        if self.visibility == "sequential" and agent in self.helper_functions:
            code = extract_code(action.text).code
            self.tell("main", f"Your teammate {agent} wrote this turn:\n```python\n{code}\n```")

    def _end_turn(self) -> TurnOutcome:
        scored = self.scorer.score(Submission(self.problem, dict(self.answers)))
        prev = self.history[-1].score.total if self.history else 0.0
        self.history.append(scored)
        self.turn_answers.append(dict(self.answers))
        score = scored.score
        for agent in self.agents:
            ext = scored.extracted[agent]
            if ext.empty and self.answers.get(agent, "").strip():
                self._flag(agent, "no code found in the answer")
            for note in scored.assembly.notes.get(agent, []):
                self._flag(agent, note)
        all_passed = score.n_tests > 0 and score.passed == score.n_tests
        last = all_passed or self.turn + 1 >= self.max_turns
        if self.turn_reward == "delta":
            reward = score.total - prev
        else:
            reward = score.total if last else 0.0
        components = dict(score.components)
        components.update(
            score=score.total,
            previous_score=prev,
            tests_passed=float(score.passed),
            tests_total=float(score.n_tests),
            visible_test_score=float(self.turn > 0 and self.feedback != "none"),  # see data/test_split.py
        )
        if not last:
            for agent in self.agents:
                self.tell(agent, self._feedback_text(agent, scored))
        self.answers = {}
        return TurnOutcome(reward, components, terminated=all_passed)

    def _flag(self, agent: str, issue: str) -> None:
        """:meth:`flag_format` from the end of the turn, also kept in the agent's step record."""
        self.flag_format(agent, issue)
        last = self.record.steps[-1] if self.record.steps else None
        if last is not None and last.agent == agent:
            return  # flag_format already recorded it there
        for step in reversed(self.record.steps):
            if step.turn == self.turn and step.agent == agent:
                step.format_issues.append(issue)
                break

    # ------------------------------------------------------------------ extras
    def _hidden_state(self) -> str:
        last = self.history[-1] if self.history else None
        return (
            f"task: {self.problem.task_id}; entry point: {self.problem.entry_point}; "
            f"helpers: {self.helper_functions}; turn: {self.turn}; "
            f"last score: {last.score.total if last else None}\n"
            + (f"last joint program:\n{last.assembly.program}" if last else "")
        )

    def secrets(self, agent: str) -> tuple[str, ...]:
        """The canonical solution (the ``check`` tests are this task's feedback by design, not secret)."""
        return hidden_test_texts((), (), self.problem.canonical_solution)

    def return_range(self) -> tuple[float, float]:
        low = self.format_penalty * len(self.possible_agents) * self.max_turns
        return (low, self.reward_config.max_score)

    def coalition_value(self, unmasked: frozenset[str], mode: str = "rescore") -> float:
        """Score of the last scored turn's program with agents outside ``unmasked`` masked.

        See the module docstring; ``v(all agents)`` equals that turn's score. The sandbox
        runs only where the reward needs it (with the default gating a masked agent fails
        the structure level, so no run is needed).
        """
        if mode not in self.counterfactual_modes:
            raise ValueError(f"unsupported counterfactual mode {mode!r}; supported: {self.counterfactual_modes}")
        unknown = set(unmasked) - set(self.possible_agents)
        if unknown:
            raise KeyError(f"unknown agents {sorted(unknown)}")
        if not self.history:
            raise RuntimeError("coalition_value needs a finished turn to re-score")
        last = self.history[-1]
        masked = frozenset(self.possible_agents) - frozenset(unmasked)
        if not masked:
            return last.score.total
        texts = self.turn_answers[-1]
        return self.scorer.score(Submission(self.problem, texts, masked)).score.total


env = make_env_fn(raw_env)
parallel_env = make_parallel_env_fn(raw_env)


@noop_when_idle
def best_policy(env, agent: str) -> str:
    """The oracle: the reference solution split into a real helper and a main that uses it."""
    inner = env.unwrapped
    return oracle_answers(inner.problem, inner.helper_functions, "main")[agent]


@noop_when_idle
def main_only_policy(env, agent: str) -> str:
    """Helpers write their oracle functions, main solves alone without calling them."""
    inner = env.unwrapped
    return main_only_answers(inner.problem, inner.helper_functions, "main")[agent]


@noop_when_idle
def random_policy(env, agent: str, rng: np.random.Generator) -> str:
    """A random pick among: the oracle answer, the main-only answer, an empty answer, junk
    text, a trivial function and a syntax error."""
    inner = env.unwrapped
    name = inner.helper_functions.get(agent, inner.problem.entry_point)
    choices = [
        lambda: best_policy(env, agent),
        lambda: main_only_policy(env, agent),
        lambda: "",
        lambda: "I am not sure how to solve this.",
        lambda: f"```python\ndef {name}(*args):\n    return None\n```",
        lambda: f"```python\ndef {name}(x:\n    return x\n```",
    ]
    return choices[int(rng.integers(len(choices)))]()
