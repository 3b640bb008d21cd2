"""verifiers v1 bridge: every registered task plays a full episode through the v1 Env's run/finalize hooks
with fake agents (the tasks' scripted policies) and records the return of our own env loop."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

import llm_marl_envs
from llm_marl_envs.bridges import BridgeError
from llm_marl_envs.testing import play_episode
from tests.bridges.conftest import need


class _FakeTrace:
    def __init__(self, name: str) -> None:
        self.name, self.rewards, self.metrics = name, {}, {}

    def record_reward(self, name: str, value: float, weight: float = 1.0) -> None:
        self.rewards[name] = value

    def record_metrics(self, values) -> None:
        self.metrics.update(values)


class _FakeAgent:
    """A seat answering with the task's scripted policy on a shadow env kept in step with the real one;
    it checks that the text it is sent is the new part of its own chat."""

    def __init__(self, seat: str, shadow, policy, traces: list) -> None:
        self.seat, self.shadow, self.policy, self.traces, self.trainable = seat, shadow, policy, traces, True
        self.seen = 1

    @contextlib.asynccontextmanager
    async def interaction(self, task):
        import verifiers.v1 as vf

        assert task.data.system_prompt == self.shadow.observe_chat(self.seat)[0]["content"]
        agent = self

        class Interaction:
            async def turn(self, text: str):
                shadow = agent.shadow
                while shadow.agent_selection != agent.seat or not shadow.observe(agent.seat)["acting"]:
                    _, _, term, trunc, _ = shadow.last()
                    shadow.step(None if term or trunc else "")
                chat = shadow.observe_chat(agent.seat)
                assert text == "\n\n".join(m["content"] for m in chat[agent.seen:] if m["role"] == "user")
                agent.seen = len(chat)
                reply = agent.policy(shadow, agent.seat)
                shadow.step(reply)
                return vf.Segment(messages=[], root_reply=reply)

        yield Interaction()
        self.traces.append(_FakeTrace(self.seat))


class _Agents:
    def __init__(self, agents: dict) -> None:
        self.__dict__.update(agents)


class _Episode:
    def __init__(self, traces: list) -> None:
        self.traces = traces


def test_every_task_plays_to_the_direct_return(env_spec):
    need("verifiers")
    from llm_marl_envs.bridges.verifiers_env import make_env

    module, kwargs, seed = env_spec.load(), dict(env_spec.test_kwargs), 0
    seats = env_spec.make(**kwargs).possible_agents
    env = make_env(env_spec.name, frozen=seats[:1], seeds=[seed], env_kwargs=kwargs)
    (task,) = list(env.taskset)
    shadow = env_spec.make(**kwargs)
    shadow.reset(seed=seed)
    traces: list = []
    agents = _Agents({s: _FakeAgent(s, shadow, module.best_policy, traces) for s in seats})

    async def episode():
        await env.setup(agents)
        await env.run(task, agents)
        await env.finalize(task, _Episode(traces))

    asyncio.run(episode())
    direct = play_episode(env_spec.make(**kwargs), module.best_policy, seed=seed)
    assert sorted(t.name for t in traces) == sorted(seats)
    assert all(t.rewards == {"team_return": direct} for t in traces)
    assert all("component/format_penalty" in t.metrics for t in traces)
    assert [getattr(agents, s).trainable for s in seats] == [False] + [True] * (len(seats) - 1)


def test_bad_names_are_clear():
    need("verifiers")
    from llm_marl_envs.bridges.verifiers_env import make_env

    with pytest.raises(llm_marl_envs.UnknownEnvironmentError, match="unknown environment"):
        make_env("toy/nope_v0")
    with pytest.raises(BridgeError, match="no seat to freeze 'judge'"):
        make_env("toy/signal_game_v0", frozen=["judge"])
