"""Tests of the environment core: spaces, action sanitizing, turn schedule, records, clones."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.spaces import Text

import llm_marl_envs
from llm_marl_envs.core import FreeText, sanitize_action, text_observation_space
from llm_marl_envs.toy import signal_game_v0
from tests.conftest import play_episode


def test_gymnasium_text_rejects_llm_output_but_free_text_accepts_it():
    llm_output = "Sure! Here's the answer:\n```python\nprint('héllo 世界')\n```"
    assert not Text(max_length=1000).contains(llm_output)
    space = FreeText(max_length=1000)
    assert space.contains(llm_output)
    assert space.contains("")
    assert not space.contains("x" * 1001)
    assert not space.contains(b"bytes")


def test_free_text_samples_are_seeded_and_contained():
    a, b = FreeText(100, seed=7), FreeText(100, seed=7)
    samples = [a.sample() for _ in range(20)]
    assert samples == [b.sample() for _ in range(20)]
    assert all(a.contains(s) for s in samples)
    assert any(not s.isascii() for s in samples)


def test_observation_space_is_dict_of_text_and_acting_flag():
    space = text_observation_space(50)
    assert space.contains({"text": "anything at all ✓", "acting": 1})
    assert space.contains({"text": "", "acting": 0})
    assert not space.contains({"text": "y" * 51, "acting": 1})
    assert not space.contains({"text": "no flag"})


@pytest.mark.parametrize(
    "raw, text, issue",
    [
        ("plain", "plain", None),
        ("", "", None),
        ("a\x00b", "ab", "null bytes"),
        ("bad \ud800 surrogate", "bad ? surrogate", "surrogates"),
        (b"\xffok", "\ufffdok", "bytes"),
        (None, "", "None"),
        (42, "42", "int"),
        ("z" * 20, "z" * 10, "truncated"),
    ],
)
def test_sanitize_action(raw, text, issue):
    action = sanitize_action(raw, max_chars=10 if issue == "truncated" else 100)
    assert action.text == text
    if issue is None:
        assert action.issues == ()
    else:
        assert any(issue in i for i in action.issues), action.issues
    action.text.encode("utf-8")


def test_sanitize_survives_hostile_str():
    class Hostile:
        def __str__(self):
            raise RuntimeError("boom")

    action = sanitize_action(Hostile(), 100)
    assert action.text == "" and action.malformed


def test_partial_observability_each_agent_sees_only_its_own_view():
    env = signal_game_v0.env()
    env.reset(seed=5)
    raw = env.unwrapped
    speaker_view = env.observe("speaker")["text"]
    listener_view = env.observe("listener")["text"]
    assert f"target: {raw.target}" in speaker_view
    assert "target" not in listener_view and "candidates" not in listener_view
    env.step("moon lamp")
    listener_view = env.observe("listener")["text"]
    assert "message:" in listener_view and "target:" not in listener_view
    # the speaker's own message is in its own history, never the listener's answer
    env.step("the answer is owl")
    assert "the answer is owl" not in env.observe("speaker")["text"]
    assert [m["role"] for m in raw.observe_chat("listener")] == ["system", "user", "assistant", "user"]


def test_joint_reward_goes_to_every_agent_with_components():
    env = signal_game_v0.env(n_rounds=1)
    env.reset(seed=0)
    env.step(signal_game_v0.best_policy(env, "speaker"))
    env.step(signal_game_v0.best_policy(env, "listener"))
    assert env.rewards == {"speaker": 1.0, "listener": 1.0}
    for agent in ("speaker", "listener"):
        assert env.infos[agent]["reward_components"]["correct"] == 1.0
        assert env.terminations[agent]


def test_format_issues_are_explained_and_penalized():
    env = signal_game_v0.env(format_penalty=-0.25)
    env.reset(seed=0)
    env.step("one two three four")  # too long
    env.step("")  # names nobody
    for agent in ("speaker", "listener"):
        assert env.infos[agent]["reward_components"]["format_penalty"] == -0.5
    assert "cut" in env.infos["speaker"]["format_issues"][0]
    assert env.infos["listener"]["format_issues"] == ["named no candidate"]
    assert env.rewards["speaker"] == -0.5


def test_max_turns_truncates_and_termination_ends():
    env = signal_game_v0.env(n_rounds=3)
    assert play_episode(env, signal_game_v0.best_policy, seed=1) == 3.0
    assert env.unwrapped.record.terminated and not env.unwrapped.record.truncated
    assert len(env.unwrapped.record.turns) == 3


def test_reset_with_seed_is_reproducible():
    def transcript(seed):
        env = signal_game_v0.env(n_rounds=2)
        play_episode(env, lambda e, a: signal_game_v0.random_policy(e, a, np.random.default_rng(0)), seed)
        return env.unwrapped.transcript()

    assert transcript(11) == transcript(11)
    assert transcript(11) != transcript(12)


def test_episode_record_for_trainers():
    env = signal_game_v0.env(n_rounds=2)
    play_episode(env, signal_game_v0.best_policy, seed=2)
    record = env.unwrapped.record
    assert [(s.turn, s.agent) for s in record.steps] == [
        (0, "speaker"), (0, "listener"), (1, "speaker"), (1, "listener")
    ]
    assert all(s.reward == 1.0 for s in record.steps)
    assert record.steps[1].prompt[-1]["content"].startswith("candidates:")
    assert record.to_dict()["total_reward"] == 2.0


def test_clone_shares_declared_resources_only():
    class Resource:
        pass

    class WithResource(signal_game_v0.raw_env):
        shared_attributes = ("resource",)

        def __init__(self):
            super().__init__()
            self.resource = Resource()

    env = WithResource()
    env.reset(seed=0)
    clone = env.clone()
    assert clone.resource is env.resource
    assert clone._histories is not env._histories
    clone.step("apple")
    assert len(env.record.steps) == 0 and len(clone.record.steps) == 1


def test_wrapped_clone_stays_wrapped_and_independent():
    env = llm_marl_envs.make("toy/signal_game_v0")
    env.reset(seed=0)
    clone = env.clone()
    assert type(clone) is type(env)
    clone.step("apple")
    assert env.agent_selection == "speaker" and clone.agent_selection == "listener"


def test_parallel_env_of_a_sequential_task_gives_non_actors_a_noop():
    par = signal_game_v0.parallel_env(n_rounds=1)
    obs, infos = par.reset(seed=0)
    assert infos["speaker"]["acting"] and not infos["listener"]["acting"]
    listener_before = obs["listener"]["text"]
    obs, rewards, *_ , infos = par.step({"speaker": "apple", "listener": "ignored words"})
    assert obs["listener"]["text"] != listener_before  # it was told the speaker's message
    assert "ignored words" not in par.unwrapped.transcript()
    assert infos["listener"]["acting"] and not infos["speaker"]["acting"]


def test_render_modes():
    env = signal_game_v0.env(render_mode="ansi")
    play_episode(env, signal_game_v0.best_policy, seed=0)
    text = env.render()
    assert "speaker:" in text and "team reward +1.000" in text
    with pytest.raises(ValueError):
        signal_game_v0.env(render_mode="rgb_array")


def test_state_includes_hidden_information():
    env = signal_game_v0.env()
    env.reset(seed=0)
    assert f"target: {env.unwrapped.target}" in env.state()


def test_bare_text_observation_fails_api_test_but_dict_passes():
    """Why observations are ``Dict({"text": ...})``: PettingZoo's api_test rejects a bare Text space."""
    import warnings

    from pettingzoo.test import api_test

    class BareText(signal_game_v0.raw_env):
        def __init__(self):
            super().__init__()
            self.observation_spaces = {a: FreeText(self.max_observation_chars) for a in self.possible_agents}

        def observe(self, agent):
            return super().observe(agent)["text"]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(AttributeError, match="dtype"):
            api_test(BareText(), num_cycles=5)
        api_test(signal_game_v0.raw_env(), num_cycles=5)


def test_component_totals_sum_the_team_terms_and_add_one_agents_own():
    from llm_marl_envs.core.records import EpisodeRecord, TurnResult

    record = EpisodeRecord(turns=[
        TurnResult(0, 1.0, {"correct": 1.0, "format_penalty": 0.0}, {"tool": {"tool_ran": 1.0}}),
        TurnResult(1, 0.5, {"correct": 0.5, "format_penalty": -0.5}, {"plan": {"moves": 2.0}}),
    ])  # fmt: skip
    assert record.component_totals() == {"correct": 1.5, "format_penalty": -0.5}
    assert record.component_totals("tool") == {"correct": 1.5, "format_penalty": -0.5, "tool_ran": 1.0}
    assert record.component_totals("plan") == {"correct": 1.5, "format_penalty": -0.5, "moves": 2.0}
