"""AT-GRPO, arXiv 2510.11062 "Stronger-MAS" (algorithms.md section 2)."""

from __future__ import annotations

from baselines.advantages.config import AdvantageConfig, AdvantageResult
from baselines.advantages.normalize import group_index, normalize_with_config
from baselines.advantages.tree import sibling_key
from baselines.samples import SampleTable


def at_grpo(table: SampleTable, config: AdvantageConfig) -> AdvantageResult:
    """Agent- and turn-wise groups of the K candidates sampled from one identical state.

        r = alpha * r_team + r_local
        A = (r - mean_{G_i,t} r) / (std_{G_i,t} r + eps)

    group key: (task, turn, agent, sibling state); sibling state = the ``group`` (state) id
               where the sampler set it, else the parent node (episode, parent), with
               ``parent = -1`` the task's initial state. ``task`` is always part of the key,
               so candidates of different problems never share a group.
    value:     alpha * reward + local_reward
    Set ``config.expected_group_size = K`` to assert that every group holds exactly K rows.
    """
    values = config.alpha * table.reward + table.local_reward
    groups, _ = group_index(table.task, table.turn, table.agent, sibling_key(table))
    return normalize_with_config(values, groups, config, scale_default=True)
