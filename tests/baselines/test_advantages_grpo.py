"""Advantage schemes against hand-computed tables (expected numbers are written literally):
the scheme registry and GRPO."""

from __future__ import annotations

import numpy as np
import pytest

from baselines.advantages import (
    ADVANTAGE_SCHEMES,
    AdvantageConfig,
    compute_advantages,
    group_index,
    grpo,
)
from baselines.samples import Row, SampleTable

from .advantage_tables import EXACT, flat, table

# ----------------------------------------------------------------------------- registry


def test_registry_holds_the_eleven_schemes_and_is_read_only():
    assert sorted(ADVANTAGE_SCHEMES) == ["at_grpo", "dr_mas", "grpo", "iac", "maac", "magrpo", "mars2", "reinforce",
                                         "remax", "rloo", "sharp"]
    with pytest.raises(TypeError):
        ADVANTAGE_SCHEMES["new"] = grpo  # type: ignore[index]
    with pytest.raises(ValueError, match="unknown advantage scheme 'ppo'"):
        compute_advantages(table(*flat("q", [1.0, 0.0])), "ppo")


def test_group_index_is_lexicographic_over_key_tuples():
    codes, n = group_index(np.array(["b", "a", "b", "a"]), np.array([1, 2, 1, 1]))
    # keys (b,1) (a,2) (b,1) (a,1) -> sorted (a,1)=0 (a,2)=1 (b,1)=2
    assert n == 3 and codes.tolist() == [2, 1, 2, 0]


# ----------------------------------------------------------------------------- GRPO


def test_grpo_pools_every_agent_and_turn_of_a_task():
    # q1: episode 0 (reward 1) has rows of agents a and b, episode 1 (reward 0) too;
    # the four rows [1, 1, 0, 0] form one group: mean 0.5, biased std 0.5.
    t = table(Row("q1", 0, "a", 1.0), Row("q1", 0, "b", 1.0, turn=1),
              Row("q1", 1, "a", 0.0), Row("q1", 1, "b", 0.0, turn=1),
              Row("q2", 0, "a", 3.0), Row("q2", 1, "a", 1.0))
    res = compute_advantages(t, "grpo")  # default eps 1e-6 enters as std + eps
    hi, lo = 0.5 / (0.5 + 1e-6), 1.0 / (1.0 + 1e-6)
    np.testing.assert_allclose(res.advantages, [hi, hi, -hi, -hi, lo, -lo], rtol=1e-12)
    assert res.groups.tolist() == [0, 0, 0, 0, 1, 1]
    assert res.stats["n_groups"] == 2


def test_grpo_biased_vs_unbiased_std():
    # [1, 0, 0]: mean 1/3; biased var 2/9 (std sqrt(2)/3), unbiased var 1/3.
    t = table(*flat("q", [1.0, 0.0, 0.0]))
    biased = grpo(t, EXACT).advantages
    np.testing.assert_allclose(biased, [1.41421356237, -0.70710678119, -0.70710678119], rtol=1e-10)
    unbiased = grpo(t, AdvantageConfig(eps=0.0, unbiased_std=True)).advantages
    np.testing.assert_allclose(unbiased, [1.15470053838, -0.57735026919, -0.57735026919], rtol=1e-10)


def test_grpo_std_off_is_mean_centering():
    t = table(*flat("q", [1.0, 0.0, 0.0]))
    res = grpo(t, AdvantageConfig(scale_by_std=False))
    np.testing.assert_allclose(res.advantages, [2 / 3, -1 / 3, -1 / 3], rtol=1e-12)


def test_groups_never_mix_tasks():
    # identical episode ids, agents and turns in two tasks: two groups, not one.
    t = table(*flat("q1", [1.0, 0.0]), *flat("q2", [5.0, 3.0]))
    for scheme in ("grpo", "dr_mas", "magrpo", "at_grpo", "mars2"):
        res = compute_advantages(t, scheme, AdvantageConfig(eps=0.0, scale_by_std=True))
        for g in np.unique(res.groups):
            assert len(set(t.task[res.groups == g])) == 1, scheme
    np.testing.assert_allclose(grpo(t, EXACT).advantages, [1.0, -1.0, 1.0, -1.0])


def test_singleton_group_zero_by_default_and_passthrough_option():
    t = table(*flat("q1", [1.0, 0.0]), Row("q2", 0, "a", 0.7))
    assert grpo(t, EXACT).advantages.tolist() == [1.0, -1.0, 0.0]
    passthrough = grpo(t, AdvantageConfig(singleton="passthrough")).advantages
    assert passthrough[2] == pytest.approx(0.7 / (1 + 1e-6), rel=1e-12)
    no_std = grpo(t, AdvantageConfig(singleton="passthrough", scale_by_std=False)).advantages
    assert no_std[2] == pytest.approx(0.7, rel=1e-12)
    assert grpo(t, EXACT).stats["n_singleton_groups"] == 1


def test_zero_variance_groups_give_zero_and_are_dropped_on_request():
    t = table(*flat("q1", [1.0, 1.0, 1.0]), *flat("q2", [0.1, 0.1]), *flat("q3", [2.0, 0.0]),
              Row("q4", 0, "a", 0.5))
    res = grpo(t, AdvantageConfig())
    assert res.advantages.tolist()[:5] == [0.0, 0.0, 0.0, 0.0, 0.0]
    assert res.keep.all()  # no filtering unless asked
    assert res.stats["n_zero_variance_groups"] == 2
    dropped = grpo(t, AdvantageConfig(drop_zero_variance=True))
    assert dropped.keep.tolist() == [False] * 5 + [True, True, False]
    assert dropped.stats["keep_frac"] == pytest.approx(2 / 8)
    kept_single = grpo(t, AdvantageConfig(drop_zero_variance=True, singleton="passthrough"))
    assert kept_single.keep.tolist() == [False] * 5 + [True, True, True]


def test_expected_group_size_guard():
    t = table(*flat("q1", [1.0, 0.0]), *flat("q2", [1.0, 0.0, 0.5]))
    with pytest.raises(ValueError, match=r"every group must hold 2 rows, found sizes \[2, 3\]"):
        grpo(t, AdvantageConfig(expected_group_size=2))


def test_empty_table():
    for scheme in ADVANTAGE_SCHEMES:
        res = compute_advantages(SampleTable.empty(), scheme, AdvantageConfig(lambda_s=0.0))
        assert res.advantages.shape == (0,) and res.keep.shape == (0,)
