"""Cross joint actions expanding a tree (MAGRPO's "cross" mode, arXiv 2508.04652; CoMLRL ``joint_mode="cross"``).

At a branching node (depth < ``tree_depth``) every agent answers G times and EVERY combination of the
agents' answers of the turn becomes a child node. The agents of a turn-based (AEC) task act one after
another, so the turn is expanded agent-step by agent-step: every partial joint action (the answers
given so far this turn, each on its own environment copy) asks its current agent for G answers, and
each answer extends it. Answers are sampled once per distinct observation: an agent whose prompt does
not depend on its teammates' answers of this turn gives the same G answers to every partial action
(the Cartesian product proper), an agent that reads a teammate's answer of this turn (the listener
reads the message) answers G times after each distinct one. Either way a branching node has
G^k children, k = the agent-steps of its turn. Past ``tree_depth`` a node gets one child (G = 1).

**Tree size.** The branching part of a tree has (G^k)^d nodes at depth d = 1..tree_depth, so
sum_d (G^k)^d nodes and (G^k)^tree_depth leaves, each of which then continues as one chain
(:func:`branching_nodes`). Before sampling, the bound with k = the number of agents is checked
against ``max_tree_nodes``, and while sampling every tree's node count is: beyond it, a
``ValueError`` that states the size, never a run that silently explodes.

Tree i of the rollout (task i) is ``episode`` i. Rows, ONE per distinct answer (an answer belongs to several joint actions, so ``node = -1``):
``parent`` = the node the turn expanded from, ``depth`` = its depth, ``group`` = the observation the
answer was sampled from (its G sibling answers: MAGRPO's group), ``step`` = the agent-step's index in
the episode, ``return_to_go`` = the mean, over the child nodes that contain the answer, of their
MAGRPO return R = r + gamma * mean(R of the children) (:func:`baselines.advantages.magrpo_returns`
on the joint-action tree), ``reward`` / ``turn_reward`` = the mean turn reward of those children,
``reward_components`` = the turn's components as the agent saw them in the first of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from baselines.advantages import magrpo_returns
from baselines.rollout.base import EnvPool, RolloutResult, Task, reset_copies
from baselines.rollout.common import Generator, GenStats, generate, is_done, turn_rewards
from baselines.samples import Row, SampleTable


@dataclass
class _Node:
    """A joint-action node of one tree: its environment copy and where it sits."""

    env: Any
    task: str
    tree: int
    node: int
    depth: int
    path: float = 0.0  #: the rewards of the turns from the root to this node


@dataclass
class _Partial:
    """The answers of this turn so far (indices into the level's answers), on their own copy."""

    env: Any
    parent: _Node
    answers: list[int] = field(default_factory=list)


def branching_nodes(group_size: int, steps_per_turn: int, tree_depth: int) -> int:
    """Nodes of a cross tree's branching part: sum_{d=1..tree_depth} (G^k)^d (module docstring)."""
    width = group_size**steps_per_turn
    return sum(width**d for d in range(1, tree_depth + 1))


def sample_cross_tree(
    pool: EnvPool,
    tasks: Sequence[Task],
    backend: Generator,
    *,
    group_size: int,
    tree_depth: int = 1,
    gamma: float = 0.9,
    max_tree_nodes: int = 4096,
    tool_reward_key: str = "tool_validity",
    max_steps: int = 1000,
) -> RolloutResult:
    """MAGRPO cross-mode rollout, one tree per task (module docstring)."""
    roots = [_Node(reset_copies(pool, task, 1)[0], task.id, i, -1, 0) for i, task in enumerate(tasks)]
    if roots:
        k = len(roots[0].env.unwrapped.possible_agents)
        bound = branching_nodes(group_size, k, tree_depth)
        if bound > max_tree_nodes:
            raise ValueError(_too_big(f"{bound} branching nodes (with {k} agent-steps per turn)", group_size,
                                      tree_depth, max_tree_nodes))
    stats = GenStats()
    answers: list[dict[str, Any]] = []  # one per distinct answer: its row fields and the children holding it
    nodes: list[Row] = []  # one per joint-action node (agent "joint"), for magrpo_returns
    counts: dict[int, int] = {}  # tree -> nodes so far
    returns: list[float] = []
    frontier = roots
    for _ in range(max_steps):
        if not frontier:
            break
        children = _expand_turn(frontier, backend, stats, group_size, tree_depth, answers, max_steps)
        frontier = []
        for partial in children:
            parent = partial.parent
            counts[parent.tree] = counts.get(parent.tree, 0) + 1
            if counts[parent.tree] > max_tree_nodes:
                raise ValueError(_too_big(f"more than {max_tree_nodes} nodes", group_size, tree_depth,
                                          max_tree_nodes))
            turn = answers[partial.answers[0]]["turn"]
            reward = turn_rewards(partial.env)[turn]
            child = _Node(partial.env, parent.task, parent.tree, counts[parent.tree] - 1, parent.depth + 1,
                          parent.path + reward)
            nodes.append(Row(child.task, child.tree, "joint", reward, turn=turn, node=child.node,
                             parent=parent.node, depth=parent.depth))
            for a in partial.answers:
                answers[a]["children"].append(len(nodes) - 1)
                answers[a].setdefault("env", partial.env)
            if is_done(partial.env):
                returns.append(child.path)
            else:
                frontier.append(child)
    else:
        raise RuntimeError(f"trees did not finish within {max_steps} levels")
    node_table = SampleTable.from_rows(nodes)
    node_return = magrpo_returns(node_table, gamma)
    rows = [_answer_row(a, node_table.reward, node_return, tool_reward_key) for a in answers]
    return RolloutResult(SampleTable.from_rows(rows), returns, stats,
                         info={"tree_nodes_per_task": float(np.mean(list(counts.values()))) if counts else 0.0})


def _expand_turn(frontier: list[_Node], backend: Generator, stats: GenStats, group_size: int, tree_depth: int,
                 answers: list[dict[str, Any]], max_steps: int) -> list[_Partial]:
    """Every combination of answers of the turn of every frontier node, in lock-step rounds (one
    ``generate`` call per agent-step round for all nodes), G answers per distinct observation."""
    partials = [_Partial(node.env.clone(), node) for node in frontier]
    turn_of = {id(node): int(node.env.unwrapped.turn) for node in frontier}
    for _ in range(max_steps):
        live = [p for p in partials if not is_done(p.env) and p.env.unwrapped.turn == turn_of[id(p.parent)]]
        if not live:
            return partials
        by_obs: dict[tuple, list[_Partial]] = {}
        for p in live:
            agent = p.env.agent_selection
            key = (id(p.parent), agent, tuple((m["role"], m["content"]) for m in p.env.observe_chat(agent)))
            by_obs.setdefault(key, []).append(p)
        widths = [group_size if group[0].parent.depth < tree_depth else 1 for group in by_obs.values()]
        envs = [group[0].env for group, w in zip(by_obs.values(), widths) for _ in range(w)]
        outputs = iter(generate(backend, envs, stats))
        done = {id(p) for p in live}
        grown = [p for p in partials if id(p) not in done]
        for index, (group, width) in enumerate(zip(by_obs.values(), widths)):
            rep = group[0]
            for g in range(width):
                out = next(outputs)
                answers.append({"task": rep.parent.task, "tree": rep.parent.tree, "agent": rep.env.agent_selection,
                                "turn": int(rep.env.unwrapped.turn), "parent": rep.parent.node,
                                "depth": rep.parent.depth, "branch": g, "output": out,
                                "step": len(rep.env.unwrapped.record.steps), "children": [],
                                "group": f"{rep.parent.task}/e{rep.parent.tree}/n{rep.parent.node}/o{index}"})
                for p in group:
                    env = p.env.clone()
                    env.step(out.text)
                    grown.append(_Partial(env, p.parent, [*p.answers, len(answers) - 1]))
        partials = grown
    raise RuntimeError(f"a turn did not end within {max_steps} agent-steps")


def _answer_row(a: dict[str, Any], reward: np.ndarray, node_return: np.ndarray, tool_reward_key: str) -> Row:
    kids = a["children"]
    out = a["output"]
    comps = {k: float(v) for k, v in a["env"].unwrapped.record.steps[a["step"]].reward_components.items()}
    turn_reward = float(np.mean(reward[kids]))
    return Row(task=a["task"], episode=a["tree"], agent=a["agent"], reward=turn_reward, turn=a["turn"],
               branch=a["branch"], node=-1, parent=a["parent"], depth=a["depth"], group=a["group"], step=a["step"],
               prompt_ids=list(out.prompt_ids), completion_ids=list(out.completion_ids),
               old_logprobs=[float(x) for x in out.logprobs], return_to_go=float(np.mean(node_return[kids])),
               turn_reward=turn_reward, reward_components=comps, tool_reward=float(comps.get(tool_reward_key, 0.0)))


def _too_big(what: str, group_size: int, tree_depth: int, cap: int) -> str:
    return (f"cross joint sampling grows as the product of the agents' branching, (G^k)^d nodes at depth d: "
            f"G={group_size}, tree_depth={tree_depth} gives {what} per tree > rollout.max_tree_nodes={cap}; "
            "lower rollout.group_size or rollout.tree_depth, or raise rollout.max_tree_nodes")
