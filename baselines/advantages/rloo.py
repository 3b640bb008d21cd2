"""RLOO, REINFORCE leave-one-out (Kool et al. 2019; Ahmadian et al. 2024, arXiv 2402.14740), on MAGRPO's groups.

CoMLRL's MARLOO: the MAGRPO trainer with the leave-one-out mean of the other siblings as baseline.
"""

from __future__ import annotations

import numpy as np

from baselines.advantages.config import AdvantageConfig, AdvantageResult
from baselines.advantages.magrpo import sibling_returns
from baselines.advantages.normalize import normalize_with_config, with_advantages
from baselines.samples import SampleTable


def rloo(table: SampleTable, config: AdvantageConfig) -> AdvantageResult:
    """Each sample's baseline is the mean return of the OTHER samples of its group.

        A_i = R_i - 1/(G-1) sum_{j != i} R_j  =  G/(G-1) (R_i - mean_g R)
        A_i = G/(G-1) (R_i - mean_g R) / (std_g R + eps)        (scale_by_std=True)

    group key: MAGRPO's, (task, sibling state, agent, turn): the G siblings of one state
    value:     return_to_go R_t (filled from the tree when the column is all NaN), as MAGRPO
    std:       off by default (the papers' RLOO)
    A group of one row has no other sample: A = 0 (``singleton="passthrough"``: A = R).
    """
    res = normalize_with_config(*sibling_returns(table, config), config, scale_default=False)
    count = np.bincount(res.groups)[res.groups] if len(table) else np.zeros(0)
    factor = np.where(count > 1, count / np.maximum(count - 1, 1), 1.0)
    return with_advantages(res, res.advantages * factor)
