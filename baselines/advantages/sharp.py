"""SHARP, arXiv 2602.08335 (algorithms.md section 5)."""

from __future__ import annotations

from dataclasses import replace

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
    stats:     also ``credit_informative_frac`` (see :func:`credit_informativeness`)
    """
    groups, _ = group_index(table.task, table.agent)
    result = normalize_with_config(sharp_rewards(table, config), groups, config, scale_default=True)
    if config.lambda_s != 0 and len(table):
        result.stats.update(credit_informativeness(table, config, result))
    return result


def credit_informativeness(
    table: SampleTable, config: AdvantageConfig, result: AdvantageResult | None = None, tol: float = 1e-4
) -> dict[str, float]:
    """Whether the Shapley credit changes SHARP's advantages at all, group by group.

    Per-agent normalization cancels any credit that is an affine function of the joint
    reward within a (task, agent) group (phi_k = a + b * R gives the same normalized values
    as R): then SHARP is Dr. MAS (plus the tool term). This compares SHARP's advantages with
    the same scheme at ``lambda_s = 0`` and counts the groups of >= 2 rows where any row
    differs by more than ``tol`` (advantages are O(1); eps alone moves them by ~1e-6).

    Returns ``credit_groups`` (groups of >= 2 rows), ``credit_informative_groups`` and
    ``credit_informative_frac`` (their ratio; 0 when there is no such group).
    """
    result = result or sharp(table, config)
    groups, _ = group_index(table.task, table.agent)
    without = normalize_with_config(sharp_rewards(table, replace(config, lambda_s=0.0)), groups, config,
                                    scale_default=True)
    diff = np.abs(result.advantages - without.advantages) > tol
    sizes = np.bincount(groups)
    changed = np.bincount(groups, weights=diff.astype(np.float64)) > 0
    real = sizes >= 2
    n, k = int(real.sum()), int((changed & real).sum())
    return {"credit_groups": float(n), "credit_informative_groups": float(k),
            "credit_informative_frac": k / n if n else 0.0}


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
