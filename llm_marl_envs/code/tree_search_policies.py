"""Scripted policies of ``code/tree_search_v0``: the oracle, a repairing policy, failing and random play."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from llm_marl_envs.code.feedback import parse_failures
from llm_marl_envs.code.search_problems import FUNCTION, SearchProblem
from llm_marl_envs.core.cycles import noop_when_idle


def _fenced(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


@noop_when_idle
def best_policy(env: Any, agent: str) -> str:
    """Oracle: the problem's reference solution, at every node."""
    problem = env.unwrapped.problem
    if problem.reference is None:
        raise ValueError(f"problem {problem.task_id} has no reference solution")
    return _fenced(problem.reference)


def wrong_program(problem: SearchProblem) -> str:
    """A program that fails every test of ``problem`` with a visible wrong answer."""
    if problem.kind == FUNCTION:
        return (
            "class _Wrong:\n    def __repr__(self):\n        return '<wrong>'\n\n\n"
            f"def {problem.entry_point}(*args, **kwargs):\n    return _Wrong()\n"
        )
    return "import sys\nsys.stdin.read()\nprint('<wrong>')\n"


@noop_when_idle
def buggy_then_fixed_policy(env: Any, agent: str) -> str:
    """Writes a wrong program; writes the reference only when its observation shows a failing input.

    The repair is triggered by parsing the feedback text of the agent's current prompt
    (:func:`~llm_marl_envs.code.feedback.parse_failures`): only if a failure block's
    ``input`` is one of the problem's public inputs does it fix the program. With no
    feedback, or feedback that does not show inputs, it keeps writing the wrong program.
    """
    raw = env.unwrapped
    chat = raw.observe_chat(agent)
    prompt = next((m["content"] for m in reversed(chat) if m["role"] == "user"), "")
    shown = {f["input"].strip() for f in parse_failures(prompt) if "input" in f}
    if shown & {i.strip() for i in raw.problem.public_inputs if i.strip()}:
        return best_policy(env, agent)
    return _fenced(wrong_program(raw.problem))


@noop_when_idle
def always_fail_policy(env: Any, agent: str) -> str:
    """Always the wrong program (gets 0)."""
    return _fenced(wrong_program(env.unwrapped.problem))


@noop_when_idle
def random_policy(env: Any, agent: str, rng: np.random.Generator) -> str:
    """A random one of: the reference, the wrong program, prose without code, empty."""
    problem = env.unwrapped.problem
    options = [_fenced(wrong_program(problem)), "I am not sure how to solve this.", ""]
    if problem.reference:
        options.append(_fenced(problem.reference))
    return options[int(rng.integers(len(options)))]


def tree_json(env: Any) -> str:
    """The episode's tree as JSON (one record per node)."""
    return json.dumps(env.unwrapped.tree.to_records())
