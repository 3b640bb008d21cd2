"""The cycle schedule: every live agent steps once per cycle (PettingZoo's ``max_cycles`` notion).

A task's own schedule is turn-based: only the agents the task queues act (the planner, then
the workers it dispatched...). Generic MARL code -- ``parallel_env()``, SuperSuit, vector
envs, PettingZoo's ``max_cycles_test`` -- expects instead that every live agent acts in
every step. The cycle schedule gives it that without changing the task:

- a cycle visits every live agent once, in ``possible_agents`` order;
- the *actors* of a cycle are fixed when it starts: the agent whose turn it is (the head of
  the task's queue), or, in a task with ``simultaneous_turns`` (agents blind to each other
  within a turn), every agent queued in the turn;
- an actor's step is a real action; every other agent's step in the cycle is a **no-op**:
  its action is ignored (not recorded, not penalized) and its text does not change.
  :meth:`CycleSchedule.is_acting` says whether an agent's next step counts; so do
  ``infos[agent]["acting"]`` (every live agent, after every step, in both schedules) and the
  observation's ``"acting"`` flag (1 or 0), for models that see observations only. A policy
  asked for a non-acting agent answers :data:`NOOP_ACTION` (:func:`noop_when_idle`);
- when the task ends the episode within a cycle, the cycle's remaining agents still take
  their (no-op) step and the episode ends with the cycle;
- with ``max_cycles`` the episode is truncated after that many cycles (the task's own
  horizon is set to ``max_cycles`` turns too, so it never runs longer).

``env(max_cycles=N)`` switches the AEC env to this schedule; ``parallel_env()`` always uses
it, one parallel step being one cycle. In this schedule every agent steps once per cycle, so
the env declares PettingZoo's ``metadata["is_parallelizable"]`` (``aec_to_parallel`` accepts it);
in the turn schedule only a task with ``simultaneous_turns`` does. The flag is a declaration
for PettingZoo, read by nothing here: setting it does not change who acts.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable
from typing import Any

SCHEDULES = ("turns", "cycles")

#: the documented no-op: what a policy answers for an agent whose step does not count
NOOP_ACTION = ""


def noop_when_idle(policy: Callable[..., Any]) -> Callable[..., Any]:
    """Make ``policy(env, agent, ...)`` total: :data:`NOOP_ACTION` for an agent that does not act now."""

    @functools.wraps(policy)
    def total(env: Any, agent: str, *args: Any, **kwargs: Any) -> Any:
        if not env.unwrapped.is_acting(agent):
            return NOOP_ACTION
        return policy(env, agent, *args, **kwargs)

    return total


class CycleSchedule:
    """Mixin of :class:`~llm_marl_envs.core.TextCollabEnv` holding the cycle bookkeeping."""

    schedule_mode: str = "turns"
    #: the task's turns are blind (no agent sees another's answer within a turn), so every agent
    #: queued in a turn acts in one cycle; set by the task (PettingZoo's flag is only declared from it)
    simultaneous_turns: bool = False
    max_cycles: int | None = None
    cycles: int = 0  #: cycles completed in this episode (cycle schedule only)

    def set_schedule(self, schedule: str, max_cycles: int | None = None) -> None:
        """Choose ``"turns"`` (the task's own, default) or ``"cycles"``; takes effect at ``reset``."""
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
        if max_cycles is not None:
            if isinstance(max_cycles, bool) or not isinstance(max_cycles, int) or max_cycles < 1:
                raise ValueError(f"max_cycles must be an int >= 1, got {max_cycles!r}")
            if schedule != "cycles":
                raise ValueError("max_cycles needs the cycle schedule")
        self.schedule_mode, self.max_cycles = schedule, max_cycles
        self._declare_parallelizable()

    def _declare_parallelizable(self) -> None:
        """PettingZoo's ``metadata["is_parallelizable"]``, from the schedule (module docstring)."""
        parallel = self.schedule_mode == "cycles" or bool(self.simultaneous_turns)
        self.metadata = {**self.metadata, "is_parallelizable": parallel}

    def is_acting(self, agent: str) -> bool:
        """Whether ``agent``'s next step is a real action (not a no-op slot, not a finished agent)."""
        if agent not in self.agents or self.terminations[agent] or self.truncations[agent]:
            return False
        return agent in self._queue and (self.schedule_mode != "cycles" or agent in self._cycle_actors)

    def _refresh_acting(self) -> None:
        for a in self.agents:
            self.infos[a]["acting"] = self.is_acting(a)

    @property
    def cycle_actors(self) -> frozenset[str]:
        """Agents whose action counts in the current cycle (everyone queued, in the turn schedule)."""
        if self.schedule_mode != "cycles":
            return frozenset(self._queue)
        return self._cycle_actors

    def _begin_cycle(self) -> None:
        queue: Any = self._queue
        self._cycle_actors = frozenset(queue) if self.simultaneous_turns else frozenset(list(queue)[:1])
        self._cycle_slots = deque(self.agents)
        self.agent_selection = self._cycle_slots[0]

    def _reset_cycles(self) -> None:
        self.cycles = 0
        self._pending_end: bool | None = None
        self._cycle_actors = frozenset()
        self._cycle_slots: deque[str] = deque()
        if self.schedule_mode == "cycles":
            self._begin_cycle()

    def _is_noop(self, agent: str) -> bool:
        return self.schedule_mode == "cycles" and (agent not in self._cycle_actors or agent not in self._queue)

    def _advance_cycle(self) -> None:
        """After a live step in the cycle schedule: next slot, next cycle, or truncation."""
        self._cycle_slots.popleft()
        if self.record.done:
            return
        if not self._cycle_slots:
            self.cycles += 1
            if self._pending_end is not None:  # the task ended the episode earlier in this cycle
                self._end_episode(self._pending_end)
                return
            if self.max_cycles is not None and self.cycles >= self.max_cycles:
                self._end_episode(False)
                return
            self._begin_cycle()
        self.agent_selection = self._cycle_slots[0]
