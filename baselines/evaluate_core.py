"""Evaluating a team: play held-out episodes with batched generation and score them.

:func:`evaluate_team` plays ``episodes`` task instances, ``samples`` (k) sampled episodes each,
all in lock-step with one batched ``generate`` per round (:func:`baselines.rollout.play_lockstep`),
and returns an :class:`EvalReport`:

- mean joint return, with a 95% normal-approximation confidence interval over TASKS (each task's
  k samples are averaged first, so the interval is not narrowed by correlated samples);
- avg@k (mean fraction of the k samples that pass) and pass@k (fraction of tasks with at least
  one passing sample). An episode passes when its return reaches what the task's scripted
  ``best_policy`` scores on the same instance (the task's maximum there); every registered task
  has one, so the criterion needs no per-task code;
- per agent: format-error rate (steps with a format issue raised by the task's parser, or an
  empty action) and the issue kinds; mean of every reward component;
- one transcript per episode (prompt messages, action, format issues, rewards per step).

Held-out: task seeds are drawn from ``[2**31 - 1, 2**32 - 1)``, disjoint from the trainer's
training seeds ``[0, 2**31 - 1)`` (the same range as :meth:`Trainer.evaluate`); tasks with a
problem split (a ``split`` keyword) are built on their ``"eval"`` split unless the caller asks
otherwise (:func:`held_out_kwargs`). Episodes a task marks ``infra_excluded`` (sandbox failure)
are counted apart and never scored as wrong answers.
"""

from __future__ import annotations

import inspect
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import llm_marl_envs
from baselines.rollout import EnvPool, GenStats, Slot, Task, play_lockstep, reset_copies
from baselines.rollout.common import infra_excluded

HELD_OUT_SEEDS = (2**31 - 1, 2**32 - 1)
_Z95 = 1.959964


@dataclass
class AgentStats:
    """One agent's format and reward statistics over the evaluated episodes."""

    steps: int = 0
    format_errors: int = 0
    empty: int = 0
    issue_kinds: dict[str, int] = field(default_factory=dict)
    completion_chars: float = 0.0

    @property
    def format_error_rate(self) -> float:
        return self.format_errors / self.steps if self.steps else float("nan")


@dataclass
class EvalReport:
    """What :func:`evaluate_team` measured (see the module docstring)."""

    env: str
    env_kwargs: dict[str, Any]
    tasks: int
    samples: int
    episodes: int  #: scored episodes (infra-excluded ones not counted)
    infra_excluded: int
    mean_return: float
    ci95: float  #: half-width of the 95% interval of the mean return over tasks
    avg_at_k: float
    pass_at_k: float
    oracle_return: float  #: mean return of the scripted best policy on the same tasks
    agents: dict[str, AgentStats]
    components: dict[str, float]  #: mean of each reward component over scored turns
    transcripts: list[dict[str, Any]]
    seconds: float = 0.0
    gen: GenStats = field(default_factory=GenStats)

    def summary(self) -> dict[str, Any]:
        """The headline figures as one flat dict (for JSON and tables)."""
        out: dict[str, Any] = {
            "env": self.env, "tasks": self.tasks, "samples": self.samples, "episodes": self.episodes,
            "infra_excluded": self.infra_excluded, "mean_return": self.mean_return, "ci95": self.ci95,
            f"avg@{self.samples}": self.avg_at_k, f"pass@{self.samples}": self.pass_at_k,
            "oracle_return": self.oracle_return, "seconds": self.seconds,
            "generated_tokens": self.gen.completion_tokens,
        }
        for agent, s in self.agents.items():
            out[f"format_error_rate/{agent}"] = s.format_error_rate
        out.update({f"component/{k}": v for k, v in self.components.items()})
        return out


def held_out_kwargs(env_name: str, kwargs: dict[str, Any], split: str | None = "eval") -> dict[str, Any]:
    """``kwargs`` with ``split=<split>`` added when the task takes a ``split`` keyword and none is given.

    ``"eval"`` means the task's held-out split, whatever the task calls it (its ``held_out_split``).
    """
    out = dict(kwargs)
    raw_env = llm_marl_envs.spec(env_name).load().raw_env
    if split is not None and "split" in inspect.signature(raw_env.__init__).parameters:
        out.setdefault("split", getattr(raw_env, "held_out_split", "eval") if split == "eval" else split)
    return out


def held_out_tasks(n: int, seed: int) -> list[Task]:
    """``n`` distinct task seeds from the held-out range."""
    rng = np.random.default_rng(seed)
    seeds: list[int] = []
    while len(seeds) < n:
        s = int(rng.integers(*HELD_OUT_SEEDS))
        if s not in seeds:
            seeds.append(s)
    return [Task(s) for s in seeds]


def oracle_returns(env_name: str, kwargs: dict[str, Any], tasks: Sequence[Task]) -> dict[str, float]:
    """Return of the task's scripted ``best_policy`` on each task instance (the pass threshold)."""
    module = llm_marl_envs.spec(env_name).load()
    env = llm_marl_envs.make(env_name, **kwargs)
    out = {}
    for task in tasks:
        env.reset(seed=task.seed)
        for agent in env.agent_iter():
            _, _, term, trunc, _ = env.last()
            env.step(None if term or trunc else module.best_policy(env, agent))
        out[task.id] = float(env.unwrapped.record.total_reward)
    env.close()
    return out


