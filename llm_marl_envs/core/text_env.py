"""The base class of every text collaboration task: a PettingZoo AEC environment for a Dec-POMDP.

A text collaboration task is a decentralized POMDP ``<I, S, {O_i}, {A_i}, R, T, H>``:

==============  ==========================================================================
Dec-POMDP       Here
==============  ==========================================================================
``I``           ``possible_agents`` -- one named :class:`Role` per agent (``roles``).
``S``           the task's hidden state (problem instance, tree, index...) plus every agent's
                history; :meth:`TextCollabEnv.state` renders it for centralized critics.
``O_i``         agent ``i``'s own chat history only: its role instructions (system message),
                whatever the task hands *it* (:meth:`tell`), and its own past answers.
                :meth:`observe` gives it as text, :meth:`observe_chat` as chat messages.
``A_i``         free text (:class:`~llm_marl_envs.core.spaces.FreeText`); any value passed to
                ``step`` is sanitized, never rejected, and problems become format issues.
``R``           one joint team reward per turn, given to every agent in ``rewards``; its
                components (and per-agent credit where the task defines it) are in
                ``infos[agent]["reward_components"]``.
``T``           the task's hooks: :meth:`_on_action` and :meth:`_end_turn`.
``H``           ``max_turns``: reaching it truncates the episode; the task may terminate
                earlier (all tests pass, an answer was given...).
==============  ==========================================================================

Turn schedule: at the start of every turn the task lists who acts (:meth:`_turn_agents`,
all agents by default); they act one after the other in that order (a task may add agents
to the running turn with :meth:`schedule`); when the queue is empty the turn ends, the task
scores it and either ends the episode or starts the next turn. What an agent may see of
the others' answers within a turn is entirely the task's choice through :meth:`tell`
("blind" parallel play simply tells nothing until the turn is over).

Writing a task means implementing three hooks -- :meth:`_setup` (draw an instance, hand out
first observations), :meth:`_on_action` (take one agent's answer) and :meth:`_end_turn`
(score the turn) -- and optionally :meth:`_begin_turn`, :meth:`_turn_agents`, :meth:`_hidden_state`,
:meth:`return_range` and :meth:`coalition_value` (counterfactual credit, for SHARP). The hooks'
defaults and :class:`TurnOutcome` live in :mod:`.task_hooks` (a mixin of the base class).

Branching contract (:meth:`clone`): a clone is a deep copy of the episode at this exact
point -- histories, RNG state, queue, record -- so stepping the clone never changes the
original and vice versa. Heavy read-only or thread-safe resources listed in
``shared_attributes`` (a sandbox pool, a retrieval index, a dataset) are shared, not copied;
``copy.deepcopy`` does the same as ``clone()``, and pickling works at any point, process
resources (``process_attributes``) re-attaching lazily in the copy (:mod:`.copying`).
Generic MARL code gets every agent stepping every cycle from :mod:`.cycles`.
"""

from __future__ import annotations

import warnings
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from pettingzoo import AECEnv

from llm_marl_envs.core import copying
from llm_marl_envs.core.actions import sanitize_action
from llm_marl_envs.core.cycles import CycleSchedule
from llm_marl_envs.core.records import ChatMessage, EpisodeRecord, StepRecord, TurnResult
from llm_marl_envs.core.spaces import FreeText, text_observation_space
from llm_marl_envs.core.task_hooks import TaskHooks
from llm_marl_envs.core.task_hooks import TurnOutcome as TurnOutcome  # re-exported: tasks import it from here
from llm_marl_envs.core.text import fit_text, format_components, render_chat


@dataclass(frozen=True)
class Role:
    """A named agent and the instructions it is given as its system message."""

    name: str
    instructions: str


