"""MARS2, arXiv 2602.07848 (algorithms.md section 3)."""

from __future__ import annotations

import numpy as np

from baselines.advantages.config import AdvantageConfig, AdvantageResult
from baselines.advantages.normalize import group_index, normalize_with_config
from baselines.advantages.tree import lookup_nodes
from baselines.samples import SampleTable


def mars2(table: SampleTable, config: AdvantageConfig) -> AdvantageResult:
    """Tree-wide group: every node of one search tree, all agents, all depths.

        r'_k = r_k + gamma * (r_k - b_k)                                     (if shaping)
        b_k  = (1 - lambda) * r_parent + lambda * mean(siblings excluding k)
        r''_k = r'_k + overlong_penalty(|o_k|)                              (if overlong_max_len)
        A_k  = (r''_k - mean_tree r'') / (std_tree r'' + eps)

    group key: (task, episode) -- one tree per episode
    value:     reward, optionally shaped, then optionally length-penalized
    """
    values = table.reward.astype(np.float64)
    if config.shaping:
        values = tree_shaping(table, config.shaping_gamma, config.shaping_lambda)
    if config.overlong_max_len is not None:
        values = values + overlong_penalty(
            table.completion_lengths, config.overlong_max_len, config.overlong_buffer, config.overlong_penalty
        )
    groups, _ = group_index(table.task, table.episode)
    return normalize_with_config(values, groups, config, scale_default=True)


def tree_shaping(table: SampleTable, gamma: float, lam: float) -> np.ndarray:
    """Tree-consistent shaping r' = r + gamma * (r - b) with b from the parent and the siblings.

    One row per node (node ids unique within ``(task, episode)``, never -1): the authors never
    recorded parent ids, which made their shaping silently inert, so missing ids raise here.
    Siblings = the other nodes of the tree with the same ``parent``; nodes with ``parent = -1``
    (first candidates, children of the problem) are siblings of each other.
    Missing references (the documented choice):
      - parent and siblings:  b = (1 - lambda) * r_parent + lambda * mean(siblings)
      - parent, no sibling:   b = r_parent
      - root with siblings:   b = mean(siblings)
      - lone root:            b = r, so r' = r
    """
    r = table.reward.astype(np.float64)
    if np.any(table.node < 0):
        raise ValueError("MARS2 shaping needs node/parent ids on every row (node = -1 found)")
    parent_idx = lookup_nodes(table.task, table.episode, table.node, table.parent)
    has_parent = parent_idx >= 0
    r_parent = np.where(has_parent, r[np.maximum(parent_idx, 0)], np.nan)

    sib_group, n_sib = group_index(table.task, table.episode, table.parent)
    total = np.bincount(sib_group, weights=r, minlength=n_sib)
    n_other = np.bincount(sib_group, minlength=n_sib)[sib_group] - 1
    has_sib = n_other > 0
    sib_mean = np.where(has_sib, (total[sib_group] - r) / np.maximum(n_other, 1), np.nan)

    baseline = np.select(
        [has_parent & has_sib, has_parent, has_sib],
        [(1 - lam) * r_parent + lam * sib_mean, r_parent, sib_mean],
        default=r,
    )
    return r + gamma * (r - baseline)


def overlong_penalty(lengths: np.ndarray, max_len: int, buffer: int, factor: float = 1.0) -> np.ndarray:
    """DAPO soft overlong punishment (<= 0), added to the reward.

        0                                  if L <= max_len - buffer
        factor * (max_len - buffer - L) / buffer    if max_len - buffer < L <= max_len
        -factor                            if L > max_len
    """
    lengths = np.asarray(lengths, dtype=np.float64)
    start = max_len - buffer
    if buffer == 0:
        return np.where(lengths > max_len, -factor, 0.0)
    ramp = np.clip((start - lengths) / buffer, -1.0, 0.0)
    return factor * ramp
