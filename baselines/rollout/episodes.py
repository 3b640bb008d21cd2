"""G independent episodes per task (GRPO, Dr. MAS, SHARP).

Every task is reset once and cloned G times, so the G episodes start from the same
instance; all ``len(tasks) * G`` episodes are played in lock-step with one batched
``generate`` call per round. One row per agent-turn:

- ``reward``: the episode's joint return (sum of the turn rewards);
- ``return_to_go``: the discounted sum of the turn rewards from the row's turn on,
  sum_{t' >= t} gamma^(t' - t) r_t' (``gamma`` = ``advantage.gamma``; 1 = the plain sum);
- ``reward_components``: the components of the row's turn, as its agent saw them;
- ``tool_reward``: the agent's ``tool_reward_key`` component as last reported in the episode
  (tasks report it for "the episode so far", e.g. the planner/worker task's fraction of
  valid tool calls); 0 when the environment reports none;
- episodes the task marks ``infra_excluded`` (sandbox failure) are dropped and counted in
  ``info["infra_excluded_episodes"]``, never scored as a wrong answer;
- ``credit`` (SHARP, ``with_credit=True``): phi_k from the finished episode's
  ``coalition_value`` via :mod:`baselines.credit` (exact Shapley or single mask);
- ``step`` (the agent-step's index in the episode) and ``turn_reward`` (the team reward of the
  row's turn alone), the sequence the actor-critic schemes run GAE over;
- ``baseline`` (ReMax, ``greedy_baseline=True``): each task also plays ONE greedy episode (temperature
  0), in lock-step with its G sampled ones in this same rollout call (a second ``generate`` call per
  round); a row at turn t gets that episode's return-to-go from turn t (0 past its end). The greedy
  episode is not a training row; a task whose greedy episode the task marks ``infra_excluded`` is
  dropped whole (counted in ``info["infra_excluded_episodes"]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from baselines.credit import compute_credit
from baselines.rollout.base import EnvPool, RolloutResult, Task, reset_copies
from baselines.rollout.common import (
    Generator,
    GenStats,
    Slot,
    episode_return,
    infra_excluded,
    play_lockstep,
    step_components,
    turn_rewards,
)
from baselines.samples import Row, SampleTable


def sample_episodes(
    pool: EnvPool,
    tasks: Sequence[Task],
    backend: Generator,
    *,
    group_size: int,
    with_credit: bool = False,
    credit_method: str = "shapley",
    credit_mode: str = "rescore",
    tool_reward_key: str = "tool_validity",
    max_steps: int = 1000,
    gamma: float = 1.0,
    greedy_baseline: bool = False,
) -> RolloutResult:
    """Play ``group_size`` episodes of every task; rows as described in the module docstring."""
    slots, stats = play_task_groups(pool, tasks, backend, group_size=group_size, max_steps=max_steps,
                                    greedy=greedy_baseline)
    greedy = {s.task: s for s in slots if s.meta.get("greedy")}
    spoiled = {task for task, s in greedy.items() if infra_excluded(s.env)}
    sampled = [s for s in slots if not s.meta.get("greedy")]
    kept = [s for s in sampled if not infra_excluded(s.env) and s.task not in spoiled]
    rows = [row for slot in kept for row in episode_rows(
        slot, with_credit=with_credit, credit_method=credit_method, credit_mode=credit_mode,
        tool_reward_key=tool_reward_key, gamma=gamma)]
    info: dict = {"infra_excluded_episodes": len(sampled) - len(kept) + len(spoiled)}
    if greedy_baseline:
        greedy_turns = {task: turn_rewards(s.env) for task, s in greedy.items()}
        for row in rows:
            row.baseline = return_from(greedy_turns[row.task], row.turn, gamma)
        info["greedy_return_mean"] = float(np.mean([episode_return(s.env) for s in greedy.values()]))
    return RolloutResult(SampleTable.from_rows(rows), [episode_return(s.env) for s in kept], stats, info=info)


def play_task_groups(
    pool: EnvPool, tasks: Sequence[Task], backend: Generator, *, group_size: int, max_steps: int = 1000,
    greedy: bool = False,
) -> tuple[list[Slot], GenStats]:
    """Reset ``group_size`` copies of every task (plus one greedily decoded copy with ``greedy``) and
    play them all to the end, in lock-step."""
    slots = [
        Slot(env=env, task=task.id, episode=g, branch=g, meta={"greedy": greedy and g == group_size})
        for task in tasks
        for g, env in enumerate(reset_copies(pool, task, group_size + int(greedy)))
    ]
    stats = GenStats()
    play_lockstep(slots, backend, stats, max_steps=max_steps)
    return slots, stats


def return_from(per_turn: dict[int, float], turn: int, gamma: float) -> float:
    """``sum_{t >= turn} gamma^(t - turn) r_t`` over the turn rewards ``per_turn`` (0 past the last turn)."""
    return float(sum(gamma ** (t - turn) * r for t, r in per_turn.items() if t >= turn))


def episode_rows(
    slot: Slot,
    *,
    with_credit: bool = False,
    credit_method: str = "shapley",
    credit_mode: str = "rescore",
    tool_reward_key: str = "tool_validity",
    gamma: float = 1.0,
) -> list[Row]:
    """Rows of one finished episode (see the module docstring)."""
    env = slot.env
    per_turn = turn_rewards(env)
    total = sum(per_turn.values())
    credit: dict[str, float] = {}
    if with_credit:
        credit = episode_credit(env, credit_method, credit_mode)
    tool: dict[str, float] = {}
    for result in env.unwrapped.record.turns:  # in turn order: the last report wins
        for agent, comps in result.agent_components.items():
            if tool_reward_key in comps:
                tool[agent] = float(comps[tool_reward_key])
    rows = []
    for sample in slot.samples:
        rows.append(Row(
            task=slot.task, episode=slot.episode, branch=slot.branch, agent=sample.agent, turn=sample.turn,
            node=slot.node, parent=slot.parent, depth=slot.depth, group=slot.group,
            prompt_ids=sample.prompt_ids, completion_ids=sample.completion_ids, old_logprobs=sample.logprobs,
            reward=total, step=sample.step_index, turn_reward=per_turn.get(sample.turn, 0.0),
            return_to_go=return_from(per_turn, sample.turn, gamma),
            reward_components=step_components(env, sample),
            tool_reward=tool.get(sample.agent, 0.0),
            credit=credit.get(sample.agent, float("nan")),
        ))
    return rows


def episode_credit(env: Any, method: str, mode: str) -> dict[str, float]:
    """phi_k of every agent of a finished episode from the env's ``coalition_value``."""
    inner = env.unwrapped
    if mode not in getattr(inner, "counterfactual_modes", ()):
        raise ValueError(
            f"{type(inner).__name__} does not support counterfactual mode {mode!r} needed for SHARP credit "
            f"(supported: {tuple(getattr(inner, 'counterfactual_modes', ()))})"
        )
    return compute_credit(lambda unmasked: inner.coalition_value(unmasked, mode=mode),
                          list(inner.possible_agents), method)  # type: ignore[arg-type]
