"""``math/solver_verifier_v0``: a solver answers a math problem, a verifier approves or rejects (Dr. MAS).

Roles: ``solver`` answers with its reasoning and a final answer in ``\\boxed{...}``;
``verifier`` sees the problem and the solver's answer and replies
``<verify>approve</verify>`` or ``<verify>reject</verify>`` with a reason. A rejection hands
the reason back to the solver, who tries again; the episode ends at an approval or after
``max_loops`` solver answers (Dr. MAS uses 2). With ``tool=True`` a third role, ``tool``,
acts first each loop: it writes a Python program, run in the sandbox, whose output the
solver sees (PettingLLMs' math setting).

Reward: joint = 1.0 if the *final* answer equals the gold answer, checked with
``math-verify`` (numbers, fractions and LaTeX compared mathematically), paid on the last
turn (earlier turns pay 0), so ``return_range() == (low, 1.0)``. Per-agent terms, in each
agent's ``reward_components`` only (not in the joint reward) -- Dr. MAS's source of
per-agent reward heterogeneity:

==========================  ====================================================================
``solver_invalid_format``   ``-invalid_format_cost`` when the answer has no ``\\boxed{}``, else 0
``solver_correct``          1 if this turn's answer is correct
``verifier_invalid_format`` ``-invalid_format_cost`` when the verdict is unreadable, else 0
``verifier_correct``        1 if the verdict is right (approve a correct / reject a wrong answer)
``tool_invalid_format``     ``-invalid_format_cost`` when the tool answer has no code, else 0
``tool_ran``                1 if the tool program ran cleanly
==========================  ====================================================================

:data:`LOCAL_REWARD_COMPONENTS` names the components that form each agent's local reward
(AT-GRPO's ``r_local_i``). Format issues are also reported in ``infos[agent]["format_issues"]``
and penalized in the joint reward by ``format_penalty`` per flagged agent (0 by default).

Counterfactual masking (``"rescore"``, for SHARP): with the solver masked there is no answer
(value 0); with the verifier masked nobody checks, so the solver's *first* answer is final
(value = its correctness). Nothing is regenerated, so the tool -- whose influence runs
only through what the solver read -- gets no counterfactual credit (masking it changes
nothing).

Data: ``dataset="mixed" | "arithmetic" | "word"`` (seeded generators; ``split="train"`` and
``"test"`` use disjoint seed ranges) or a GSM8K / MATH JSONL path, or ``problems=``; with
files, ``split`` picks a deterministic ``test_fraction`` of the problems (``split_seed``).
``options={"problem_seed": n}`` (generators) or ``{"task_id": ...}`` (files) picks a problem.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llm_marl_envs.code.sandbox_handle import SandboxResource
from llm_marl_envs.core import Action, Role, TextCollabEnv, TurnOutcome, make_env_fn, make_parallel_env_fn
from llm_marl_envs.core.cycles import noop_when_idle
from llm_marl_envs.data.problems import choose_problem
from llm_marl_envs.data.seed_splits import instance_seed
from llm_marl_envs.math.answers import answers_match, last_boxed, parse_verdict
from llm_marl_envs.math.problems import GENERATORS, MathProblem, generate_problem, load_math_jsonl
from llm_marl_envs.sandbox import default_sandbox

__all__ = ["LOCAL_REWARD_COMPONENTS", "best_policy", "env", "parallel_env", "random_policy", "raw_env"]

SOLVER_INSTRUCTIONS = (
    "You are the solver in a math team. Solve the problem step by step and put the final answer "
    "in \\boxed{...}. If the verifier rejects your answer, read its reason and answer again."
)
VERIFIER_INSTRUCTIONS = (
    "You are the verifier in a math team. Check the solver's answer. Reply <verify>approve</verify> "
    "if it is correct, or <verify>reject</verify> followed by the reason if it is not."
)
TOOL_INSTRUCTIONS = (
    "You are the Python tool of a math team. Write a short Python program that computes what the "
    "solver needs and prints it. Answer with one ```python block."
)

#: the reward components that form each agent's local reward (AT-GRPO's r_local_i)
LOCAL_REWARD_COMPONENTS: dict[str, tuple[str, ...]] = {
    "solver": ("solver_invalid_format",),
    "verifier": ("verifier_invalid_format", "verifier_correct"),
    "tool": ("tool_invalid_format", "tool_ran"),
}
_SHOWN_ANSWER_CHARS = 4000


class raw_env(SandboxResource, TextCollabEnv):
    """Solver/verifier math (see the module docstring).

    Args:
        problems: explicit problems (override ``dataset``).
        dataset: "mixed", "arithmetic", "word" (generated) or a GSM8K / MATH JSONL path.
        split: "train" or "test" (generated: disjoint seed ranges; files: ``test_fraction``).
        max_loops: solver answers at most (each loop is one turn).
        tool: add the ``tool`` role (a Python program run in the sandbox each loop).
        invalid_format_cost: size of the per-agent invalid-format component (>= 0).
        sandbox / timeout_s: where and how long tool programs run (None: the shared default).
        format_penalty: added to the joint reward once per flagged agent and turn; <= 0.
    """

    metadata = {"render_modes": ["ansi", "human"], "name": "solver_verifier_v0"}
    shared_attributes = ("problems",)
    counterfactual_modes = ("rescore",)
    held_out_split = "test"  #: evaluation (``baselines.evaluate``) uses the disjoint test seeds
    local_reward_components = LOCAL_REWARD_COMPONENTS
    horizon_kwarg = "max_loops"  #: ``max_cycles`` maps onto the number of solve/verify loops

    def __init__(
        self,
        problems: Sequence[MathProblem] | None = None,
        dataset: str | Path = "mixed",
        split: str = "train",
        test_fraction: float = 0.2,
        split_seed: int = 0,
        max_loops: int = 2,
        tool: bool = False,
        invalid_format_cost: float = 0.1,
        sandbox: Any = None,
        timeout_s: float | None = 2.0,
        format_penalty: float = 0.0,
        max_action_chars: int = 16_384,
        render_mode: str | None = None,
    ) -> None:
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        if max_loops < 1:
            raise ValueError(f"max_loops must be >= 1, got {max_loops}")
        if invalid_format_cost < 0 or format_penalty > 0:
            raise ValueError("invalid_format_cost must be >= 0 and format_penalty <= 0")
        roles = [Role("solver", SOLVER_INSTRUCTIONS), Role("verifier", VERIFIER_INSTRUCTIONS)]
        if tool:
            roles.insert(0, Role("tool", TOOL_INSTRUCTIONS))
        super().__init__(roles, max_turns=max_loops, max_action_chars=max_action_chars,
                         format_penalty=format_penalty, render_mode=render_mode)
        self.generator: str | None = None
        self.problems: list[MathProblem] = []
        if problems is not None or not (isinstance(dataset, str) and dataset in (*GENERATORS, "mixed")):
            pool = list(problems) if problems is not None else load_math_jsonl(dataset)
            if not 0 < test_fraction < 1:
                raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
            order = np.random.default_rng(split_seed).permutation(len(pool))
            n_test = int(round(len(pool) * test_fraction))
            chosen = order[:n_test] if split == "test" else order[n_test:]
            self.problems = [pool[i] for i in sorted(chosen)]
            if not self.problems:
                raise ValueError("no problems to draw from (empty dataset or split)")
        else:
            self.generator = str(dataset)
        self.split = split
        self.max_loops = max_loops
        self.tool = tool
        self.invalid_format_cost = invalid_format_cost
        self.sandbox = sandbox if sandbox is not None else default_sandbox()
        self.timeout_s = timeout_s
        self.problem = MathProblem("", "", "")
        self.attempts: list[dict[str, Any]] = []  #: per loop: answer, boxed, correct, verdict
        self._turn: dict[str, Any] = {}

    # ------------------------------------------------------------------ hooks
    def _setup(self, rng: np.random.Generator, options: dict) -> None:
        if self.generator is not None:
            seed = options.get("problem_seed")
            seed = instance_seed(rng, self.split) if seed is None else int(seed)
            self.problem = generate_problem(self.generator, seed)
        else:
            self.problem = choose_problem(self.problems, rng, options.get("task_id"))
        self.attempts = []
        for agent in self.agents:
            self.tell(agent, f"Problem:\n{self.problem.question}")

    def _begin_turn(self) -> None:
        self._turn = {"tool": None, "answer": "", "boxed": None, "verdict": None}

    def _on_action(self, agent: str, action: Action) -> None:
        if agent == "tool":
            from llm_marl_envs.code.tool_runs import run_tool

            run = run_tool(self.sandbox, action.text, "", self.timeout_s)
            if not run.code.strip():
                self.flag_format(agent, "no code found in the answer")
            self._turn["tool"] = run
            self.tell("solver", run.render())
        elif agent == "solver":
            self._turn["answer"] = action.text
            self._turn["boxed"] = last_boxed(action.text)
            if self._turn["boxed"] is None:
                self.flag_format(agent, "no final answer in \\boxed{...}")
            shown = self._fit(action.text, _SHOWN_ANSWER_CHARS)
            self.tell("verifier", f"Solver's answer (attempt {self.turn + 1} of {self.max_loops}):\n{shown}")
        else:
            verdict = parse_verdict(action.text)
            if verdict.issue is not None:
                self.flag_format(agent, verdict.issue)
            self._turn["verdict"] = verdict

    def _end_turn(self) -> TurnOutcome:
        t = self._turn
        correct = answers_match(self.problem.answer, t["boxed"])
        verdict = t["verdict"]
        decision = verdict.decision if verdict is not None else None
        approved = decision == "approve"
        last = approved or self.turn + 1 >= self.max_loops
        self.attempts.append({"answer": t["answer"], "boxed": t["boxed"], "correct": correct, "verdict": decision})
        cost = -self.invalid_format_cost
        agent_components = {
            "solver": {"solver_invalid_format": cost if t["boxed"] is None else 0.0, "solver_correct": float(correct)},
            "verifier": {
                "verifier_invalid_format": cost if decision is None else 0.0,
                "verifier_correct": float((decision == "approve") == correct and decision is not None),
            },
        }
        if self.tool:
            run = t["tool"]
            agent_components["tool"] = {
                "tool_invalid_format": cost if run is None or not run.code.strip() else 0.0,
                "tool_ran": float(run is not None and run.ran),
            }
        if not last:
            reason = verdict.reason if verdict is not None and verdict.reason else "(no reason given)"
            self.tell("solver", f"The verifier rejected your answer. Reason: {reason}\nAnswer again.")
            if self.tool:
                self.tell("tool", f"The verifier rejected the solver's answer. Reason: {reason}")
        reward = float(correct) if last else 0.0
        components = {"correct": float(correct), "approved": float(approved), "final": float(last)}
        return TurnOutcome(reward, components, agent_components, terminated=approved)

    # ------------------------------------------------------------------ extras
    def _hidden_state(self) -> str:
        return f"problem: {self.problem.task_id}; gold answer: {self.problem.answer}; attempts: {self.attempts}"

    def secrets(self, agent: str) -> tuple[str, ...]:
        """The gold answer as a boxed answer (a bare number may appear in the question itself)."""
        return (f"\\boxed{{{self.problem.answer}}}",) if self.problem.answer else ()

    def return_range(self) -> tuple[float, float]:
        low = self.format_penalty * len(self.possible_agents) * self.max_turns
        return (low, 1.0)

    def coalition_value(self, unmasked: frozenset[str], mode: str = "rescore") -> float:
        """Re-score the finished episode with the agents outside ``unmasked`` masked (module doc)."""
        if mode not in self.counterfactual_modes:
            raise ValueError(f"unsupported counterfactual mode {mode!r}; supported: {self.counterfactual_modes}")
        unknown = set(unmasked) - set(self.possible_agents)
        if unknown:
            raise KeyError(f"unknown agents {sorted(unknown)}")
        if not self.attempts:
            raise RuntimeError("coalition_value needs a finished turn to re-score")
        if "solver" not in unmasked:
            return 0.0
        if "verifier" not in unmasked:
            return float(self.attempts[0]["correct"])
        return float(self.attempts[-1]["correct"])


env = make_env_fn(raw_env)
parallel_env = make_parallel_env_fn(raw_env)


@noop_when_idle
def best_policy(env: Any, agent: str) -> str:
    """Scripted best team (peeks at the gold answer): the tool prints it, the solver boxes it,
    the verifier approves exactly the correct answers."""
    inner = env.unwrapped
    if agent == "tool":
        return f"```python\nprint({inner.problem.answer!r})\n```"
    if agent == "solver":
        return f"The answer is \\boxed{{{inner.problem.answer}}}."
    ok = answers_match(inner.problem.answer, inner._turn.get("boxed"))
    return "<verify>approve</verify>" if ok else "<verify>reject</verify> The final answer is wrong."


@noop_when_idle
def random_policy(env: Any, agent: str, rng: np.random.Generator) -> str:
    """Random play: the solver boxes the gold answer, a wrong number or nothing; the verifier
    approves, rejects or writes junk; the tool prints a number or writes junk."""
    inner = env.unwrapped
    wrong = str(int(rng.integers(-20, 100)))
    if agent == "tool":
        return str(rng.choice([f"```python\nprint({wrong})\n```", "I cannot compute this."]))
    if agent == "solver":
        return str(rng.choice([f"\\boxed{{{inner.problem.answer}}}", f"\\boxed{{{wrong}}}", f"maybe {wrong}"]))
    return str(rng.choice(["<verify>approve</verify>", "<verify>reject</verify> check the arithmetic", "looks fine"]))
