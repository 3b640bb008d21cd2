"""Properties every advantage scheme holds on random tables (hypothesis)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from baselines.advantages import (
    ADVANTAGE_SCHEMES,
    GROUP_CENTERED,
    AdvantageConfig,
    compute_advantages,
    grpo,
    magrpo,
)
from baselines.samples import Row, SampleTable

from .advantage_tables import flat, table

# ----------------------------------------------------------------------------- properties

reward = st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0, -1.0])
row_spec = st.tuples(st.sampled_from(["q1", "q2"]), st.integers(0, 3), st.sampled_from(["a", "b", "c"]),
                     st.integers(0, 1), reward, reward)


def random_table(specs) -> SampleTable:
    """Every column a registered scheme reads is filled (steps follow the turns, as a rollout writes them)."""
    return table(*[Row(task, ep, agent, r, turn=turn, local_reward=loc, credit=r * 0.5, node=i,
                       step=turn * 100 + i, turn_reward=r, value=loc, baseline=loc - r)
                   for i, (task, ep, agent, turn, r, loc) in enumerate(specs)])


@settings(max_examples=40, deadline=None)
@given(st.lists(row_spec, min_size=1, max_size=24), st.sampled_from(sorted(GROUP_CENTERED)),
       st.booleans())
def test_property_group_advantages_sum_to_zero(specs, scheme, scale):
    t = random_table(specs)
    t = t.replace(return_to_go=t.reward)
    res = compute_advantages(t, scheme, AdvantageConfig(scale_by_std=scale))
    sums = np.bincount(res.groups, weights=res.advantages)
    np.testing.assert_allclose(sums, 0.0, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(st.lists(row_spec, min_size=1, max_size=24), st.sampled_from(sorted(ADVANTAGE_SCHEMES)),
       st.randoms(use_true_random=False))
def test_property_row_permutation_invariance(specs, scheme, rnd):
    t = random_table(specs)
    t = t.replace(return_to_go=t.reward)
    perm = np.array(rnd.sample(range(len(t)), len(t)), dtype=np.int64)
    cfg = AdvantageConfig(shaping=scheme == "mars2", drop_zero_variance=scheme in GROUP_CENTERED)
    base = compute_advantages(t, scheme, cfg)
    permuted = compute_advantages(t.select(perm), scheme, cfg)
    np.testing.assert_allclose(permuted.advantages, base.advantages[perm], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(permuted.keep, base.keep[perm])


@settings(max_examples=30, deadline=None)
@given(st.lists(reward, min_size=1, max_size=10))
def test_property_single_agent_magrpo_equals_grpo(rewards):
    t = table(*flat("q", rewards))
    t = t.replace(return_to_go=t.reward)
    cfg = AdvantageConfig(scale_by_std=True)
    np.testing.assert_array_equal(magrpo(t, cfg).advantages, grpo(t, cfg).advantages)
    assert not math.isnan(magrpo(t, cfg).advantages.sum())
