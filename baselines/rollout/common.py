"""Lock-step play of many environment copies with batched generation, shared by every sampling mode.

The one rule of the rollout: never generate one sequence at a time. :func:`play_lockstep`
takes any number of live environment copies (:class:`Slot`: episodes, branches, tree
nodes, of any tasks), collects every copy whose current agent must act, and asks the
backend for all of their actions in ONE ``generate`` call (the backend batches the
requests of each model together). Then it steps every copy and repeats until each copy
has reached its stop condition (end of episode, or end of the current turn).

Environments are driven only through the PettingZoo AEC API (``agent_selection``,
``step``) plus the documented text-task hooks: ``observe_chat(agent)`` for the chat
prompt, ``clone()`` for branching, and ``unwrapped.record`` (the episode record) for the
turn rewards and reward components.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from baselines.generation import GenRequest


class Generator(Protocol):
    """What the rollout needs from a generation backend."""

    def generate(self, requests: Sequence[GenRequest]) -> list[Any]: ...


@dataclass
class StepSample:
    """One agent's one generated action, before rewards are known."""

    agent: str
    turn: int
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    text: str
    step_index: int  #: index of this step in the env's episode record


@dataclass
class Slot:
    """One live environment copy and the identity of the rows it produces."""

    env: Any
    task: str
    episode: int
    branch: int = -1
    node: int = -1
    parent: int = -1
    depth: int = 0
    group: str = ""
    samples: list[StepSample] = field(default_factory=list)
    #: free slot for the sampling mode's bookkeeping
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class GenStats:
    """Generation counters of one rollout (for tokens/s)."""

    calls: int = 0
    sequences: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def add(self, outputs: Sequence[Any], seconds: float) -> None:
        self.calls += 1
        self.sequences += len(outputs)
        self.prompt_tokens += sum(len(o.prompt_ids) for o in outputs)
        self.completion_tokens += sum(len(o.completion_ids) for o in outputs)
        self.seconds += seconds


def is_done(env: Any) -> bool:
    """Whether the episode of ``env`` has ended (terminated or truncated)."""
    return bool(env.unwrapped.record.done)


def generate(backend: Generator, envs: Sequence[Any], stats: GenStats, *, greedy: bool = False) -> list[Any]:
    """One batched ``generate`` call: an action for the current agent of every env in ``envs``
    (``greedy``: decoded greedily, the backend's settings at temperature 0)."""
    if not envs:
        return []
    requests = [GenRequest(agent=e.agent_selection, messages=e.observe_chat(e.agent_selection)) for e in envs]
    start = time.perf_counter()
    outputs = list(backend.generate(requests, greedy_config(backend)) if greedy else backend.generate(requests))
    stats.add(outputs, time.perf_counter() - start)
    if len(outputs) != len(requests):
        raise RuntimeError(f"backend returned {len(outputs)} outputs for {len(requests)} requests")
    return outputs


def greedy_config(backend: Generator) -> Any:
    """The backend's generation settings at temperature 0 (greedy decoding)."""
    config = getattr(backend, "config", None)
    if config is None:
        raise TypeError(f"{type(backend).__name__} has no generation config (.config): it cannot decode greedily "
                        "for ReMax's baseline rollout")
    return dataclasses.replace(config, temperature=0.0)


def step_with(slot: Slot, output: Any) -> StepSample:
    """Step ``slot.env`` with the generated ``output`` and keep the sample on the slot."""
    env = slot.env
    sample = StepSample(
        agent=env.agent_selection,
        turn=int(env.unwrapped.turn),
        prompt_ids=list(output.prompt_ids),
        completion_ids=list(output.completion_ids),
        logprobs=[float(x) for x in output.logprobs],
        text=output.text,
        step_index=len(env.unwrapped.record.steps),
    )
    env.step(output.text)
    slot.samples.append(sample)
    return sample


def play_lockstep(
    slots: Sequence[Slot],
    backend: Generator,
    stats: GenStats,
    *,
    until: Callable[[Slot], bool] = lambda slot: False,
    max_steps: int = 1000,
) -> None:
    """Step every slot, batching all pending actions per round, until each is done or ``until(slot)``.

    Slots with ``meta["greedy"]`` (ReMax's baseline rollouts) are decoded greedily, in a second call
    of the same round."""
    for _ in range(max_steps):
        live = [s for s in slots if not is_done(s.env) and not until(s)]
        if not live:
            return
        for greedy in (False, True):
            part = [s for s in live if bool(s.meta.get("greedy")) == greedy]
            for slot, out in zip(part, generate(backend, [s.env for s in part], stats, greedy=greedy)):
                step_with(slot, out)
    raise RuntimeError(f"episodes did not end within {max_steps} agent-steps")


def turn_rewards(env: Any) -> dict[int, float]:
    """``{turn: joint team reward}`` of the finished turns of ``env``."""
    return {t.turn: float(t.reward) for t in env.unwrapped.record.turns}


def step_components(env: Any, sample: StepSample) -> dict[str, float]:
    """Reward components of the turn ``sample`` belongs to, as seen by its agent (empty if unfinished)."""
    return {k: float(v) for k, v in env.unwrapped.record.steps[sample.step_index].reward_components.items()}


def agent_components(env: Any, turn: int, agent: str) -> dict[str, float]:
    """Per-agent reward terms (credit, tool validity...) the task gave ``agent`` at ``turn``."""
    for result in env.unwrapped.record.turns:
        if result.turn == turn:
            return {k: float(v) for k, v in result.agent_components.get(agent, {}).items()}
    return {}


def local_reward(env: Any, turn: int, agent: str) -> float:
    """AT-GRPO's r_local of ``agent`` at ``turn``: the sum of the components the task DECLARES local.

    A task declares them as ``local_reward_components``, a mapping agent -> component names
    (e.g. planner/worker: ``{"worker_0": ("tool_validity",), ...}``); agents it does not name,
    and tasks that declare nothing, get 0. Components the task reports but does not declare
    (e.g. a raw tool-call count) never enter r_local. A declared component that the task did
    not report for that agent and turn is a task bug: ``KeyError``, never a silent 0.
    """
    declared = getattr(env.unwrapped, "local_reward_components", None) or {}
    names = tuple(declared.get(agent, ()))
    if not names:
        return 0.0
    reported = agent_components(env, turn, agent)
    missing = [n for n in names if n not in reported]
    if missing:
        raise KeyError(f"{type(env.unwrapped).__name__} declares local reward component(s) {missing} for "
                       f"{agent!r} but did not report them at turn {turn} (reported: {sorted(reported)})")
    return float(sum(reported[n] for n in names))


def infra_excluded(env: Any) -> bool:
    """Whether the task marked this episode as spoiled by an infrastructure failure (drop it, never score it)."""
    return any(t.components.get("infra_excluded", 0) for t in env.unwrapped.record.turns)


def episode_return(env: Any) -> float:
    return float(env.unwrapped.record.total_reward)
