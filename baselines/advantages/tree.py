"""Tree helpers on the sample table (sibling keys, parent links, depths), vectorized."""

from __future__ import annotations

import numpy as np

from baselines.advantages.normalize import group_index
from baselines.samples import SampleTable


def sibling_key(table: SampleTable) -> np.ndarray:
    """Id of the state each row was generated from, within a task (combine with ``task``).

    - the sampler's explicit ``group`` id where it is set;
    - else ``parent = -1``: the task's initial state, shared by every episode of the task;
    - else ``(episode, parent)``: the tree node the row was generated from.
    """
    pair, n_pair = group_index(table.episode, table.parent)
    named, _ = group_index(table.group)
    from_tree = np.where(table.parent < 0, n_pair, pair)
    return np.where(table.group != "", n_pair + 1 + named, from_tree)


def lookup_nodes(
    task: np.ndarray, episode: np.ndarray, node: np.ndarray, query: np.ndarray
) -> np.ndarray:
    """Index ``j`` with ``(task[j], episode[j], node[j]) == (task[i], episode[i], query[i])``, or -1.

    ``(task, episode, node)`` must be unique (one entry per node). Negative queries give -1.
    """
    n = len(node)
    codes, n_codes = group_index(
        np.concatenate([task, task]), np.concatenate([episode, episode]), np.concatenate([node, query])
    )
    node_codes, query_codes = codes[:n], codes[n:]
    if len(np.unique(node_codes)) != n:
        raise ValueError("node ids must be unique within each (task, episode)")
    index_of_code = np.full(n_codes, -1, dtype=np.int64)
    index_of_code[node_codes] = np.arange(n)
    found = np.where(query >= 0, index_of_code[query_codes], -1)
    missing = np.flatnonzero((query >= 0) & (found < 0))
    if missing.size:
        i = missing[0]
        raise ValueError(
            f"parent {query[i]} of node {node[i]} (task {task[i]!r}, episode {episode[i]}) is not in the table"
        )
    return found


def node_depths(parent_index: np.ndarray) -> np.ndarray:
    """Depth of every node from its parent index (-1 = root, depth 0); raises on a cycle."""
    depth = np.zeros(len(parent_index), dtype=np.int64)
    has_parent = parent_index >= 0
    for _ in range(len(parent_index) + 1):
        new = np.where(has_parent, depth[np.maximum(parent_index, 0)] + 1, 0)
        if np.array_equal(new, depth):
            return depth
        depth = new
    raise ValueError("parent links contain a cycle")
