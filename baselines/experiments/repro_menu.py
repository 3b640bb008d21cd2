"""A deliberately tiny policy for the code-task reproductions: each agent picks from a fixed menu.

Tiny language models trained from scratch in minutes cannot write programs, so the
coder/tester, tree-search and helper/main reproductions (``repro_at_grpo_alpha``,
``repro_mars2``, ``repro_magrpo_code``) let every agent choose among a few **real**
candidate answers per problem (per state, where a menu depends on it) -- the reference
solution, a buggy variant that is wrong on about half the inputs, a program that is always
wrong, prose without code; or, for a tester, the golden test suite, a one-test suite, the
golden suite negated, no tests. The answers go through the real environment, its sandbox
and its rewards, and the real rollout (branching groups, the env's search tree) and the
real advantage schemes give the advantages. Only the policy is tiny: a softmax over the
menu per (agent, state), trained by the score-function gradient mean(A (onehot(a) - p)) --
GRPO's update with one gradient step per batch and no ratio clipping.

:class:`MenuBackend` plays the policy through the rollout's ``Generator`` protocol: each
``GenOutput`` carries ``prompt_ids = [state id]``, ``completion_ids = [menu index]`` and the
sampling log-probability, so a sample table holds every decision for the update.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from baselines.generation.types import GenOutput, GenRequest
from baselines.samples import SampleTable

_PROBLEM_ID = re.compile(r"Problem ([^\s:]+?)[.:]?\s")

#: a state of the tabular policy, from the agent's chat (e.g. the turn, or draft / refine)
StateFn = Callable[[Sequence[Mapping[str, str]]], str]
#: one agent's answer texts for a problem: one list, or one list per state
Menu = Sequence[str] | Mapping[str, Sequence[str]]


def problem_id(messages: Sequence[Mapping[str, str]]) -> str:
    """The task id the code tasks write as ``Problem <id>`` in the first user message."""
    for m in messages:
        if m["role"] == "user":
            found = _PROBLEM_ID.search(m["content"])
            if found:
                return found.group(1)
    raise ValueError("no 'Problem <id>' in the chat: not a code-task prompt")


def fenced(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def half_wrong_program(reference: str, entry_point: str) -> str:
    """The reference, wrapped so that it returns a wrong value on inputs whose crc32 is odd (about half)."""
    return (
        f"{reference.rstrip()}\n\n\nimport zlib as _zlib\n_reference_impl = {entry_point}\n\n\n"
        "class _Wrong:\n    def __repr__(self):\n        return '<wrong>'\n\n\n"
        f"def {entry_point}(*args, **kwargs):\n"
        "    if _zlib.crc32(repr(args).encode()) % 2:\n        return _Wrong()\n"
        "    return _reference_impl(*args, **kwargs)\n"
    )


def always_wrong_program(entry_point: str) -> str:
    return (f"class _Wrong:\n    def __repr__(self):\n        return '<wrong>'\n\n\n"
            f"def {entry_point}(*args, **kwargs):\n    return _Wrong()\n")


def check_source(asserts: Sequence[str]) -> str:
    """A HumanEval-style ``def check(candidate)`` holding ``asserts``."""
    body = "".join("    " + line + "\n" for a in asserts for line in a.strip().splitlines())
    return "def check(candidate):\n" + (body or "    pass\n")


def negated(assert_code: str) -> str:
    """``assert X`` -> ``assert not (X)``: a test that the reference fails wherever it passed X."""
    tree = ast.parse(assert_code)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
    return ast.unparse(tree)


@dataclass
class MenuPolicy:
    """Softmax over ``len(options[agent])`` menu entries per (agent, state), one logit vector each."""

    options: Mapping[str, Sequence[str]]  #: agent -> names of its menu entries
    init_logits: Mapping[str, Sequence[float]] = field(default_factory=dict)  #: agent -> start logits
    logits: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)

    def vector(self, agent: str, state: str) -> np.ndarray:
        key = (agent, state)
        if key not in self.logits:
            init = self.init_logits.get(agent)
            self.logits[key] = (np.array(init, dtype=np.float64) if init is not None
                                else np.zeros(len(self.options[agent])))
        return self.logits[key]

    def probs(self, agent: str, state: str) -> np.ndarray:
        z = self.vector(agent, state)
        e = np.exp(z - z.max())
        return e / e.sum()

    def update(self, agent: str, state: str, choices: np.ndarray, advantages: np.ndarray, lr: float,
               n_rows: int) -> None:
        """logits += lr * sum(A (onehot(a) - p)) / n_rows (the agent's rows of the batch)."""
        p = self.probs(agent, state)
        grad = np.zeros_like(p)
        for a, adv in zip(choices, advantages):
            grad += adv * (np.eye(len(p))[int(a)] - p)
        self.logits[(agent, state)] = self.vector(agent, state) + lr * grad / max(n_rows, 1)


class MenuBackend:
    """A ``Generator`` that answers each request by sampling the menu policy (module docstring).

    ``menus[problem id][agent]`` is the list of answer texts, in the order of ``policy.options``,
    or a mapping ``state -> list`` where the answers an agent can give depend on its state (e.g.
    a repair that only feedback showing the failing tests makes possible); ``state_fn`` maps the
    agent's chat to the policy state.
    """

    def __init__(self, policy: MenuPolicy, menus: Mapping[str, Mapping[str, Menu]], state_fn: StateFn,
                 rng: np.random.Generator) -> None:
        self.policy, self.menus, self.state_fn, self.rng = policy, menus, state_fn, rng
        self.states: list[str] = []

    def state_id(self, state: str) -> int:
        if state not in self.states:
            self.states.append(state)
        return self.states.index(state)

    def generate(self, requests: Sequence[GenRequest]) -> list[GenOutput]:
        out = []
        for req in requests:
            messages = list(req.messages or [])
            state = self.state_fn(messages)
            p = self.policy.probs(req.agent, state)
            choice = int(self.rng.choice(len(p), p=p))
            texts = self.menus[problem_id(messages)][req.agent]
            text = (texts[state] if isinstance(texts, Mapping) else texts)[choice]
            out.append(GenOutput(req.agent, [self.state_id(state)], [choice], [float(np.log(p[choice]))], text,
                                 "stop"))
        return out

    def update(self, table: SampleTable, advantages: np.ndarray, lr: float) -> None:
        """One policy-gradient step per (agent, state) on the table's decisions."""
        for agent in sorted(set(table.agent.tolist())):
            rows = np.flatnonzero(table.agent == agent)
            states = np.array([table.prompt_ids[i][0] for i in rows])
            choices = np.array([table.completion_ids[i][0] for i in rows])
            for s in sorted(set(states.tolist())):
                mine = states == s
                self.policy.update(agent, self.states[s], choices[mine], advantages[rows][mine], lr, len(rows))

    def choice_rate(self, table: SampleTable, agent: str, option: int) -> float:
        """Fraction of ``agent``'s decisions in ``table`` that picked menu entry ``option``."""
        rows = np.flatnonzero(table.agent == agent)
        return float(np.mean([table.completion_ids[i][0] == option for i in rows])) if len(rows) else float("nan")
