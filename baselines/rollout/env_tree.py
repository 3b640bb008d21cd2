"""The environment's own search tree (MARS2, arXiv 2602.07848).

A tree-search environment (``code/tree_search_v0``) grows one tree per episode: each agent
step writes one node. It exposes the tree as ``env.unwrapped.tree.to_records()`` -- dicts
with ``id``, ``parent_id``, ``depth``, ``agent``, ``turn`` and ``score`` (``None`` when the
sandbox failed: an infrastructure error, never a zero). After the episode every node
becomes one row: ``node`` = id, ``parent`` = parent_id, ``depth``, ``reward`` = the node's
score, matched to the agent-step of the node's turn. Nodes with an infrastructure error
are left out of the table (and counted in ``info["infra_errors"]``); whole episodes the task
marks ``infra_excluded`` are dropped (``info["infra_excluded_episodes"]``).

Environments without a tree of their own get a *flat tree* per task: the G independent
episodes hang under one root, every agent-turn is a node whose parent is the previous
agent-turn of its episode (-1 for the first), and its reward is the episode's joint
return. MARS2's tree-wide group is then every row of the task's G episodes (the same
pool as GRPO), which makes the scheme runnable on any task.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from baselines.rollout.base import EnvPool, RolloutResult, Task
from baselines.rollout.common import (
    Generator,
    Slot,
    episode_return,
    infra_excluded,
    step_components,
)
from baselines.rollout.episodes import episode_rows, play_task_groups
from baselines.samples import Row, SampleTable

#: node ids of episode g of a flat tree are g * _NODE_STRIDE + step
_NODE_STRIDE = 1_000_000


def has_search_tree(env: Any) -> bool:
    """Whether ``env`` exposes its own search tree (``unwrapped.tree.to_records()``)."""
    return callable(getattr(getattr(env.unwrapped, "tree", None), "to_records", None))


def sample_env_tree(
    pool: EnvPool,
    tasks: Sequence[Task],
    backend: Generator,
    *,
    group_size: int,
    tool_reward_key: str = "tool_validity",
    max_steps: int = 1000,
) -> RolloutResult:
    """One tree per episode, ``group_size`` episodes (trees) per task."""
    slots, stats = play_task_groups(pool, tasks, backend, group_size=group_size, max_steps=max_steps)
    dropped = [s for s in slots if infra_excluded(s.env)]
    slots = [s for s in slots if not infra_excluded(s.env)]
    if slots and has_search_tree(slots[0].env):
        rows, infra = [], 0
        for slot in slots:
            slot_rows, slot_infra = tree_rows(slot, tool_reward_key)
            rows.extend(slot_rows)
            infra += slot_infra
        return RolloutResult(SampleTable.from_rows(rows), [episode_return(s.env) for s in slots], stats,
                             info={"infra_errors": infra, "infra_excluded_episodes": len(dropped), "tree": "env"})
    rows = []
    for slot in slots:
        rows.extend(flat_tree_rows(slot, tool_reward_key))
    return RolloutResult(SampleTable.from_rows(rows), [episode_return(s.env) for s in slots], stats,
                         info={"infra_excluded_episodes": len(dropped), "tree": "flat"})


def tree_rows(slot: Slot, tool_reward_key: str = "tool_validity") -> tuple[list[Row], int]:
    """One row per scored node of the env's tree; returns (rows, number of infra-error nodes)."""
    records = slot.env.unwrapped.tree.to_records()
    by_turn = {s.turn: s for s in slot.samples}
    rows, infra = [], 0
    for rec in records:
        sample = by_turn.get(int(rec["turn"]))
        if sample is None or sample.agent != rec["agent"]:
            raise RuntimeError(f"tree node {rec['id']} (turn {rec['turn']}, agent {rec['agent']!r}) "
                               "matches no agent-step of the episode")
        if rec["score"] is None:
            infra += 1
            continue
        comps = step_components(slot.env, sample)
        rows.append(Row(
            task=slot.task, episode=slot.episode, branch=slot.branch, agent=sample.agent, turn=sample.turn,
            node=int(rec["id"]), parent=int(rec["parent_id"]), depth=int(rec["depth"]),
            prompt_ids=sample.prompt_ids, completion_ids=sample.completion_ids, old_logprobs=sample.logprobs,
            reward=float(rec["score"]), reward_components=comps,
            tool_reward=float(comps.get(tool_reward_key, 0.0)),
        ))
    return rows, infra


def flat_tree_rows(slot: Slot, tool_reward_key: str = "tool_validity") -> list[Row]:
    """Rows of one episode as a chain hanging under the task's root (module docstring)."""
    rows = episode_rows(slot, tool_reward_key=tool_reward_key)
    for i, row in enumerate(rows):
        row.episode = 0  # one tree per task
        row.node = slot.episode * _NODE_STRIDE + i
        row.parent = row.node - 1 if i else -1
        row.depth = i
    return rows
