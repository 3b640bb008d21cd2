"""The metrics of one training step, logged by AGENT name (``agent/<name>/...``).

Reward, advantage mean/std, gradient norm, KL, clip fraction, entropy, response length, the
share of the agent's sample groups whose values are all equal (``zero_var_groups``: no signal),
the agent's reward statistics mu_k / sigma_k and the Dr. MAS amplification factor, per policy
gradient norms; :func:`progress_line` is the one-line console summary.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from baselines import rollout
from baselines.advantages import AdvantageResult, agent_reward_stats
from baselines.advantages.config import AdvantageConfig

PER_AGENT_MEANS = ("grad_norm", "approx_kl", "kl_ref", "clip_frac", "entropy", "loss", "ratio_mean",
                   "clip_frac_low", "clip_frac_high")


def mean(values: list[float]) -> float:
    """Mean of ``values``; NaN for an empty list."""
    return float(sum(values) / len(values)) if values else float("nan")


def step_metrics(result: rollout.RolloutResult, adv: AdvantageResult, update: dict[str, Any], agents: list[str],
                 advantage_config: AdvantageConfig) -> dict[str, float]:
    """Metrics of a step from its rollout, advantages and the update's per-agent / per-set lists."""
    table = result.table
    m: dict[str, float] = {
        "reward": mean(result.returns),
        "reward_std": float(np.std(result.returns)) if result.returns else float("nan"),
        "n_rows": float(len(table)),
        "n_trained_rows": float(update["rows"]),
        "skipped_updates": float(update["skipped"]),
    }
    m.update({f"adv/{k}": v for k, v in adv.stats.items()})
    m.update({f"rollout/{k}": float(v) for k, v in result.info.items() if isinstance(v, (int, float))})
    stats = agent_reward_stats(table, advantage_config, values=adv.values)
    lengths = table.completion_lengths
    for agent in agents:
        rows = table.agent == agent
        p = f"agent/{agent}/"
        if rows.any():
            a = adv.advantages[rows]
            m.update({p + "reward": float(table.reward[rows].mean()), p + "adv_mean": float(a.mean()),
                      p + "adv_std": float(a.std()), p + "response_len": float(lengths[rows].mean()),
                      p + "n_rows": float(rows.sum()),
                      p + "zero_var_groups": zero_variance_share(adv.groups[rows], adv.values[rows])})
        if agent in stats:
            s = stats[agent]
            m.update({p + "mu": s.mu, p + "sigma": s.sigma, p + "amplification": s.amplification})
        for key, values in update["per_agent"].get(agent, {}).items():
            name = {"approx_kl": "kl", "kl_ref": "kl_ref"}.get(key, key)
            if key in PER_AGENT_MEANS:
                m[p + name] = mean(values)
            if key == "grad_norm":
                m[p + "grad_norm_max"] = float(max(values))
    for key, values in update["per_set"].items():
        m[f"policy/{key}/grad_norm"] = mean(values)
    return m


def zero_variance_share(groups: np.ndarray, values: np.ndarray) -> float:
    """Share of the groups of more than one row whose ``values`` are all equal (NaN: no such group)."""
    by_group: dict[int, list[float]] = {}
    for g, v in zip(groups.tolist(), values.tolist()):
        by_group.setdefault(g, []).append(v)
    sizes = [v for v in by_group.values() if len(v) > 1]
    return float(np.mean([max(v) == min(v) for v in sizes])) if sizes else float("nan")


def progress_line(step: int, m: dict[str, float], agents: list[str]) -> str:
    """``step N  reward R  <agent> |g| G ...  S s/step``."""
    parts = [f"step {step:4d}", f"reward {m['reward']:.3f}"]
    for agent in agents:
        g = m.get(f"agent/{agent}/grad_norm")
        if g is not None:
            parts.append(f"{agent} |g| {g:.3g}")
    parts.append(f"{m['time/step_s']:.2f}s/step")
    return "  ".join(parts)