class TextCollabEnv(TaskHooks, CycleSchedule, AECEnv):
    """Base class for text-based Dec-POMDP collaboration tasks (see the module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["ansi", "human"],
        "name": "text_collab",
    }
    #: attributes shared (not deep-copied) between an env and its clones
    shared_attributes: ClassVar[tuple[str, ...]] = ()
    #: attributes holding process resources (a sandbox handle): shared by clones, detached by
    #: pickling and re-created on first access (:meth:`_detach_resource`, :meth:`_reattach_resource`)
    process_attributes: ClassVar[tuple[str, ...]] = ()
    #: counterfactual re-scoring modes supported by :meth:`coalition_value` ("rescore", ...)
    counterfactual_modes: ClassVar[tuple[str, ...]] = ()
    #: the ``__init__`` parameter that ``max_cycles`` maps onto (the task's horizon in turns)
    horizon_kwarg: ClassVar[str] = "max_turns"
    #: the value of the task's ``split`` keyword (where it has one) that holds its held-out problems
    held_out_split: ClassVar[str] = "eval"

    def __init__(
        self,
        roles: Sequence[Role],
        *,
        max_turns: int = 1,
        max_action_chars: int = 16_384,
        max_observation_chars: int = 1_000_000,
        format_penalty: float = 0.0,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        if not roles:
            raise ValueError("a task needs at least one role")
        names = [r.name for r in roles]
        if len(set(names)) != len(names):
            raise ValueError(f"role names must be unique, got {names}")
        for name, value in (("max_turns", max_turns), ("max_action_chars", max_action_chars),
                            ("max_observation_chars", max_observation_chars)):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if isinstance(format_penalty, bool) or not isinstance(format_penalty, (int, float, np.integer, np.floating)):
            raise TypeError(f"format_penalty must be a number, got {format_penalty!r}")
        if not format_penalty <= 0:  # also catches NaN
            raise ValueError(f"format_penalty is added to the reward, so it must be <= 0, got {format_penalty}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}"
            )
        self.roles: dict[str, Role] = {r.name: r for r in roles}
        self.possible_agents: list[str] = names
        self.max_turns = max_turns
        self.max_action_chars = max_action_chars
        self.max_observation_chars = max_observation_chars
        self.format_penalty = format_penalty
        self.render_mode = render_mode
        self.action_spaces = {a: FreeText(max_action_chars) for a in names}
        self.observation_spaces = {a: text_observation_space(max_observation_chars) for a in names}
        self.state_space = FreeText(10 * max_observation_chars)
        if type(self).metadata.get("is_parallelizable") and not self.simultaneous_turns:
            warnings.warn(
                f"{type(self).__name__}: metadata['is_parallelizable'] is declared by the env from its schedule "
                "and does not decide who acts; set the class attribute simultaneous_turns = True for blind turns",
                stacklevel=2,
            )
        self._declare_parallelizable()
        self._np_random: np.random.Generator = np.random.default_rng()
        self.agents: list[str] = []
        self.turn = 0
        self._histories: dict[str, list[ChatMessage]] = {}
        self._obs_cache: dict[str, str] = {}
        self._queue: deque[str] = deque()
        self._turn_issues: dict[str, list[str]] = {}
        self._transcript: list[str] = []
        self.record = EpisodeRecord()

    # ------------------------------------------------------------------ PettingZoo API
    def observation_space(self, agent: str):
        return self.observation_spaces[agent]

    def action_space(self, agent: str):
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise TypeError(f"seed must be a non-negative int or None, got {seed!r}")
        if options is not None and not isinstance(options, dict):
            raise TypeError(f"options must be a dict or None, got {type(options).__name__}")
        if seed is not None:
            seed = int(seed)
            self._np_random = np.random.default_rng(seed)
            for i, agent in enumerate(self.possible_agents):
                self.action_spaces[agent].seed(seed + i)
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {} for a in self.agents}
        self.turn = 0
        self._histories = {
            a: [{"role": "system", "content": self.roles[a].instructions}] for a in self.agents
        }
        self._obs_cache = {}
        self._turn_issues = {a: [] for a in self.agents}
        self._transcript = []
        self.record = EpisodeRecord()
        self._setup(self._np_random, options or {})
        self._start_turn()
        self._reset_cycles()
        self._refresh_acting()

    def observe(self, agent: str) -> dict[str, Any]:
        """``{"text": the agent's chat as text, "acting": 1 if its next step counts else 0}``."""
        text = self._obs_cache.get(agent)
        if text is None:
            text = self._fit(render_chat(self._histories[agent]), self.max_observation_chars)
            self._obs_cache[agent] = text
        return {"text": text, "acting": int(self.is_acting(agent))}

    def observe_chat(self, agent: str) -> list[ChatMessage]:
        """Agent ``agent``'s observation as chat messages, ready for a chat template."""
        return [dict(m) for m in self._histories[agent]]

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        if self._is_noop(agent):  # cycle schedule: not this agent's turn, the action is ignored
            self._advance_cycle()
            self._refresh_acting()
            self._accumulate_rewards()
            return
        act = sanitize_action(action, self.max_action_chars)
        self.record.steps.append(
            StepRecord(self.turn, agent, self.observe_chat(agent), act.text, list(act.issues))
        )
        self._histories[agent].append({"role": "assistant", "content": act.text})
        self._obs_cache.pop(agent, None)
        self._transcript.append(f"[turn {self.turn}] {agent}: {self._fit(act.text, 2000)}")
        self._turn_issues[agent].extend(act.issues)
        self._on_action(agent, act)
        self._queue.remove(agent)  # the head, except for a parallel cycle's later actors
        if self._queue:
            self.agent_selection = self._queue[0]
        else:
            self._finish_turn()
        if self.schedule_mode == "cycles":
            self._advance_cycle()
        self._refresh_acting()
        self._accumulate_rewards()
        if self.render_mode == "human" and self.record.done:
            self.render()

    def state(self) -> str:
        """The global state (for centralized training): hidden task state + full transcript."""
        return f"{self._hidden_state()}\n\n{self.transcript()}"

    def render(self, mode: str | None = None) -> str | None:
        """The transcript (``"ansi"``), or printed (``"human"``); ``mode`` is accepted and ignored
        (the env's ``render_mode`` decides; RLlib passes one)."""
        text = self.transcript()
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ helpers for tasks
    @property
    def np_random(self) -> np.random.Generator:
        return self._np_random

    def tell(self, agent: str, text: str) -> None:
        """Hand ``text`` to ``agent`` only (a user message in its chat)."""
        self._histories[agent].append({"role": "user", "content": text})
        self._obs_cache.pop(agent, None)
        self._transcript.append(f"[turn {self.turn}] -> {agent}: {self._fit(text, 2000)}")

    def forget(self, agent: str) -> None:
        """Clear ``agent``'s history back to its role instructions (memoryless observations)."""
        self._histories[agent] = self._histories[agent][:1]
        self._obs_cache.pop(agent, None)

    def schedule(self, agent: str) -> None:
        """Let ``agent`` act later in the current turn (after those already queued)."""
        if agent not in self.possible_agents:
            raise KeyError(f"unknown agent {agent!r}")
        self._queue.append(agent)

    def flag_format(self, agent: str, issue: str) -> None:
        """Record a format problem in ``agent``'s last answer (penalized at turn end)."""
        self._turn_issues[agent].append(issue)
        if self.record.steps and self.record.steps[-1].agent == agent:
            self.record.steps[-1].format_issues.append(issue)

    def clone(self) -> TextCollabEnv:
        """An independent copy of this episode at this point (see the branching contract)."""
        return copying.deepcopy_env(self, {})

    def __deepcopy__(self, memo: dict[int, Any]) -> TextCollabEnv:
        return copying.deepcopy_env(self, memo)

    def __getstate__(self) -> dict[str, Any]:
        return copying.getstate(self)

    def __setstate__(self, state: dict[str, Any]) -> None:
        copying.setstate(self, state)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return copying.reattach(self, name)

    def transcript(self) -> str:
        """Everything said so far, in order, with the turn rewards."""
        return "\n".join(self._transcript)

    # ------------------------------------------------------------------ internals
    def _start_turn(self) -> None:
        self._begin_turn()
        order = [a for a in self._turn_agents() if a in self.agents]
        if not order:
            raise RuntimeError(f"{type(self).__name__}._turn_agents() scheduled nobody")
        self._queue = deque(order)
        self.agent_selection = order[0]

    def _finish_turn(self) -> None:
        outcome = self._end_turn()
        flagged = [a for a in self.agents if self._turn_issues[a]]
        penalty = self.format_penalty * len(flagged)
        team = float(outcome.reward) + penalty
        components = dict(outcome.components)
        components["format_penalty"] = penalty
        self.record.turns.append(
            TurnResult(self.turn, team, components, {a: dict(c) for a, c in outcome.agent_components.items()})
        )
        for step in self.record.steps:
            if step.turn == self.turn:
                step.reward = team
                step.reward_components = components | outcome.agent_components.get(step.agent, {})
        for a in self.agents:
            self.rewards[a] = team
            self.infos[a] = {
                "turn": self.turn,
                "reward_components": components | outcome.agent_components.get(a, {}),
                "format_issues": list(self._turn_issues[a]),
            }
            self._turn_issues[a] = []
        self._transcript.append(f"[turn {self.turn}] team reward {team:+.3f} {format_components(components)}")
        self.turn += 1
        if outcome.terminated or self.turn >= self.max_turns:
            if self.schedule_mode == "cycles" and len(self._cycle_slots) > 1:
                self._pending_end = outcome.terminated  # the cycle's other agents still take their no-op step
            else:
                self._end_episode(outcome.terminated)
        else:
            self._start_turn()

    def _end_episode(self, terminated: bool) -> None:
        flags = self.terminations if terminated else self.truncations
        for a in self.agents:
            flags[a] = True
        self.record.terminated = terminated
        self.record.truncated = not terminated
        self.agent_selection = self.agents[0]

    _fit = staticmethod(fit_text)
