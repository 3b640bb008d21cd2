"""Shared fixtures and helpers for the test suite."""

from __future__ import annotations

import pytest

import llm_marl_envs
from llm_marl_envs.testing import play_episode

__all__ = ["play_episode"]


@pytest.fixture(params=llm_marl_envs.list_envs())
def env_spec(request) -> llm_marl_envs.EnvSpec:
    return llm_marl_envs.spec(request.param)
