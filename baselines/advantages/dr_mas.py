"""Dr. MAS, arXiv 2602.08847 (algorithms.md section 4)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from baselines.advantages.config import AdvantageConfig, AdvantageResult
from baselines.advantages.normalize import group_index, group_normalize, normalize_with_config
from baselines.samples import SampleTable


def dr_mas(table: SampleTable, config: AdvantageConfig) -> AdvantageResult:
    """Agent-wise normalization: each agent with its own reward statistics.

        A_i^k = (R_i - mu_k) / (sigma_k + eps)

    group key: (task, agent)
    value:     reward (the joint reward R_i)
    """
    groups, _ = group_index(table.task, table.agent)
    return normalize_with_config(table.reward, groups, config, scale_default=True)


@dataclass(frozen=True)
class AgentRewardStats:
    """Per-agent reward statistics over a batch, for logging (Dr. MAS section 4).

    mu, sigma: mean / std of the agent's values; global_mu, global_sigma: over all rows.
    amplification: (sigma_k^2 + (mu_k - mu)^2) / (sigma + eps)^2, the gradient second-moment
        factor of agent k under one global normalization of the whole batch.
    grpo_second_moment: mean over the agent's rows of A^2 with the task-pooled GRPO advantages
        actually used by ``grpo`` (equals ``amplification`` for a single-task batch with biased std).
    """

    count: int
    mu: float
    sigma: float
    global_mu: float
    global_sigma: float
    amplification: float
    grpo_second_moment: float


def agent_reward_stats(
    table: SampleTable, config: AdvantageConfig | None = None, values: np.ndarray | None = None
) -> dict[str, AgentRewardStats]:
    """``{agent: AgentRewardStats}``; ``values`` defaults to ``table.reward`` (pass SHARP's R_k)."""
    config = config or AdvantageConfig()
    values = table.reward if values is None else np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return {}
    ddof = 1 if config.unbiased_std else 0
    mu = values.mean()
    sigma = values.std(ddof=ddof) if len(values) > ddof else 0.0
    task_groups, _ = group_index(table.task)
    grpo_adv = group_normalize(values, task_groups, eps=config.eps, unbiased_std=config.unbiased_std).advantages
    agents, agent_of_row = np.unique(table.agent, return_inverse=True)
    out = {}
    for k, name in enumerate(agents.tolist()):  # loop over agents, not rows
        v = values[agent_of_row == k]
        sigma_k = v.std(ddof=ddof) if len(v) > ddof else 0.0
        out[name] = AgentRewardStats(
            count=len(v),
            mu=float(v.mean()),
            sigma=float(sigma_k),
            global_mu=float(mu),
            global_sigma=float(sigma),
            amplification=float((sigma_k**2 + (v.mean() - mu) ** 2) / (sigma + config.eps) ** 2),
            grpo_second_moment=float(np.mean(grpo_adv[agent_of_row == k] ** 2)),
        )
    return out


def agent_stats_log(stats: dict[str, AgentRewardStats], prefix: str = "dr_mas") -> dict[str, float]:
    """Flatten for a logger: ``{f"{prefix}/{agent}/{field}": value}``."""
    return {f"{prefix}/{agent}/{key}": float(val)
            for agent, s in stats.items() for key, val in vars(s).items()}
