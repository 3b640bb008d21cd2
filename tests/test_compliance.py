"""The compliance suite: every registered task must pass these, automatically.

Parametrized over the registry (``env_spec`` fixture in conftest.py), so registering a
task is enough to have it checked. The checks live in :mod:`llm_marl_envs.testing` so that
users can run them on their own tasks; here each one is a separate test per task, plus a
hypothesis fuzz of arbitrary actions.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_marl_envs import testing


@pytest.fixture(autouse=True)
def _quiet_pettingzoo_advice():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


@pytest.mark.parametrize("check", sorted(testing.CHECKS))
def test_compliance(env_spec, check):
    testing.CHECKS[check](env_spec)


@pytest.mark.parametrize(
    "wrapper",
    ["clip_reward_v0", "reward_lambda_v0", "action_lambda_v1", "observation_lambda_v0", "sticky_actions_v0"],
)
def test_supersuit_wrappers(env_spec, wrapper):
    """SuperSuit's reward, action and observation wrappers on the AEC and the parallel env."""
    import supersuit as ss
    from pettingzoo.test import api_test, parallel_api_test

    wrap = {
        "clip_reward_v0": lambda e: ss.clip_reward_v0(e, lower_bound=-0.5, upper_bound=0.5),
        "reward_lambda_v0": lambda e: ss.reward_lambda_v0(e, lambda r: 2 * r),
        "action_lambda_v1": lambda e: ss.action_lambda_v1(e, lambda action, space: f"{action} ", lambda space: space),
        "observation_lambda_v0": lambda e: ss.observation_lambda_v0(e, lambda obs, space: obs, lambda space: space),
        "sticky_actions_v0": lambda e: ss.sticky_actions_v0(e, 0.25),
    }[wrapper]
    api_test(wrap(env_spec.make(**env_spec.test_kwargs)), num_cycles=10)
    parallel_api_test(wrap(env_spec.parallel_env(**env_spec.test_kwargs)), num_cycles=10)


def test_supersuit_vector_env(env_spec):
    """SuperSuit's Markov vector env over the parallel env, concatenated (FreeText is registered)."""
    import supersuit as ss

    vec = ss.pettingzoo_env_to_vec_env_v1(env_spec.parallel_env(**env_spec.test_kwargs))
    vec = ss.concat_vec_envs_v1(vec, 2, num_cpus=0, base_class="gymnasium")
    n = vec.num_envs
    obs, _ = vec.reset(seed=0)
    assert isinstance(obs["text"], tuple) and len(obs["text"]) == n and all(isinstance(t, str) for t in obs["text"])
    for _ in range(5):
        obs, rewards, terms, truncs, _ = vec.step([vec.action_space.sample() for _ in range(n)])
        assert len(rewards) == n and len(obs["text"]) == n
    vec.close()


@pytest.mark.parametrize("kind", ["sync", "subprocess"])
def test_text_vector_env(env_spec, kind):
    """Our vector API: lists of texts in and out, auto-reset, the same results in both versions."""
    from functools import partial

    from llm_marl_envs.core.vector import SubprocTextVectorEnv, SyncTextVectorEnv

    cls = SyncTextVectorEnv if kind == "sync" else SubprocTextVectorEnv
    vec = cls([partial(env_spec.make, **env_spec.test_kwargs) for _ in range(2)])
    try:
        out = vec.reset(seed=0)
        finished = 0
        for _ in range(60):
            out = vec.step(["" for _ in out.agents])
            assert all(isinstance(t, str) and t for t in out.observations)
            finished += sum("final" in info for info in out.infos)
        assert finished >= 2, "do-nothing episodes end, and the envs reset by themselves"
        reference = env_spec.make(**env_spec.test_kwargs)
        reference.reset(seed=1)
        again = vec.reset(seed=0)
        assert again.observations[1] == reference.observe(reference.agent_selection)["text"]
    finally:
        vec.close()


hostile_actions = st.one_of(
    st.text(max_size=200),
    st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=50),
    st.binary(max_size=100),
    st.none(),
    st.integers(),
    st.floats(allow_nan=True),
    st.lists(st.integers(), max_size=3),
)


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzz_arbitrary_actions_never_raise(env_spec, data):
    env = env_spec.make(**env_spec.test_kwargs)
    env.reset(seed=data.draw(st.integers(0, 3)))
    for steps, _agent in enumerate(env.agent_iter()):
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else data.draw(hostile_actions))
        assert steps < 5_000
    record = env.unwrapped.record
    assert record.done
    assert np.isfinite(record.total_reward)


@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzz_parallel_actions_never_raise(env_spec, data):
    par = env_spec.parallel_env(**env_spec.test_kwargs)
    par.reset(seed=data.draw(st.integers(0, 3)))
    for _ in range(2_000):
        if not par.agents:
            break
        par.step({a: data.draw(hostile_actions) for a in par.agents})
    assert not par.agents, "the episode ends"
    assert np.isfinite(par.unwrapped.record.total_reward)
