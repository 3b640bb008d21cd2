"""Advantage schemes: one function per scheme, ``fn(table, config) -> AdvantageResult``.

    from baselines.advantages import AdvantageConfig, compute_advantages
    result = compute_advantages(table, "dr_mas", AdvantageConfig())
    result.advantages, result.keep, result.groups, result.values, result.stats
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from baselines.advantages.at_grpo import at_grpo
from baselines.advantages.config import AdvantageConfig, AdvantageResult
from baselines.advantages.dr_mas import AgentRewardStats, agent_reward_stats, agent_stats_log, dr_mas
from baselines.advantages.gae import gae, iac, maac
from baselines.advantages.grpo import grpo
from baselines.advantages.magrpo import magrpo, magrpo_returns, sibling_returns
from baselines.advantages.mars2 import mars2, overlong_penalty, tree_shaping
from baselines.advantages.normalize import NonFiniteAdvantageError, group_index, group_normalize
from baselines.advantages.reinforce import reinforce
from baselines.advantages.remax import remax
from baselines.advantages.rloo import rloo
from baselines.advantages.sharp import credit_informativeness, sharp, sharp_rewards
from baselines.samples import SampleTable

AdvantageFn = Callable[[SampleTable, AdvantageConfig], AdvantageResult]

#: name -> scheme; read-only constant
ADVANTAGE_SCHEMES: Mapping[str, AdvantageFn] = MappingProxyType(
    {
        "grpo": grpo,
        "magrpo": magrpo,
        "at_grpo": at_grpo,
        "mars2": mars2,
        "dr_mas": dr_mas,
        "sharp": sharp,
        "rloo": rloo,
        "remax": remax,
        "reinforce": reinforce,
        "iac": iac,
        "maac": maac,
    }
)

#: schemes whose advantages sum to zero within every group (a group-mean baseline, possibly rescaled);
#: the others subtract a baseline that is not the group's (ReMax's greedy return, none, a critic's value)
GROUP_CENTERED: frozenset[str] = frozenset({"grpo", "magrpo", "at_grpo", "mars2", "dr_mas", "sharp", "rloo"})
#: schemes that read a learned critic's estimates in the ``value`` column (the trainer fills it)
CRITIC_SCHEMES: frozenset[str] = frozenset({"iac", "maac"})


def compute_advantages(
    table: SampleTable, scheme: str, config: AdvantageConfig | None = None
) -> AdvantageResult:
    """Run the scheme called ``scheme`` (a key of ``ADVANTAGE_SCHEMES``) on ``table``."""
    if scheme not in ADVANTAGE_SCHEMES:
        raise ValueError(f"unknown advantage scheme {scheme!r}; known: {sorted(ADVANTAGE_SCHEMES)}")
    return ADVANTAGE_SCHEMES[scheme](table, config or AdvantageConfig())


__all__ = [
    "ADVANTAGE_SCHEMES",
    "CRITIC_SCHEMES",
    "GROUP_CENTERED",
    "AdvantageConfig",
    "AdvantageFn",
    "AdvantageResult",
    "AgentRewardStats",
    "NonFiniteAdvantageError",
    "agent_reward_stats",
    "agent_stats_log",
    "at_grpo",
    "compute_advantages",
    "credit_informativeness",
    "dr_mas",
    "gae",
    "grpo",
    "group_index",
    "group_normalize",
    "iac",
    "maac",
    "magrpo",
    "magrpo_returns",
    "mars2",
    "overlong_penalty",
    "reinforce",
    "remax",
    "rloo",
    "sharp",
    "sharp_rewards",
    "sibling_returns",
    "tree_shaping",
]
