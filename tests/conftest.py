"""Shared fixtures and helpers for the test suite."""

from __future__ import annotations

from typing import Any, Callable

import pytest

import llm_marl_envs

Policy = Callable[[Any, str], Any]


def play_episode(env, policy: Policy, seed: int | None = 0, max_steps: int = 10_000) -> float:
    """Play one episode of an AEC env with ``policy(env, agent)``; return the team return."""
    env.reset(seed=seed)
    for steps, agent in enumerate(env.agent_iter()):
        _, _, terminated, truncated, _ = env.last()
        env.step(None if terminated or truncated else policy(env, agent))
        assert steps < max_steps, "episode did not end"
    return env.unwrapped.record.total_reward


@pytest.fixture(params=llm_marl_envs.list_envs())
def env_spec(request) -> llm_marl_envs.EnvSpec:
    return llm_marl_envs.spec(request.param)
