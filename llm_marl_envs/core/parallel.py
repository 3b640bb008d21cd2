"""The parallel API of every task: one ``step(actions)`` = one cycle of the cycle schedule.

``parallel_env()`` wraps the AEC task in the cycle schedule (:mod:`.cycles`): every live agent
passes an action each step; the actions of the cycle's actors (``infos[agent]["acting"]``)
are applied in ``possible_agents`` order, the others are documented no-ops. In a task whose
turns are sequential (the listener needs the speaker's message), one step is one agent's
action; in a parallelizable task (agents blind to each other within a turn) it is a whole turn.
``rewards`` of a step sum the team rewards of the turns that ended in it, so the sum over an
episode is the episode return.

Infos have one fixed schema from ``reset`` on, so that clients which build their info spec
at reset (TorchRL) keep working: every live agent's info is :func:`step_info` -- ``acting``
(bool: its action counts in the next step), ``turn`` (int: turns scored so far) and
``cycle`` (int: cycles completed) -- and nothing else. The per-turn details
(``reward_components``, ``format_issues``, a task's extras) stay in the AEC env's
``env.unwrapped.infos`` and in ``env.unwrapped.record``. ``state_space``/``state()`` are the
task's global state (text), for centralized critics and PettingZoo's ``state_test``.

Bad input is a typed error: an action missing for an acting agent or given for an agent
that is not live raises :class:`MissingActionError` / :class:`UnknownAgentError` (both
``KeyError`` and ``ValueError``), before anything is stepped.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from pettingzoo import ParallelEnv

from llm_marl_envs.core.copying import deepcopy_sharing, outermost_wrapper


class MissingActionError(KeyError, ValueError):
    """A parallel step lacks the action of an agent that acts in this cycle."""

    def __str__(self) -> str:
        return str(self.args[0])


class UnknownAgentError(KeyError, ValueError):
    """A parallel step has an action for an agent that is not live."""

    def __str__(self) -> str:
        return str(self.args[0])


def step_info(raw: Any, agent: str) -> dict[str, bool | int]:
    """The parallel env's info for ``agent``: the same keys and scalar types at every step."""
    return {"acting": raw.is_acting(agent), "turn": int(raw.turn), "cycle": int(raw.cycles)}


class TextParallelEnv(ParallelEnv):
    """Parallel view of a wrapped text task in the cycle schedule."""

    def __init__(self, aec_env: Any) -> None:
        self.aec_env = aec_env
        raw = aec_env.unwrapped
        self.metadata = {**raw.metadata, "is_parallelizable": True}
        self.possible_agents = list(raw.possible_agents)
        self.render_mode = raw.render_mode
        self.state_space = raw.state_space
        self.agents: list[str] = []

    @property
    def unwrapped(self) -> Any:
        return self.aec_env.unwrapped

    def observation_space(self, agent: str) -> Any:
        return self.aec_env.observation_space(agent)

    def action_space(self, agent: str) -> Any:
        return self.aec_env.action_space(agent)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.aec_env.reset(seed=seed, options=options)
        raw = self.aec_env.unwrapped
        self.agents = list(raw.agents)
        return {a: raw.observe(a) for a in self.agents}, {a: step_info(raw, a) for a in self.agents}

    def step(self, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        raw = self.aec_env.unwrapped
        if not isinstance(actions, Mapping):
            raise TypeError(f"actions must be a dict agent -> text, got {type(actions).__name__}")
        live = list(raw.agents)
        if not live:
            raise RuntimeError("step() after the episode ended: call reset()")
        unknown = sorted(set(actions) - set(live))
        if unknown:
            raise UnknownAgentError(f"actions for agents that are not live: {unknown}; live agents: {live}")
        actors = raw.cycle_actors
        missing = [a for a in live if a in actors and a not in actions]
        if missing:
            raise MissingActionError(
                f"no action for {missing}, who act in this step (infos[agent]['acting']); give every "
                f"live agent an action -- those of non-acting agents are ignored"
            )
        rewards = {a: 0.0 for a in live}
        start = raw.cycles
        while not raw.record.done and raw.cycles == start and not self._all_dead(raw):
            agent = raw.agent_selection
            self.aec_env.step(actions.get(agent) if agent in actors else None)
            for a in live:
                rewards[a] += float(raw.rewards.get(a, 0.0))
        terminations = {a: bool(raw.terminations[a]) for a in live}
        truncations = {a: bool(raw.truncations[a]) for a in live}
        infos = {a: step_info(raw, a) for a in live}
        observations = {a: raw.observe(a) for a in live}
        while raw.agents and self._all_dead(raw):  # PettingZoo's dead steps, done here
            self.aec_env.step(None)
        self.agents = list(raw.agents)
        return observations, rewards, terminations, truncations, infos

    @staticmethod
    def _all_dead(raw: Any) -> bool:
        return all(raw.terminations[a] or raw.truncations[a] for a in raw.agents)

    def render(self, mode: str | None = None) -> Any:
        """The task's render (``mode`` is accepted and ignored: the env's ``render_mode`` decides)."""
        return self.aec_env.render()

    def state(self) -> str:
        return self.aec_env.unwrapped.state()

    def close(self) -> None:
        self.aec_env.close()

    @property
    def clone(self) -> Callable[[], Any]:
        """``clone()``: an independent copy of the episode, wrapped like this env (outer wrappers included)."""
        outer = outermost_wrapper(self, sys._getframe(1))
        return lambda: deepcopy_sharing(outer, self.aec_env.unwrapped)
