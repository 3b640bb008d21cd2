"""verifiers v1 bridge: ``make_env(task, frozen=[...])`` -> a ``verifiers.v1`` ``Env`` for any registered task.

Mapping (docs/bridges.md): one ``AgentConfig`` per seat (the field name is the seat's name; by default
the tool-less ``null`` harness in a local ``subprocess`` runtime, :data:`LOCAL_AGENT`, so a seat is a
plain chat model played on this machine); the tasks are seeds
(:class:`SeedTaskset` yields one ``Task`` per seed, its ``id`` the seed); ``run`` plays the
PettingZoo episode, opening one interaction per seat (its system prompt is the seat's role
instructions) and sending each acting seat the new part of its own chat observation, its reply
being the seat's action; seats in ``frozen`` are ``trainable = False``; ``finalize`` records the
team return as the reward ``team_return`` and each reward component (summed over turns) as a
metric ``component/<name>`` on every trace. prime-rl groups the rollouts of one task (seed).

verifiers finds tasksets by a plugin id it imports as a module name; this module registers
itself as the flat module ``llm_marl_envs_verifiers`` (:data:`TASKSET_ID`) for that.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from llm_marl_envs.bridges import BridgeError, advance, check_seats, make_task_env, require, task_spec

require("verifiers")
import pydantic  # noqa: E402  (verifiers depends on pydantic)
import verifiers.v1 as vf  # noqa: E402

__all__ = ["LOCAL_AGENT", "SeedTaskset", "make_env"]

#: every seat's default ``AgentConfig``: the tool-less ``null`` harness (a plain chat model) run on this
#: machine (``subprocess`` runtime), not in verifiers' default hosted sandbox (which needs a ``prime`` login).
#: On first use verifiers prepares the harness's chat program with ``uv`` (docs/bridges.md#verifiers).
LOCAL_AGENT: Mapping[str, Any] = {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}

#: the taskset id verifiers imports (this module under a flat name, see the module docstring)
TASKSET_ID = "llm_marl_envs_verifiers"
sys.modules.setdefault(TASKSET_ID, sys.modules[__name__])


class SeedTasksetConfig(vf.TasksetConfig):
    """Which task and which seeds (``env_kwargs`` are the task's keyword arguments)."""

    task_name: str = ""
    seeds: list[int] = [0]
    env_kwargs: dict[str, Any] = {}


class SeedTaskset(vf.Taskset[vf.Task, SeedTasksetConfig]):
    """One ``Task`` per seed: ``id`` is the seed, ``name`` the task."""

    def load(self) -> Iterable[vf.Task]:
        for seed in self.config.seeds:
            yield vf.Task(vf.TaskData(id=str(int(seed)), name=self.config.task_name))


def _new_messages(chat: list[dict], seen: int) -> tuple[str, int]:
    """The task's new messages to a seat (not its own answers, not its system prompt) as one text."""
    new = [m["content"] for m in chat[seen:] if m["role"] == "user"]
    return "\n\n".join(new), len(chat)


def make_env(task_name: str, frozen: Iterable[str] = (), *, seeds: Iterable[int] = range(100),
             env_kwargs: Mapping[str, Any] | None = None, max_steps: int = 10_000,
             agent_config: Mapping[str, Any] | None = None) -> vf.Env:
    """A ``verifiers.v1`` ``Env`` playing ``task_name`` with one agent per seat (``frozen`` seats untrained).

    ``agent_config``: keyword arguments of every seat's ``AgentConfig`` (default: :data:`LOCAL_AGENT`, the
    ``null`` harness in a local ``subprocess`` runtime; verifiers' own default runtime is a hosted sandbox
    that needs a ``prime`` account).
    """
    task_spec(task_name)
    kwargs = dict(env_kwargs or {})
    seats = list(make_task_env(task_name, kwargs).possible_agents)
    frozen = check_seats(task_name, seats, list(frozen), what="seat to freeze")
    bad = [s for s in seats if not s.isidentifier() or s in vf.EnvConfig.model_fields]
    if bad:
        raise BridgeError(f"{task_name}: seat names {bad} cannot be verifiers agent fields")
    agent_kwargs = dict(agent_config or LOCAL_AGENT)
    config_cls = pydantic.create_model(
        "TaskEnvConfig", __base__=vf.EnvConfig,
        **{seat: (vf.AgentConfig, vf.AgentConfig(**agent_kwargs)) for seat in seats},
    )

    class TaskEnv(vf.Env[config_cls]):
        """A registered llm_marl_envs task as a verifiers v1 multi-agent env (see the module docstring)."""

        def __init__(self, config) -> None:
            super().__init__(config)
            self.results: dict[int, tuple[float, dict[str, float]]] = {}  # id(task) -> return, components

        async def setup(self, agents) -> None:
            for seat in frozen:
                getattr(agents, seat).trainable = False

        async def run(self, task, agents) -> None:
            env = make_task_env(task_name, kwargs)
            env.reset(seed=int(task.data.id))
            seen = {seat: 1 for seat in seats}
            interactions, finished = {}, set()
            async with contextlib.AsyncExitStack() as stack:
                for seat in seats:
                    seat_task = vf.Task(vf.TaskData(id=task.data.id, name=seat,
                                                    system_prompt=env.observe_chat(seat)[0]["content"]))
                    interactions[seat] = await stack.enter_async_context(getattr(agents, seat).interaction(seat_task))
                while (agent := advance(env, {}, max_steps)) is not None:
                    if agent in finished:  # its harness ended its run (a turn limit): it says nothing more
                        env.step("")
                        continue
                    text, seen[agent] = _new_messages(env.observe_chat(agent), seen[agent])
                    segment = await interactions[agent].turn(text)
                    if segment.terminated:
                        finished.add(agent)
                    env.step("" if segment.terminated else segment.last_reply)
            record = env.unwrapped.record
            self.results[id(task)] = (record.total_reward, record.component_totals())

        async def finalize(self, task, episode) -> None:
            team_return, components = self.results.pop(id(task))
            for trace in episode.traces:
                trace.record_reward("team_return", team_return)
                trace.record_metrics({f"component/{k}": v for k, v in components.items()})

    TaskEnv.__name__ = TaskEnv.__qualname__ = "TaskEnv_" + task_name.replace("/", "_")
    config = config_cls(taskset=SeedTasksetConfig(id=TASKSET_ID, task_name=task_name, seeds=list(seeds),
                                                  env_kwargs=kwargs))
    return TaskEnv(config)
