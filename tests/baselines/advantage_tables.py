"""Small tables shared by the advantage-scheme tests (``tests/baselines/test_advantages_*.py``)."""

from __future__ import annotations

from baselines.advantages import AdvantageConfig
from baselines.samples import Row, SampleTable

EXACT = AdvantageConfig(eps=0.0)


def table(*rows: Row) -> SampleTable:
    return SampleTable.from_rows(rows)


def flat(task: str, rewards: list[float], agent: str = "a") -> list[Row]:
    """One row per episode of a single-agent, single-turn task."""
    return [Row(task, e, agent, r) for e, r in enumerate(rewards)]
