"""Tests of ``toy/signal_game_v0``."""

from __future__ import annotations

import numpy as np
import pytest

from llm_marl_envs.toy import signal_game_v0
from tests.conftest import play_episode


def test_optimal_policy_wins_every_round():
    env = signal_game_v0.env(n_rounds=5, n_candidates=6)
    for seed in range(5):
        assert play_episode(env, signal_game_v0.best_policy, seed) == 5.0


def test_random_policy_is_near_chance():
    env = signal_game_v0.env(n_candidates=4, n_rounds=10)
    rng = np.random.default_rng(0)
    total = sum(
        play_episode(env, lambda e, a: signal_game_v0.random_policy(e, a, rng), seed) for seed in range(60)
    )
    assert total / 600 == pytest.approx(0.25, abs=0.06)


def test_listener_must_name_exactly_one_candidate():
    env = signal_game_v0.env()
    env.reset(seed=0)
    raw = env.unwrapped
    env.step(raw.target)
    env.step(" ".join(raw.candidates))  # naming every candidate is not an answer
    assert env.rewards["listener"] == 0.0
    assert "named 4 candidates" in env.infos["listener"]["format_issues"][0]


def test_message_is_cut_to_message_length():
    env = signal_game_v0.env(message_length=1)
    env.reset(seed=0)
    env.step("first second")
    assert env.observe("listener")["text"].endswith("message: first")


def test_coalition_values():
    env = signal_game_v0.env(n_rounds=2, n_candidates=4)
    play_episode(env, signal_game_v0.best_policy, seed=0)
    raw = env.unwrapped
    assert raw.coalition_value(frozenset({"speaker", "listener"})) == 2.0
    assert raw.coalition_value(frozenset({"listener"})) == 0.5
    assert raw.coalition_value(frozenset({"speaker"})) == 0.0
    assert raw.coalition_value(frozenset()) == 0.0
    with pytest.raises(ValueError):
        raw.coalition_value(frozenset(), mode="regenerate")


@pytest.mark.parametrize("kwargs", [{"n_candidates": 1}, {"n_candidates": 99}, {"words": ("two words", "x")}])
def test_bad_parameters_are_rejected(kwargs):
    with pytest.raises(ValueError):
        signal_game_v0.raw_env(**kwargs)
