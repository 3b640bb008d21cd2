"""Actor-critic advantages: GAE over turns (Schulman et al. 2016, arXiv 1506.02438) with a learned value.

IAC (independent actor-critic) gives each agent its own critic V_i(h_i) of its own history; MAAC
(multi-agent actor-critic, CoMA-style centralized critic, Lowe et al. 2017 / Foerster et al. 2018)
one critic V(h) of the joint observation. The trainer's critic (:mod:`baselines.critic`) writes
its estimates into the ``value`` column; here they only meet the rewards:

    delta_t = r_t + gamma V(h_{t+1}) - V(h_t)          (V after the episode's end = 0)
    A_t     = sum_l (gamma lambda)^l delta_{t+l}
    target  = A_t + V(h_t)                              (the critic's regression target, ``values``)

Time is the TURN: rows of one sequence are ordered by ``step``; consecutive rows of one turn are
one time step apart with discount 1 (the turn's reward ``turn_reward`` is credited at the
sequence's last row of that turn, the others get r = 0), rows d turns apart with gamma^d and
(gamma lambda)^d.
"""

from __future__ import annotations

import numpy as np

from baselines.advantages.config import AdvantageConfig, AdvantageResult
from baselines.advantages.normalize import group_index, group_normalize, with_advantages
from baselines.samples import SampleTable


def iac(table: SampleTable, config: AdvantageConfig) -> AdvantageResult:
    """GAE over each agent's own rows, with the agent's own critic.

    sequence: the rows of one (task, episode, agent), ordered by ``step``
    value:    ``table.value`` = V_i(h_i,t), agent i's critic on its own observation
    """
    sequence, _ = group_index(table.task, table.episode, table.agent)
    return gae(table, sequence, config, "iac")


def maac(table: SampleTable, config: AdvantageConfig) -> AdvantageResult:
    """GAE over every row of an episode, with one centralized critic.

    sequence: the rows of one (task, episode), all agents, ordered by ``step``
    value:    ``table.value`` = V(h_t), the central critic on the joint observation when the row acted
    """
    sequence, _ = group_index(table.task, table.episode)
    return gae(table, sequence, config, "maac")


def gae(table: SampleTable, sequence: np.ndarray, config: AdvantageConfig, scheme: str) -> AdvantageResult:
    """GAE of every row along the row sequences ``sequence`` (module docstring); groups = sequences."""
    config.refuse_group_options(scheme)
    for name, bad in (("value", np.isnan(table.value)), ("turn_reward", np.isnan(table.turn_reward)),
                      ("step", table.step < 0)):
        if bad.any():
            raise ValueError(f"{scheme} needs the {name!r} column (missing at rows {np.flatnonzero(bad)[:5].tolist()}):"
                             f" train it with scheme={scheme} (its critic fills 'value') on rollout.mode=episodes")
    n = len(table)
    order = np.lexsort((table.step, sequence))
    seq, turn = sequence[order], table.turn[order]
    if np.any((seq[1:] == seq[:-1]) & (table.step[order][1:] == table.step[order][:-1])):
        raise ValueError(f"{scheme}: two rows of one sequence share a step index")
    has_next = np.zeros(n, dtype=bool)
    has_next[:-1] = seq[1:] == seq[:-1]
    gap = np.zeros(n, dtype=np.int64)
    gap[:-1] = turn[1:] - turn[:-1]
    gap = np.where(has_next, gap, 0)
    if np.any(gap < 0):
        raise ValueError(f"{scheme}: a row's turn is earlier than the turn of the row before it (order by 'step')")
    value = table.value[order]
    next_value = np.where(has_next, np.append(value[1:], 0.0), 0.0)
    reward = np.where(~has_next | (gap > 0), table.turn_reward[order], 0.0)  # credited at the turn's last row
    discount = np.where(has_next, config.gamma ** gap.astype(np.float64), 0.0)
    delta = reward + discount * next_value - value
    trace = discount * config.gae_lambda ** gap.astype(np.float64)
    adv = np.zeros(n)
    running = 0.0
    for i in range(n - 1, -1, -1):  # backwards; `trace` is 0 at each sequence's last row
        running = delta[i] + trace[i] * running
        adv[i] = running
    advantages = np.empty(n)
    advantages[order] = adv
    res = group_normalize(advantages + table.value, sequence, scale_by_std=False,
                          expected_group_size=config.expected_group_size)
    return with_advantages(res, advantages, keep_all=True)
