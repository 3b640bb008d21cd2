"""The compliance suite: every registered task must pass these, automatically.

Parametrized over the registry (``env_spec`` fixture in conftest.py), so registering a
task is enough to have it checked. Each spec's ``test_kwargs`` keep the episodes small.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pettingzoo.test import api_test, parallel_api_test, render_test, seed_test

from tests.conftest import play_episode

warnings.filterwarnings("ignore", module="pettingzoo.test")


def _make(spec, **extra):
    return spec.make(**{**spec.test_kwargs, **extra})


def test_api(env_spec):
    api_test(_make(env_spec), num_cycles=20)


def test_seed(env_spec):
    seed_test(lambda: _make(env_spec), num_cycles=20)


def test_parallel_api(env_spec):
    if not env_spec.parallelizable:
        pytest.skip(f"{env_spec.name} is not parallelizable")
    parallel_api_test(env_spec.load().parallel_env(**env_spec.test_kwargs), num_cycles=20)


def test_render(env_spec):
    render_test(lambda render_mode=None: _make(env_spec, render_mode=render_mode))


def test_best_policy_reaches_maximum_and_nothing_gets_minimum(env_spec):
    module = env_spec.load()
    env = _make(env_spec)
    env.reset(seed=0)
    low, high = env.unwrapped.return_range()
    assert low < high
    assert play_episode(env, module.best_policy, seed=0) == pytest.approx(high)
    assert play_episode(env, lambda e, a: "", seed=0) == pytest.approx(low)


def test_every_agent_observes_text_and_chat(env_spec):
    env = _make(env_spec)
    env.reset(seed=1)
    for agent in env.agents:
        obs = env.observe(agent)
        assert env.observation_space(agent).contains(obs)
        chat = env.unwrapped.observe_chat(agent)
        assert chat[0]["role"] == "system"
        assert all(set(m) == {"role", "content"} for m in chat)


def test_clones_are_independent(env_spec):
    module = env_spec.load()
    env = _make(env_spec)
    env.reset(seed=3)
    first = env.agent_selection
    env.step(module.best_policy(env, first))
    if not env.agents:
        pytest.skip("episode ended after one step")
    before_obs = {a: env.observe(a)["text"] for a in env.agents}
    before_steps = len(env.unwrapped.record.steps)
    clone = env.clone()
    assert clone.unwrapped is not env.unwrapped
    # play the clone to the end with junk; the original must not move
    for agent in clone.agent_iter():
        _, _, term, trunc, _ = clone.last()
        clone.step(None if term or trunc else "junk ~~~")
    assert {a: env.observe(a)["text"] for a in before_obs} == before_obs
    assert len(env.unwrapped.record.steps) == before_steps
    # and the original continues exactly like a second clone taken at the same point
    twin = env.clone()
    for e in (env, twin):
        for agent in e.agent_iter():
            _, _, term, trunc, _ = e.last()
            e.step(None if term or trunc else module.best_policy(e, agent))
    assert env.unwrapped.record.total_reward == twin.unwrapped.record.total_reward
    assert env.render() == twin.render() if env.unwrapped.render_mode == "ansi" else True


hostile_actions = st.one_of(
    st.text(max_size=200),
    st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=50),
    st.binary(max_size=100),
    st.none(),
    st.integers(),
    st.floats(allow_nan=True),
    st.lists(st.integers(), max_size=3),
)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzz_arbitrary_actions_never_raise(env_spec, data):
    env = _make(env_spec)
    env.reset(seed=0)
    for steps, agent in enumerate(env.agent_iter()):
        _, _, term, trunc, info = env.last()
        env.step(None if term or trunc else data.draw(hostile_actions))
        assert steps < 5_000
    record = env.unwrapped.record
    assert record.done
    assert np.isfinite(record.total_reward)


def test_huge_and_broken_actions_are_penalized_not_raised(env_spec):
    env = _make(env_spec)
    env.reset(seed=0)
    junk = ["x" * 1_000_000, "\x00\x00code\x00", "\ud800\udfff broken surrogates", b"\xff\xfe", ""]
    i = 0
    for agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else junk[i % len(junk)])
        i += 1
    issues = [issue for s in env.unwrapped.record.steps for issue in s.format_issues]
    assert any("truncated" in x for x in issues)
