"""Rollout: play any registered environment with LLM policies and record the sample table.

One small module per sampling mode, all built on the lock-step batched player of
:mod:`baselines.rollout.common`:

=============  =========================  ===================================================
mode           module                     used by
=============  =========================  ===================================================
episodes       :mod:`.episodes`           GRPO, Dr. MAS, SHARP, RLOO, REINFORCE, IAC, MAAC (G independent
                                          episodes/task); ReMax (+ one greedy episode/task)
branching      :mod:`.branching`          AT-GRPO (K candidates per agent-turn, cloned state)
joint_tree     :mod:`.joint_tree`         MAGRPO (aligned joint actions expand a tree)
cross_tree     :mod:`.cross_tree`         MAGRPO's cross mode (every combination of answers is a child)
env_tree       :mod:`.env_tree`           MARS2 (the environment's own search tree)
=============  =========================  ===================================================

:func:`sample` dispatches on the mode; the result's :class:`~baselines.samples.SampleTable`
is the only thing the advantage schemes see.
"""

from __future__ import annotations

from collections.abc import Sequence

from baselines.rollout.base import EnvPool, RolloutResult, Task, reset_copies
from baselines.rollout.branching import sample_branching
from baselines.rollout.common import Generator, GenStats, Slot, play_lockstep
from baselines.rollout.cross_tree import branching_nodes, sample_cross_tree
from baselines.rollout.env_tree import has_search_tree, sample_env_tree
from baselines.rollout.episodes import episode_credit, sample_episodes
from baselines.rollout.joint_tree import sample_joint_tree

MODES = ("episodes", "branching", "joint_tree", "cross_tree", "env_tree")


def sample(
    mode: str,
    pool: EnvPool,
    tasks: Sequence[Task],
    backend: Generator,
    *,
    group_size: int,
    tree_depth: int = 2,
    gamma: float = 0.9,
    with_credit: bool = False,
    credit_method: str = "shapley",
    credit_mode: str = "rescore",
    tool_reward_key: str = "tool_validity",
    max_steps: int = 1000,
    greedy_baseline: bool = False,
    max_tree_nodes: int = 4096,
) -> RolloutResult:
    """Run the sampling ``mode`` on ``tasks`` with environments from ``pool`` (released at the end).

    ``gamma`` discounts the ``return_to_go`` column in every mode that fills it (episodes,
    joint_tree, cross_tree); the trainer passes ``advantage.gamma``, the one MAGRPO discount.
    ``greedy_baseline`` (ReMax) plays one greedy episode per task beside the sampled ones (episodes
    mode only); ``max_tree_nodes`` bounds a cross tree.
    """
    if greedy_baseline and mode != "episodes":
        raise ValueError(f"ReMax's greedy baseline rollout is played by rollout.mode=episodes, not {mode!r}")
    common = dict(group_size=group_size, tool_reward_key=tool_reward_key, max_steps=max_steps)
    try:
        if mode == "episodes":
            return sample_episodes(pool, tasks, backend, with_credit=with_credit, credit_method=credit_method,
                                   credit_mode=credit_mode, gamma=gamma, greedy_baseline=greedy_baseline, **common)
        if mode == "branching":
            return sample_branching(pool, tasks, backend, **common)
        if mode == "joint_tree":
            return sample_joint_tree(pool, tasks, backend, tree_depth=tree_depth, gamma=gamma, **common)
        if mode == "cross_tree":
            return sample_cross_tree(pool, tasks, backend, tree_depth=tree_depth, gamma=gamma,
                                     max_tree_nodes=max_tree_nodes, **common)
        if mode == "env_tree":
            return sample_env_tree(pool, tasks, backend, **common)
        raise ValueError(f"unknown rollout mode {mode!r}; known: {MODES}")
    finally:
        pool.release()


__all__ = [
    "MODES",
    "EnvPool",
    "GenStats",
    "Generator",
    "RolloutResult",
    "Slot",
    "Task",
    "branching_nodes",
    "episode_credit",
    "has_search_tree",
    "play_lockstep",
    "reset_copies",
    "sample",
    "sample_branching",
    "sample_cross_tree",
    "sample_env_tree",
    "sample_episodes",
    "sample_joint_tree",
]
