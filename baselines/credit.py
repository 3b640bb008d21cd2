"""Shapley credit for SHARP in the sample table (algorithms.md section 5).

The credit itself comes from :mod:`llm_marl_envs.core.credit` (exact Shapley or single-mask
marginals from an episode's ``coalition_value``); this module puts it into the table.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from baselines.samples import SampleTable
from llm_marl_envs.core.credit import (
    MAX_EXACT_AGENTS,
    CoalitionValue,
    CreditMethod,
    compute_credit,
    shapley_values,
    single_mask_credit,
)

__all__ = [
    "MAX_EXACT_AGENTS",
    "CoalitionValue",
    "CreditMethod",
    "compute_credit",
    "credit_column",
    "shapley_values",
    "single_mask_credit",
]


def credit_column(
    table: SampleTable, credit: Mapping[tuple[str, int], Mapping[str, float]]
) -> np.ndarray:
    """Per-row credit from ``{(task, episode): {agent: phi}}``; NaN where no credit is given.

    Usage: ``table = table.replace(credit=credit_column(table, credits))``.
    """
    out = np.full(len(table), np.nan)
    for i, (task, episode, agent) in enumerate(zip(table.task.tolist(), table.episode.tolist(),
                                                   table.agent.tolist(), strict=True)):
        phi = credit.get((task, episode))
        if phi is not None and agent in phi:
            out[i] = phi[agent]
    return out
