"""What happened in an episode, kept for trainers, renderers and debugging.

The episode record is the environment's side of the contract with trainers: every
agent-step with the exact chat the agent saw, what it answered, the problems found in
its answer, and the team reward of the turn it belongs to.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

ChatMessage = dict  # {"role": "system" | "user" | "assistant", "content": str}


@dataclass
class StepRecord:
    """One agent's one action."""

    turn: int
    agent: str
    prompt: list[ChatMessage]
    action: str
    format_issues: list[str] = field(default_factory=list)
    reward: float | None = None  # team reward of the turn; set when the turn ends
    reward_components: dict[str, float] = field(default_factory=dict)


@dataclass
class TurnResult:
    """The joint outcome of one turn."""

    turn: int
    reward: float
    components: dict[str, float]
    agent_components: dict[str, dict[str, float]]


@dataclass
class EpisodeRecord:
    """Who said what at which turn, with rewards. Built incrementally during play."""

    steps: list[StepRecord] = field(default_factory=list)
    turns: list[TurnResult] = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False

    @property
    def total_reward(self) -> float:
        return float(sum(t.reward for t in self.turns))

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    def component_totals(self, agent: str | None = None) -> dict[str, float]:
        """The team's reward components summed over the turns, plus ``agent``'s own terms when given."""
        totals: dict[str, float] = {}
        for turn in self.turns:
            own = turn.agent_components.get(agent, {}) if agent is not None else {}
            for key, value in {**turn.components, **own}.items():
                totals[key] = totals.get(key, 0.0) + float(value)
        return totals

    def steps_of(self, agent: str) -> list[StepRecord]:
        return [s for s in self.steps if s.agent == agent]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"total_reward": self.total_reward}
