"""OpenEnv-protocol seat server: concurrent sessions on the loopback, same return as a direct run."""

from __future__ import annotations

import threading

import pytest

import llm_marl_envs
from llm_marl_envs.bridges import BridgeError
from llm_marl_envs.bridges.openenv_server import SeatClient, SeatServer
from llm_marl_envs.testing import play_episode

SIGNAL = "toy/signal_game_v0"


class _View:
    """What a remote player has: its observation text, shaped for a task's scripted policy."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.unwrapped = self

    def is_acting(self, agent: str) -> bool:
        return True

    def observe(self, agent: str) -> dict:
        return {"text": self.text, "acting": 1}


def _play(client: SeatClient, policy, seed: int) -> tuple[float, float]:
    out, total = client.reset(seed=seed), 0.0
    while not out["done"]:
        obs = out["observation"]
        out = client.step(policy(_View(obs["text"]), obs["agent"]))
        total += out["reward"]
    return total, out["metadata"]["team_return"]


def test_two_concurrent_sessions_reach_the_direct_return():
    best = llm_marl_envs.spec(SIGNAL).load().best_policy
    kwargs = {"n_rounds": 3}
    with SeatServer(SIGNAL, "listener", env_kwargs=kwargs) as server:
        assert server.url.startswith("http://127.0.0.1:")
        results: dict[int, tuple[float, float]] = {}
        threads = [threading.Thread(target=lambda s=s: results.__setitem__(s, _play(SeatClient(server.url), best, s)))
                   for s in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(server._sessions) == 2
    for seed in (0, 1):
        direct = play_episode(llm_marl_envs.make(SIGNAL, **kwargs), best, seed=seed)
        assert results[seed] == (direct, direct) == (3.0, 3.0)


def test_hot_seat_names_the_acting_agent_and_bad_requests_are_clear():
    best = llm_marl_envs.spec(SIGNAL).load().best_policy
    with SeatServer(SIGNAL) as server:
        client = SeatClient(server.url)
        out = client.reset(seed=5)
        agents = []
        while not out["done"]:
            agents.append(out["observation"]["agent"])
            out = client.step(best(_View(out["observation"]["text"]), agents[-1]))
        assert agents == ["speaker", "listener"] and out["metadata"]["team_return"] == 1.0
        assert client.state()["done"] and client.state()["step_count"] == 2
        with pytest.raises(BridgeError, match="is over"):
            client.step("cat")
        with pytest.raises(BridgeError, match="unknown episode_id"):
            SeatClient(server.url).step("cat")
    with pytest.raises(BridgeError, match="no seat 'talker'"):
        SeatServer(SIGNAL, "talker")
    with pytest.raises(llm_marl_envs.UnknownEnvironmentError):
        SeatServer("toy/nope_v0")
