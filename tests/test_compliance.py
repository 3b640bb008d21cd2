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


def test_parallel_api(env_spec):
    if not env_spec.parallelizable:
        pytest.skip(f"{env_spec.name} is not parallelizable")
    testing.check_parallel(env_spec)


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
