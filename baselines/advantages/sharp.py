"""SHARP, arXiv 2602.08335 (algorithms.md section 5)."""

from __future__ import annotations

import numpy as np

from baselines.advantages.config import AdvantageConfig, AdvantageResult
from baselines.advantages.normalize import group_index, normalize_with_config
from baselines.samples import SampleTable


def sharp(table: SampleTable, config: AdvantageConfig) -> AdvantageResult:
    """Shapley-credited per-agent reward, then agent-wise normalization as Dr. MAS.

        R_k = R_global + lambda_s * phi_k + lambda_p * R_tool,k
        A_i^k = (R_k,i - mu_k) / (sigma_k + eps)

    group key: (task, agent)
    value:     reward + lambda_s * credit + lambda_p * tool_reward (credit: see baselines.credit)
    """
    groups, _ = group_index(table.task, table.agent)
    return normalize_with_config(sharp_rewards(table, config), groups, config, scale_default=True)


def sharp_rewards(table: SampleTable, config: AdvantageConfig) -> np.ndarray:
    """Per-row R_k; raises if ``credit`` is NaN on any row while ``lambda_s != 0``."""
    if config.lambda_s == 0:
        credit = np.zeros(len(table))
    else:
        missing = np.flatnonzero(np.isnan(table.credit))
        if missing.size:
            raise ValueError(
                f"SHARP needs the credit column (phi_k) but it is NaN on {missing.size} row(s), "
                f"e.g. rows {missing[:5].tolist()}; compute it with baselines.credit or set lambda_s=0"
            )
        credit = table.credit
    return table.reward + config.lambda_s * credit + config.lambda_p * table.tool_reward
