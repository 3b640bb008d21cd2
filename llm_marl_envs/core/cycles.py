"""The cycle schedule: every live agent steps once per cycle (PettingZoo's ``max_cycles`` notion).

A task's own schedule is turn-based: only the agents the task queues act (the planner, then
the workers it dispatched...). Generic MARL code -- ``parallel_env()``, SuperSuit, vector
envs, PettingZoo's ``max_cycles_test`` -- expects instead that every live agent acts in
every step. The cycle schedule gives it that without changing the task:

- a cycle visits every live agent once, in ``possible_agents`` order;
- the *actors* of a cycle are fixed when it starts: the agent whose turn it is (the head of
  the task's queue), or, in a parallelizable task, every agent queued in the turn;
- an actor's step is a real action; every other agent's step in the cycle is a **no-op**:
  its action is ignored (not recorded, not penalized) and its observation does not change.
  ``infos[agent]["acting"]`` says before each cycle whether ``agent``'s next action counts;
- when the task ends the episode within a cycle, the cycle's remaining agents still take
  their (no-op) step and the episode ends with the cycle;
- with ``max_cycles`` the episode is truncated after that many cycles (the task's own
  horizon is set to ``max_cycles`` turns too, so it never runs longer).

``env(max_cycles=N)`` switches the AEC env to this schedule; ``parallel_env()`` always uses
it, one parallel step being one cycle.
"""

from __future__ import annotations

from collections import deque
from typing import Any

SCHEDULES = ("turns", "cycles")


class CycleSchedule:
    """Mixin of :class:`~llm_marl_envs.core.TextCollabEnv` holding the cycle bookkeeping."""

    schedule_mode: str = "turns"
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

    @property
    def cycle_actors(self) -> frozenset[str]:
        """Agents whose action counts in the current cycle (everyone queued, in the turn schedule)."""
        if self.schedule_mode != "cycles":
            return frozenset(self._queue)
        return self._cycle_actors

    def _begin_cycle(self) -> None:
        queue: Any = self._queue
        parallel = bool(self.metadata.get("is_parallelizable", False))
        self._cycle_actors = frozenset(queue) if parallel else frozenset(list(queue)[:1])
        self._cycle_slots = deque(self.agents)
        self.agent_selection = self._cycle_slots[0]
        for a in self.agents:
            self.infos[a] = {**self.infos.get(a, {}), "acting": a in self._cycle_actors}

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
