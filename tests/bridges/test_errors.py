"""Bad input to the bridges gets a clear error: unknown task, unknown seat, unsupported version, missing extra."""

from __future__ import annotations

import importlib.metadata

import pytest

import llm_marl_envs
from llm_marl_envs.bridges import BridgeError, check_version, require
from tests.bridges.conftest import need

SIGNAL = "toy/signal_game_v0"


@pytest.mark.parametrize("framework,version", [("trl", "1.15.2"), ("trl", "1.17.0"), ("verifiers", "0.3.9"),
                                               ("verifiers", "1.0")])
def test_version_outside_the_pinned_range(framework, version):
    with pytest.raises(BridgeError, match=rf"{framework} {version} is not supported.*pip install 'llm-marl-envs\[{framework}\]'"):
        check_version(framework, version)


@pytest.mark.parametrize("framework,version", [("trl", "1.16.0"), ("trl", "1.16.9.dev0"), ("verifiers", "0.4.0")])
def test_version_inside_the_pinned_range(framework, version):
    check_version(framework, version)


@pytest.mark.parametrize("framework", ["trl", "verifiers"])
def test_missing_extra_names_the_install_command(framework, monkeypatch):
    real = importlib.metadata.version

    def version(name: str) -> str:  # the framework's distribution is absent
        if name == framework:
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    with pytest.raises(BridgeError, match=rf"not installed: pip install 'llm-marl-envs\[{framework}\]'"):
        require(framework)


def test_trl_bridge_rejects_unknown_tasks_and_seats():
    need("trl")
    from baselines.bridges.trl import episode_dataset, make_rollout_func, parse_prompt
    from baselines.bridges.trl_env import seat_environment

    best = llm_marl_envs.spec(SIGNAL).load().best_policy
    with pytest.raises(llm_marl_envs.UnknownEnvironmentError, match="unknown environment 'toy/nope_v0'"):
        make_rollout_func("toy/nope_v0")
    with pytest.raises(BridgeError, match=r"has no partner seat 'judge'; its seats are \['speaker', 'listener'\]"):
        make_rollout_func(SIGNAL, partners={"judge": best})
    with pytest.raises(BridgeError, match="has no seat 'judge'"):
        episode_dataset(SIGNAL, [0], seats=["judge"])
    with pytest.raises(BridgeError, match="has no seat 'judge'"):
        seat_environment(SIGNAL, "judge", {"speaker": best})
    with pytest.raises(BridgeError, match=r"missing \['speaker'\]"):
        seat_environment(SIGNAL, "listener", {})
    with pytest.raises(BridgeError, match="not an episode prompt"):
        parse_prompt("hello")
