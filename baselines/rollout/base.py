"""What every sampling mode returns, and the settings they share."""

from __future__ import annotations

from collections.abc import Callable
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


class EnvPool:
    """Reusable environment instances built once by ``factory`` (``llm_marl_envs.make`` + kwargs).

    A rollout :meth:`take` s fresh instances and resets them; resetting ``n`` instances with the
    task's seed gives ``n`` identical initial states (the reset contract) far more cheaply than
    deep-copying one. :meth:`release` returns every taken instance at the end of a rollout.
    """

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory = factory
        self._free: list[Any] = []
        self._taken: list[Any] = []

    def take(self, n: int) -> list[Any]:
        while len(self._free) < n:
            self._free.append(self.factory())
        envs, self._free = self._free[:n], self._free[n:]
        self._taken.extend(envs)
        return envs

    def release(self) -> None:
        self._free.extend(self._taken)
        self._taken = []


def reset_copies(pool: EnvPool, task: Task, n: int) -> list[Any]:
    """``n`` environments reset on ``task``: ``n`` independent copies of its initial state."""
    envs = pool.take(n)
    for env in envs:
        env.reset(seed=task.seed)
    return envs
