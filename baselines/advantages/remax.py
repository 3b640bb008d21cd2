"""ReMax (Li et al. 2023, arXiv 2310.10505): the greedy rollout's return is the baseline.

The trainer's rollout plays, for every task, ONE greedily decoded episode in the same rollout call as
the G sampled ones (``rollout.sample(..., greedy_baseline=True)``) and writes its return-to-go into
the ``baseline`` column. (CoMLRL's "MAReMax" subtracts the group's MAX return instead; this is the
ReMax paper's greedy baseline.)
"""

from __future__ import annotations

import numpy as np

from baselines.advantages.config import AdvantageConfig, AdvantageResult
from baselines.advantages.magrpo import sibling_returns
from baselines.advantages.normalize import normalize_with_config, with_advantages
from baselines.samples import SampleTable


def remax(table: SampleTable, config: AdvantageConfig) -> AdvantageResult:
    """A sample's return minus the return of the greedy rollout of its task.

        A_i = R_i - R_greedy

    value:     return_to_go R_t, as MAGRPO (filled from the tree when the column is all NaN)
    baseline:  ``table.baseline``: the greedy episode's return-to-go from the row's turn (turn 0: the
               ReMax baseline itself; later turns: the same greedy episode's rest, a baseline that
               does not depend on the sampled actions, so the gradient stays unbiased)
    groups:    MAGRPO's (task, sibling state, agent, turn), for the statistics only
    std:       none (``scale_by_std=True`` and ``drop_zero_variance`` are errors); every row is kept
    """
    config.refuse_group_options("remax")
    bad = np.flatnonzero(np.isnan(table.baseline))
    if bad.size:
        raise ValueError(f"remax needs the greedy rollout's return in the 'baseline' column (NaN at rows "
                         f"{bad[:5].tolist()}): sample with rollout.mode=episodes, whose trainer rollout plays it")
    returns, groups = sibling_returns(table, config)
    res = normalize_with_config(returns, groups, config, scale_default=False)
    return with_advantages(res, returns - table.baseline, keep_all=True)
