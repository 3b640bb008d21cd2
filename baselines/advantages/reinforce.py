"""REINFORCE (Williams 1992) without a baseline: CoMLRL's MA-REINFORCE, the MAGRPO trainer with b = 0."""

from __future__ import annotations

from baselines.advantages.config import AdvantageConfig, AdvantageResult
from baselines.advantages.magrpo import sibling_returns
from baselines.advantages.normalize import normalize_with_config, with_advantages
from baselines.samples import SampleTable


def reinforce(table: SampleTable, config: AdvantageConfig) -> AdvantageResult:
    """The return itself is the advantage.

        A_i = R_i

    value:  return_to_go R_t, as MAGRPO (filled from the tree when the column is all NaN)
    groups: MAGRPO's (task, sibling state, agent, turn), for the statistics only
    std:    none (``scale_by_std=True`` and ``drop_zero_variance`` are errors); every row is kept
    """
    config.refuse_group_options("reinforce")
    returns, groups = sibling_returns(table, config)
    res = normalize_with_config(returns, groups, config, scale_default=False)
    return with_advantages(res, returns, keep_all=True)
