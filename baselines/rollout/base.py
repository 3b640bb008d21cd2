"""What every sampling mode returns, and the settings they share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from baselines.rollout.common import GenStats
from baselines.samples import SampleTable


@dataclass(frozen=True)
class Task:
    """One task instance: the seed the environment is reset with, and its id in the sample table."""

    seed: int

    @property
    def id(self) -> str:
        return f"seed{self.seed}"


@dataclass
class RolloutResult:
    """The sample table of one rollout plus what the logger needs.

    returns: the joint return of every complete trajectory the rollout produced (independent
        episodes; root-to-leaf paths of a MAGRPO tree; the scored candidates of AT-GRPO),
        i.e. the "train reward" of the step.
    """

    table: SampleTable
    returns: list[float]
    gen: GenStats
    info: dict[str, Any] = field(default_factory=dict)


def reset_copies(template: Any, task: Task, n: int) -> list[Any]:
    """Reset ``template`` on ``task`` and return ``n`` independent clones of that initial state."""
    template.reset(seed=task.seed)
    return [template.clone() for _ in range(n)]
