"""OpenEnv's stock client (``openenv`` 0.10's ``GenericEnvClient``, over its ``/ws`` WebSocket) plays every
registered task on our server to the direct run's return, and reads ``/schema`` with OpenEnv's own model.

The client runs in its own environment (openenv's MCP pin conflicts with verifiers'): the Python named by
``LLM_MARL_ENVS_OPENENV_PYTHON`` (``.ci/run`` builds it from ``.ci/openenv-client.txt``). Without it the
tests skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from llm_marl_envs.bridges import advance
from llm_marl_envs.bridges.openenv_server import SeatServer
from llm_marl_envs.testing import play_episode

DRIVER = Path(__file__).with_name("openenv_stock_driver.py")
PYTHON = os.environ.get("LLM_MARL_ENVS_OPENENV_PYTHON", "")


class StockClient:
    """Sends commands to the driver process (see ``openenv_stock_driver.py``)."""

    def __init__(self, python: str) -> None:
        self.process = subprocess.Popen([python, str(DRIVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, cwd="/")  # cwd: nothing of this repository on its path

    def __call__(self, op: str, **fields) -> object:
        self.process.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        assert answer["ok"], answer["error"]
        return answer["result"]

    def quit(self) -> None:
        self.process.stdin.write(json.dumps({"op": "quit"}) + "\n")
        self.process.stdin.close()
        self.process.wait(30)


@pytest.fixture(scope="module")
def stock():
    if not PYTHON:
        message = "LLM_MARL_ENVS_OPENENV_PYTHON names no Python with openenv 0.10 (.ci/run builds one)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but {message}")
        pytest.skip(message)
    client = StockClient(PYTHON)
    yield client
    client.quit()


def test_stock_client_plays_every_task_to_the_direct_return(env_spec, stock):
    """Hot seat: the client plays every seat in turn (the task's scripted policy on a shadow copy chooses)."""
    kwargs, best = dict(env_spec.test_kwargs), env_spec.load().best_policy
    shadow = env_spec.make(**kwargs)
    shadow.reset(seed=0)
    with SeatServer(env_spec.name, env_kwargs=kwargs) as server:
        stock("connect", url=server.url)
        out, rewards, steps = stock("reset", seed=0), 0.0, 0
        while not out["done"]:
            agent = advance(shadow, {})
            assert out["observation"]["agent"] == agent and out["observation"]["acting"] == 1
            assert out["observation"]["chat"] == shadow.observe_chat(agent)
            action = best(shadow, agent)
            shadow.step(action)
            out = stock("step", text=action)
            rewards, steps = rewards + out["reward"], steps + 1
        state = stock("state")
        stock("close")
        direct = play_episode(env_spec.make(**kwargs), best, seed=0)
        assert out["metadata"]["team_return"] == rewards == state["team_return"] == direct
        assert state["step_count"] == steps and state["done"] and state["episode_id"]
        for _ in range(50):  # the session ends with the connection
            if server.session_count == 0:
                break
            time.sleep(0.05)
        assert server.session_count == 0


def test_schema_and_health_parse_with_openenv_models(stock):
    with SeatServer("toy/signal_game_v0", "listener") as server:
        out = stock("schema", url=server.url)
    assert out["health"] == "healthy"
    schema = out["schema"]
    assert schema["action"]["required"] == ["text"] and "chat" in schema["observation"]["properties"]
    assert {"episode_id", "step_count"} <= set(schema["state"]["properties"])


def test_the_documented_client_example_plays(stock):
    """docs/bridges.md's OpenEnv client block, as written but for the port, against the documented server."""
    from tests.bridges.test_docs_bridges import BLOCKS

    (code,) = [b for b in BLOCKS if "GenericEnvClient" in b]
    with SeatServer("toy/signal_game_v0", "listener", env_kwargs={"n_rounds": 3}) as server:
        printed = stock("exec", code=code.replace("http://127.0.0.1:8000", server.url))
    assert printed.split() == ["3.0", "3"]
