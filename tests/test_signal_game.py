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


def test_speaker_turns_first_one_message_one_target_fresh_candidates_every_round():
    env = signal_game_v0.env(n_rounds=4, n_candidates=3, speaker_turns="first")
    assert play_episode(env, signal_game_v0.best_policy, seed=3) == 4.0
    raw = env.unwrapped
    acted = [(s.turn, s.agent) for s in raw.record.steps]
    assert acted == [(0, "speaker"), (0, "listener"), (1, "listener"), (2, "listener"), (3, "listener")]
    listener_obs = [m["content"] for m in raw.observe_chat("listener") if m["content"].startswith("candidates:")]
    assert len(listener_obs) == 4
    assert {obs.split("message: ")[1] for obs in listener_obs} == {raw.target}  # one message, one target
    shown = [set(obs.split("\n")[0].split()[1:]) for obs in listener_obs]
    assert all(raw.target in s and len(s) == 3 for s in shown)
    assert len({frozenset(s) for s in shown}) > 1  # fresh candidates (16 words, 4 rounds, seed 3)


def test_speaker_turns_first_a_wrong_message_loses_every_round():
    env = signal_game_v0.env(n_rounds=3, n_candidates=4, speaker_turns="first")
    env.reset(seed=0)
    raw = env.unwrapped
    wrong = next(w for w in raw.candidates if w != raw.target)
    env.step(wrong)
    for _ in range(3):
        env.step(signal_game_v0.best_policy(env, "listener"))  # echoes the (wrong) message
    assert raw.record.total_reward == 0.0
    assert raw.outcomes == [False, False, False]
    assert raw.return_range() == (0.0, 3.0)
    assert signal_game_v0.raw_env(n_rounds=3, speaker_turns="first", format_penalty=-0.5).return_range() == (-2.0, 3.0)


def test_speaker_turns_first_passes_the_compliance_checks():
    import dataclasses

    import llm_marl_envs
    from llm_marl_envs import testing

    spec = llm_marl_envs.spec("toy/signal_game_v0")
    spec = dataclasses.replace(spec, test_kwargs={**spec.test_kwargs, "n_rounds": 3, "speaker_turns": "first"})
    testing.check_env(spec, verbose=False)


def test_bad_speaker_turns_is_rejected():
    with pytest.raises(ValueError, match="speaker_turns"):
        signal_game_v0.raw_env(speaker_turns="never")


CODE_GAME = {"words": ("cat", "dog", "fox", "owl"), "n_candidates": 4, "message_length": 1,
             "message_words": ("red", "blue", "green", "pink")}


def test_message_words_a_code_wins_and_naming_the_target_does_not():
    env = signal_game_v0.env(n_rounds=3, **CODE_GAME)
    for seed in range(5):
        assert play_episode(env, signal_game_v0.best_policy, seed) == 3.0
    env.reset(seed=0)
    raw = env.unwrapped
    assert env.observe("speaker")["text"].endswith("message words: red blue green pink")
    assert "only the message words" in raw.observe_chat("speaker")[0]["content"]
    env.step(f"{raw.target} red")  # the target's own name is not a message word: dropped
    assert env.observe("listener")["text"].endswith("message: red")
    assert "1 word(s) outside the message words dropped" in raw.record.steps[-1].format_issues[0]
    assert raw.action_words("speaker") == CODE_GAME["message_words"]
    assert raw.action_words("listener") == CODE_GAME["words"]


def test_message_words_random_play_is_near_chance():
    env = signal_game_v0.env(n_rounds=10, **CODE_GAME)
    rng = np.random.default_rng(0)
    total = sum(
        play_episode(env, lambda e, a: signal_game_v0.random_policy(e, a, rng), seed) for seed in range(60)
    )
    assert total / 600 == pytest.approx(0.25, abs=0.06)


@pytest.mark.parametrize("bad", [(), ("two words",)])
def test_bad_message_words_are_rejected(bad):
    with pytest.raises(ValueError, match="message_words"):
        signal_game_v0.raw_env(message_words=bad)


PRIVATE = {"words": ("red", "yellow", "purple", "green"), "n_candidates": 4, "message_length": 1,
           "listener_words": ("north", "south", "east", "west")}


def test_listener_words_the_listener_answers_by_its_own_names():
    env = signal_game_v0.env(n_rounds=3, **PRIVATE)
    for seed in range(5):
        assert play_episode(env, signal_game_v0.best_policy, seed) == 3.0
    env.reset(seed=1)
    raw = env.unwrapped
    assert env.observe("speaker")["text"].endswith(f"target: {raw.target}")
    env.step(raw.target)  # the speaker names the target in its own words
    shown = env.observe("listener")["text"].rsplit("candidates: ", 1)[1].split("\n")[0].split()
    assert sorted(shown) == sorted(PRIVATE["listener_words"])  # the listener sees its own names only
    assert env.observe("listener")["text"].endswith(f"message: {raw.target}")
    env.step(raw.target)  # echoing the speaker's word names no candidate of the listener
    assert raw.outcomes == [False] and "named no candidate" in raw.record.steps[-1].format_issues[0]
    env.step(raw.target)
    env.step(raw.listener_name[raw.target])  # its own name of the target wins
    assert raw.outcomes == [False, True]
    assert raw.observe_chat("listener")[-1]["content"] == "result: correct"
    assert raw.action_words("listener") == PRIVATE["listener_words"]
    assert raw.action_words("speaker") == PRIVATE["words"]


@pytest.mark.parametrize("variant", [CODE_GAME, PRIVATE], ids=["message_words", "listener_words"])
def test_the_convention_games_pass_the_compliance_checks(variant):
    import dataclasses

    import llm_marl_envs
    from llm_marl_envs import testing

    spec = llm_marl_envs.spec("toy/signal_game_v0")
    testing.check_env(dataclasses.replace(spec, test_kwargs={**spec.test_kwargs, **variant, "n_rounds": 2}),
                      verbose=False)


def test_bad_listener_words_are_rejected():
    for bad in (("north", "south"), ("north", "north", "east", "west"), ("a b", "c", "d", "e")):
        with pytest.raises(ValueError, match="listener_words"):
            signal_game_v0.raw_env(**{**PRIVATE, "listener_words": bad})
