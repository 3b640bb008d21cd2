"""Aligned joint actions expanding a tree (MAGRPO, arXiv 2508.04652).

Each task grows ``episodes_per_task`` trees. At every node whose depth is below
``tree_depth``, the node's state is cloned G times; on clone g every agent of the turn
generates its response (an agent scheduled after another sees that one's g-th answer, as
the task dictates), so the g-th responses of all agents form joint action g. Each joint
action is one child node (its turn's joint reward is the node reward); children that did
not end the episode are expanded in turn. Past ``tree_depth`` a node gets a single child
(the episode continues without branching), which bounds the tree at G^tree_depth leaves.
All copies at one tree level are played in lock-step with batched ``generate`` calls.

Rows (one per agent per node): ``node`` = the child's id, ``parent`` = the node it was
expanded from (-1 = root), ``depth`` = its turn depth, ``group`` = the parent state id
(the G siblings of one agent form MAGRPO's group), ``reward`` = the node's turn reward,
``return_to_go`` = R = r + gamma * mean(R of the children) (leaves: R = r), computed by
:func:`baselines.advantages.magrpo_returns` from these node/parent links.
"""

from __future__ import annotations

from collections.abc import Sequence

from baselines.advantages import magrpo_returns
from baselines.rollout.base import EnvPool, RolloutResult, Task, reset_copies
from baselines.rollout.common import (
    Generator,
    GenStats,
    Slot,
    is_done,
    play_lockstep,
    step_components,
    turn_rewards,
)
from baselines.samples import Row, SampleTable


def sample_joint_tree(
    pool: EnvPool,
    tasks: Sequence[Task],
    backend: Generator,
    *,
    group_size: int,
    tree_depth: int = 2,
    gamma: float = 0.9,
    episodes_per_task: int = 1,
    tool_reward_key: str = "tool_validity",
    max_steps: int = 1000,
) -> RolloutResult:
    """MAGRPO tree rollout with G = ``group_size`` joint actions per branching node."""
    frontier = [
        Slot(env=env, task=task.id, episode=e, node=-1, depth=0, meta={"counter": [0], "path": 0.0})
        for task in tasks
        for e, env in enumerate(reset_copies(pool, task, episodes_per_task))
    ]
    stats = GenStats()
    rows: list[Row] = []
    returns: list[float] = []
    for _ in range(max_steps):
        if not frontier:
            break
        children = []
        for parent in frontier:
            width = group_size if parent.depth < tree_depth else 1
            counter = parent.meta["counter"]
            for g in range(width):
                children.append(Slot(
                    env=parent.env.clone(), task=parent.task, episode=parent.episode, branch=g,
                    node=counter[0], parent=parent.node, depth=parent.depth,
                    group=f"{parent.task}/e{parent.episode}/n{parent.node}",
                    meta={"counter": counter, "turn": int(parent.env.unwrapped.turn), "path": parent.meta["path"]},
                ))
                counter[0] += 1
        play_lockstep(children, backend, stats, until=lambda s: s.env.unwrapped.turn > s.meta["turn"],
                      max_steps=max_steps)
        frontier = []
        for child in children:
            turn = child.meta["turn"]
            reward = turn_rewards(child.env)[turn]
            for sample in child.samples:
                comps = step_components(child.env, sample)
                rows.append(Row(
                    task=child.task, episode=child.episode, branch=child.branch, agent=sample.agent,
                    turn=sample.turn, node=child.node, parent=child.parent, depth=child.depth,
                    group=child.group, prompt_ids=sample.prompt_ids, completion_ids=sample.completion_ids,
                    old_logprobs=sample.logprobs, reward=reward, reward_components=comps,
                    tool_reward=float(comps.get(tool_reward_key, 0.0)),
                ))
            path = child.meta["path"] + reward
            if is_done(child.env):
                returns.append(path)
            else:
                frontier.append(Slot(env=child.env, task=child.task, episode=child.episode, node=child.node,
                                     depth=child.depth + 1, meta={"counter": child.meta["counter"], "path": path}))
    else:
        raise RuntimeError(f"trees did not finish within {max_steps} levels")
    table = SampleTable.from_rows(rows)
    table = table.replace(return_to_go=magrpo_returns(table, gamma))
    return RolloutResult(table, returns, stats)
