"""Per-turn branching from cloned states (AT-GRPO, arXiv 2510.11062).

Each task runs ``episodes_per_task`` main branches. Whenever agent i must act at turn t
on a main branch, the rollout:

1. clones the main state K times and samples K candidates for agent i from that one
   identical state (all candidates of all branches of all tasks in one ``generate`` call);
2. steps each candidate on ITS OWN copy, then finishes the turn on a further copy of it
   (the agents still due in this turn act with the current policy, sampled, batched), so
   the candidate is scored by the joint reward of the turn it was played in;
3. records the K candidates as one group (``group`` = a state id unique to this decision;
   ``branch`` = k; ``node``/``parent`` link each candidate to the candidate chosen at the
   previous decision of its branch);
4. continues the main branch from the best candidate's copy (greedy; ties go to the
   lowest k, and candidates are i.i.d. samples, so that is an unbiased tie-break).

Rewards on a row:
- ``reward``: the joint team reward of turn t on the candidate's own copy;
- ``local_reward``: the local reward r_local of AT-GRPO's r = alpha * r_team + r_local:
  the sum of the per-agent components the task DECLARES local for agent i
  (``local_reward_components``, see :func:`~baselines.rollout.common.local_reward`), read
  from that turn's ``TurnOutcome.agent_components``; 0 for agents and tasks that declare
  none (the signal game), so the group is then normalized on the team reward alone;
- ``reward_components``: the turn's components as agent i saw them on the copy.
The helper actions that finish a turn on a scoring copy are not training rows.
"""

from __future__ import annotations

from collections.abc import Sequence

from baselines.rollout.base import EnvPool, RolloutResult, Task, reset_copies
from baselines.rollout.common import (
    Generator,
    GenStats,
    Slot,
    generate,
    is_done,
    local_reward,
    play_lockstep,
    step_components,
    step_with,
    turn_rewards,
)
from baselines.samples import Row, SampleTable


def sample_branching(
    pool: EnvPool,
    tasks: Sequence[Task],
    backend: Generator,
    *,
    group_size: int,
    episodes_per_task: int = 1,
    tool_reward_key: str = "tool_validity",
    max_steps: int = 1000,
) -> RolloutResult:
    """AT-GRPO rollout with ``group_size`` = K candidates per agent-turn (module docstring)."""
    mains = [
        Slot(env=env, task=task.id, episode=e, meta={"next_node": 0, "chosen": -1, "decision": 0})
        for task in tasks
        for e, env in enumerate(reset_copies(pool, task, episodes_per_task))
    ]
    stats = GenStats()
    rows: list[Row] = []
    returns: list[float] = []
    for _ in range(max_steps):
        live = [m for m in mains if not is_done(m.env)]
        if not live:
            break
        candidates = [
            (main, k, Slot(env=main.env.clone(), task=main.task, episode=main.episode, branch=k))
            for main in live
            for k in range(group_size)
        ]
        outputs = generate(backend, [c.env for _, _, c in candidates], stats)
        for (_, _, cand), out in zip(candidates, outputs):
            step_with(cand, out)
        # finish the turn of every candidate on its own scoring copy (the candidate itself if it ended the turn)
        scorers = [Slot(env=c.env if _turn_over(c) else c.env.clone(), task=c.task, episode=c.episode,
                        meta={"turn": c.samples[0].turn})
                   for _, _, c in candidates]
        play_lockstep(scorers, backend, stats, until=lambda s: s.env.unwrapped.turn > s.meta["turn"],
                      max_steps=max_steps)
        best: dict[int, tuple[float, Slot]] = {}
        for (main, k, cand), scorer in zip(candidates, scorers):
            sample = cand.samples[0]
            reward = turn_rewards(scorer.env)[sample.turn]
            local = local_reward(scorer.env, sample.turn, sample.agent)
            comps = step_components(scorer.env, sample)
            decision = main.meta["decision"]
            node = main.meta["next_node"] + k
            rows.append(Row(
                task=main.task, episode=main.episode, branch=k, agent=sample.agent, turn=sample.turn,
                node=node, parent=main.meta["chosen"], depth=decision,
                group=f"{main.task}/e{main.episode}/d{decision}",
                prompt_ids=sample.prompt_ids, completion_ids=sample.completion_ids,
                old_logprobs=sample.logprobs, reward=reward, reward_components=comps,
                local_reward=local, tool_reward=float(comps.get(tool_reward_key, 0.0)),
            ))
            returns.append(reward)
            key = id(main)
            if key not in best or reward > best[key][0]:
                best[key] = (reward, cand)
        for main in live:
            _, chosen = best[id(main)]
            main.meta["chosen"] = main.meta["next_node"] + chosen.branch
            main.meta["next_node"] += group_size
            main.meta["decision"] += 1
            main.env = chosen.env
    else:
        raise RuntimeError(f"episodes did not end within {max_steps} decisions")
    return RolloutResult(SampleTable.from_rows(rows), returns, stats,
                         info={"greedy_return_mean": _mean([float(m.env.unwrapped.record.total_reward)
                                                            for m in mains])})


def _turn_over(slot: Slot) -> bool:
    return is_done(slot.env) or slot.env.unwrapped.turn > slot.samples[0].turn


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0
