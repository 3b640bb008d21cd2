"""GRPO, the multi-agent "vanilla" reference (algorithms.md section 0)."""

from __future__ import annotations

from baselines.advantages.config import AdvantageConfig, AdvantageResult
from baselines.advantages.normalize import group_index, normalize_with_config
from baselines.samples import SampleTable


def grpo(table: SampleTable, config: AdvantageConfig) -> AdvantageResult:
    """Global (task-pooled) group normalization.

        A_i = (r_i - mean(r)) / (std(r) + eps)

    group key: (task,) -- every row of the G episodes of the task, whatever its agent or turn
               (rows are pooled, so an episode with more agent-turns weighs more in the mean)
    value:     reward  -- the episode's joint reward
    std:       on by default
    """
    groups, _ = group_index(table.task)
    return normalize_with_config(table.reward, groups, config, scale_default=True)
