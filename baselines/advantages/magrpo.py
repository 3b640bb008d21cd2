"""MAGRPO, arXiv 2508.04652 (algorithms.md section 1)."""

from __future__ import annotations

import numpy as np

from baselines.advantages.config import AdvantageConfig, AdvantageResult
from baselines.advantages.normalize import group_index, normalize_with_config
from baselines.advantages.tree import lookup_nodes, node_depths, sibling_key
from baselines.samples import SampleTable


def magrpo(table: SampleTable, config: AdvantageConfig) -> AdvantageResult:
    """Per-node, per-agent group over the G siblings generated from one node.

        A_t^(g) = R_t^(g) - mean_{g'} R_t^(g')             (paper; default, no std)
        A_t^(g) = (R_t^(g) - mean) / (std + eps)           (scale_by_std=True)

    group key: (task, sibling state, agent, turn); sibling state = the ``group`` id where the
               sampler set it, else the parent node (episode, parent); ``parent = -1`` is the
               task's initial state, shared by all episodes of the task (see tree.sibling_key)
    value:     return_to_go R_t = r_t + gamma * mean(R of the children). If the column is NaN
               on every row it is computed here with ``magrpo_returns(table, config.gamma)``.
    With one agent this is GRPO over the same siblings (identical with ``scale_by_std=True``).
    """
    returns, groups = sibling_returns(table, config)
    return normalize_with_config(returns, groups, config, scale_default=False)


def sibling_returns(table: SampleTable, config: AdvantageConfig) -> tuple[np.ndarray, np.ndarray]:
    """MAGRPO's value and group of every row: (return-to-go R_t, dense group id over
    (task, sibling state, agent, turn)). Shared by the baselines of the same trainer (RLOO, ReMax,
    REINFORCE). The return-to-go is filled from the tree when the column is all NaN."""
    returns = table.return_to_go
    if len(table) and np.all(np.isnan(returns)):
        returns = magrpo_returns(table, config.gamma)
    elif np.any(np.isnan(returns)):
        rows = np.flatnonzero(np.isnan(returns))[:5].tolist()
        raise ValueError(f"return_to_go is NaN at rows {rows}; fill it for every row or for none")
    groups, _ = group_index(table.task, sibling_key(table), table.agent, table.turn)
    return returns, groups


def magrpo_returns(table: SampleTable, gamma: float) -> np.ndarray:
    """Return-to-go of every row from the node/parent links and the per-node rewards.

        R(node) = r(node) + gamma * mean_{children c of node} R(c),   R(leaf) = r(leaf)

    Rows with ``node == -1`` (no tree) get R = reward. All rows of one node (the N agents of
    one joint action) must carry the same reward and parent; node ids are unique within
    ``(task, episode)``. Usage: ``table = table.replace(return_to_go=magrpo_returns(table, 0.9))``.
    """
    returns = table.reward.astype(np.float64).copy()
    rows = np.flatnonzero(table.node >= 0)
    if rows.size == 0:
        return returns
    task, episode = table.task[rows], table.episode[rows]
    node_of_row, n_nodes = group_index(task, episode, table.node[rows])
    _, first = np.unique(node_of_row, return_index=True)  # first row of each node
    _check_constant(table.reward[rows], node_of_row, first, "reward")
    _check_constant(table.parent[rows], node_of_row, first, "parent")

    parent_idx = lookup_nodes(task[first], episode[first], table.node[rows][first], table.parent[rows][first])
    depth = node_depths(parent_idx)
    r_node = table.reward[rows][first]
    node_return = r_node.copy()
    for d in range(int(depth.max()), 0, -1):  # children of level d-1 are final at level d
        child = depth == d
        total = np.bincount(parent_idx[child], weights=node_return[child], minlength=n_nodes)
        count = np.bincount(parent_idx[child], minlength=n_nodes)
        has = count > 0
        node_return[has] = r_node[has] + gamma * total[has] / count[has]
    returns[rows] = node_return[node_of_row]
    return returns


def _check_constant(column: np.ndarray, node_of_row: np.ndarray, first: np.ndarray, name: str) -> None:
    bad = np.flatnonzero(column != column[first][node_of_row])
    if bad.size:
        raise ValueError(f"rows of one node must share their {name}; row {bad[0]} of the tree rows differs")
