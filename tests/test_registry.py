"""Tests of the task registry."""

from __future__ import annotations

import pytest

import llm_marl_envs
from llm_marl_envs import EnvSpec
from llm_marl_envs.registry import Registry


def test_builtin_tasks_are_listed():
    names = llm_marl_envs.list_envs()
    assert "toy/signal_game_v0" in names
    assert names == sorted(names)


def test_make_passes_kwargs_and_module_convention_matches():
    from llm_marl_envs.toy import signal_game_v0

    env = llm_marl_envs.make("toy/signal_game_v0", n_candidates=3)
    assert env.unwrapped.n_candidates == 3
    assert type(env.unwrapped) is type(signal_game_v0.env().unwrapped)


def test_unknown_name_lists_known_ones():
    with pytest.raises(KeyError, match="signal_game_v0"):
        llm_marl_envs.make("toy/nope_v0")


def test_register_validates_names_and_duplicates():
    reg = Registry()
    spec = EnvSpec("toy/mine_v0", "llm_marl_envs.toy.signal_game_v0", "a copy")
    reg.register(spec)
    with pytest.raises(ValueError, match="already registered"):
        reg.register(spec)
    reg.register(spec, overwrite=True)
    with pytest.raises(ValueError, match="<family>"):
        reg.register(EnvSpec("mine", "x", "bad name"))
    assert reg.names() == ["toy/mine_v0"]
