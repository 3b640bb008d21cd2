"""Shapley utilities on games with known values (hand-computed)."""

from __future__ import annotations

import numpy as np
import pytest

from baselines.credit import compute_credit, credit_column, shapley_values, single_mask_credit
from baselines.samples import Row, SampleTable

AGENTS = ["L", "R1", "R2"]


def glove(s: frozenset[str]) -> float:
    """L owns the left glove, R1/R2 a right glove each; a pair is worth 1."""
    return 1.0 if "L" in s and s & {"R1", "R2"} else 0.0


def majority(s: frozenset[str]) -> float:
    """Three voters, two make a majority."""
    return 1.0 if len(s) >= 2 else 0.0


def additive_with_synergy(s: frozenset[str]) -> float:
    """v(S) = sum of weights (a 1, b 2, c 4) + 3 if a and b are both in S."""
    w = {"a": 1.0, "b": 2.0, "c": 4.0}
    return sum(w[k] for k in s) + (3.0 if {"a", "b"} <= s else 0.0)


def test_glove_game_shapley():
    # L is pivotal in the 4 of 6 orders where a right glove precedes it; R1 only in L,R1,R2.
    phi = shapley_values(glove, AGENTS)
    assert phi == pytest.approx({"L": 2 / 3, "R1": 1 / 6, "R2": 1 / 6}, abs=1e-12)


def test_majority_game_shapley_and_single_mask():
    assert shapley_values(majority, AGENTS) == pytest.approx({"L": 1 / 3, "R1": 1 / 3, "R2": 1 / 3})
    # removing any single voter still leaves a majority: no marginal credit at all
    assert single_mask_credit(majority, AGENTS) == {"L": 0.0, "R1": 0.0, "R2": 0.0}


def test_asymmetric_game_splits_the_synergy():
    # a: 1 + 3/2, b: 2 + 3/2, c: 4; efficiency: sum = v(all) - v(empty) = 10
    phi = shapley_values(additive_with_synergy, ["a", "b", "c"])
    assert phi == pytest.approx({"a": 2.5, "b": 3.5, "c": 4.0}, abs=1e-12)
    # single mask: v(all)=10; v(bc)=6, v(ac)=5, v(ab)=6
    assert single_mask_credit(additive_with_synergy, ["a", "b", "c"]) == {"a": 4.0, "b": 5.0, "c": 4.0}


def test_glove_single_mask():
    assert single_mask_credit(glove, AGENTS) == {"L": 1.0, "R1": 0.0, "R2": 0.0}


def test_number_of_value_calls():
    calls: list[frozenset[str]] = []

    def counting(s: frozenset[str]) -> float:
        calls.append(s)
        return glove(s)

    shapley_values(counting, AGENTS)
    assert len(calls) == 8 and len(set(calls)) == 8  # 2^3 coalitions, each once
    calls.clear()
    single_mask_credit(counting, AGENTS)
    assert sorted(map(len, calls)) == [2, 2, 2, 3]
    assert all(isinstance(s, frozenset) for s in calls)


def test_single_agent_and_errors():
    assert shapley_values(lambda s: 5.0 if s else 1.0, ["x"]) == {"x": 4.0}
    with pytest.raises(ValueError, match="unique"):
        shapley_values(glove, ["L", "L"])
    with pytest.raises(ValueError, match="at least one agent"):
        single_mask_credit(glove, [])
    with pytest.raises(ValueError, match="single_mask_credit"):
        shapley_values(glove, [f"a{i}" for i in range(13)])
    with pytest.raises(ValueError, match="unknown credit method"):
        compute_credit(glove, AGENTS, method="banzhaf")  # type: ignore[arg-type]
    assert compute_credit(glove, AGENTS, "single_mask") == {"L": 1.0, "R1": 0.0, "R2": 0.0}


def test_credit_column_maps_episodes_and_agents():
    t = SampleTable.from_rows([Row("q", 0, "L", 1.0), Row("q", 0, "R1", 1.0, turn=1),
                               Row("q", 1, "L", 0.0), Row("p", 0, "L", 1.0)])
    col = credit_column(t, {("q", 0): {"L": 0.6, "R1": 0.4}, ("q", 1): {"L": -0.1}})
    np.testing.assert_array_equal(col[:3], [0.6, 0.4, -0.1])
    assert np.isnan(col[3])  # no credit for task p