def evaluate_team(
    backend: Any,
    env_name: str,
    env_kwargs: dict[str, Any],
    *,
    episodes: int,
    samples: int = 1,
    seed: int = 12_345,
    tasks_per_batch: int = 8,
    max_steps: int = 1000,
    progress: Callable[[int], None] | None = None,
) -> EvalReport:
    """Play ``episodes`` held-out tasks x ``samples`` episodes with ``backend`` and score them.

    ``env_kwargs`` are used as given (call :func:`held_out_kwargs` first for the eval split);
    ``tasks_per_batch`` tasks (x samples episodes) are played in lock-step per batch;
    ``progress(n_tasks_done)`` is called after each batch."""
    import time

    if episodes < 1 or samples < 1:
        raise ValueError(f"episodes and samples must be >= 1, got {episodes} and {samples}")
    tasks = held_out_tasks(episodes, seed)
    oracle = oracle_returns(env_name, env_kwargs, tasks)
    pool = EnvPool(lambda: llm_marl_envs.make(env_name, **env_kwargs))
    stats = GenStats()
    finished: list[Slot] = []
    start = time.perf_counter()
    for i in range(0, len(tasks), max(1, tasks_per_batch)):
        batch = tasks[i : i + max(1, tasks_per_batch)]
        slots = [Slot(env=env, task=t.id, episode=g) for t in batch for g, env in enumerate(reset_copies(pool, t, samples))]
        try:
            play_lockstep(slots, backend, stats, max_steps=max_steps)
            finished.extend(_detach(s) for s in slots)
        finally:
            pool.release()
        if progress is not None:
            progress(len(batch))
    report = score(env_name, env_kwargs, finished, oracle, samples)
    report.seconds, report.gen = time.perf_counter() - start, stats
    return report


@dataclass
class _Done:
    """A finished episode, kept after its environment went back to the pool."""

    task: str
    sample: int
    record: Any
    excluded: bool


def _detach(slot: Slot) -> _Done:
    return _Done(slot.task, slot.episode, slot.env.unwrapped.record, infra_excluded(slot.env))


def score(
    env_name: str, env_kwargs: dict[str, Any], done: Sequence[_Done], oracle: dict[str, float], samples: int
) -> EvalReport:
    """Aggregate finished episodes into an :class:`EvalReport`."""
    per_task: dict[str, list[float]] = defaultdict(list)
    passed: dict[str, list[bool]] = defaultdict(list)
    agents: dict[str, AgentStats] = defaultdict(AgentStats)
    comp_sums: dict[str, list[float]] = defaultdict(list)
    transcripts = []
    excluded = 0
    for ep in done:
        total = float(ep.record.total_reward)
        transcripts.append(_transcript(ep, total, oracle[ep.task]))
        if ep.excluded:
            excluded += 1
            continue
        per_task[ep.task].append(total)
        passed[ep.task].append(total >= oracle[ep.task] - 1e-9)
        for step in ep.record.steps:
            s = agents[step.agent]
            s.steps += 1
            s.completion_chars += len(step.action)
            empty = not step.action.strip()
            s.empty += empty
            if step.format_issues or empty:
                s.format_errors += 1
            for issue in step.format_issues or (["empty action"] if empty else []):
                kind = str(issue).split(":", 1)[0][:60]
                s.issue_kinds[kind] = s.issue_kinds.get(kind, 0) + 1
        for turn in ep.record.turns:
            for k, v in turn.components.items():
                comp_sums[k].append(float(v))
    for s in agents.values():
        s.completion_chars = s.completion_chars / s.steps if s.steps else 0.0
    task_means = [float(np.mean(v)) for v in per_task.values()]
    n = len(task_means)
    ci = _Z95 * float(np.std(task_means, ddof=1)) / math.sqrt(n) if n > 1 else float("nan")
    return EvalReport(
        env=env_name, env_kwargs=dict(env_kwargs), tasks=len(oracle), samples=samples,
        episodes=sum(len(v) for v in per_task.values()), infra_excluded=excluded,
        mean_return=float(np.mean(task_means)) if n else float("nan"), ci95=ci,
        avg_at_k=float(np.mean([np.mean(v) for v in passed.values()])) if n else float("nan"),
        pass_at_k=float(np.mean([any(v) for v in passed.values()])) if n else float("nan"),
        oracle_return=float(np.mean(list(oracle.values()))), agents=dict(agents),
        components={k: float(np.mean(v)) for k, v in sorted(comp_sums.items())}, transcripts=transcripts,
    )


def _transcript(ep: _Done, total: float, oracle: float) -> dict[str, Any]:
    return {
        "task": ep.task, "sample": ep.sample, "return": total, "oracle_return": oracle,
        "passed": total >= oracle - 1e-9, "infra_excluded": ep.excluded,
        "steps": [
            {"turn": s.turn, "agent": s.agent, "prompt": [dict(m) for m in s.prompt], "action": s.action,
             "format_issues": list(s.format_issues), "reward": s.reward,
             "reward_components": dict(s.reward_components)}
            for s in ep.record.steps
        ],
    }
