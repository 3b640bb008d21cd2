"""Advantage schemes against hand-computed tables (expected numbers are written literally)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baselines.advantages import (
    ADVANTAGE_SCHEMES,
    AdvantageConfig,
    agent_reward_stats,
    agent_stats_log,
    at_grpo,
    compute_advantages,
    dr_mas,
    group_index,
    grpo,
    magrpo,
    magrpo_returns,
    mars2,
    overlong_penalty,
    sharp,
    tree_shaping,
)
from baselines.credit import credit_column, shapley_values
from baselines.samples import Row, SampleTable

EXACT = AdvantageConfig(eps=0.0)


def table(*rows: Row) -> SampleTable:
    return SampleTable.from_rows(rows)


def flat(task: str, rewards: list[float], agent: str = "a") -> list[Row]:
    """One row per episode of a single-agent, single-turn task."""
    return [Row(task, e, agent, r) for e, r in enumerate(rewards)]


# ----------------------------------------------------------------------------- registry


def test_registry_holds_the_six_schemes_and_is_read_only():
    assert sorted(ADVANTAGE_SCHEMES) == ["at_grpo", "dr_mas", "grpo", "magrpo", "mars2", "sharp"]
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


# ----------------------------------------------------------------------------- MAGRPO


def magrpo_tree() -> SampleTable:
    """Task t, episode 0, agents a and b (two rows per joint action = per node).

    turn 0: root -> nodes 1 (r=1), 2 (r=0)
    turn 1: node 1 -> 3 (r=1), 4 (r=0);  node 2 -> 5 (r=0.5), 6 (r=0.5)
    turn 2: node 3 -> 7 (r=2), 8 (r=0)
    plus one row without a tree (node -1, r=0.3).
    """
    spec = [(1, -1, 0, 1.0), (2, -1, 0, 0.0), (3, 1, 1, 1.0), (4, 1, 1, 0.0), (5, 2, 1, 0.5),
            (6, 2, 1, 0.5), (7, 3, 2, 2.0), (8, 3, 2, 0.0)]
    rows = [Row("t", 0, agent, r, turn=turn, node=node, parent=parent, depth=turn)
            for node, parent, turn, r in spec for agent in ("a", "b")]
    return table(*rows, Row("u", 0, "a", 0.3))


def test_magrpo_returns_with_gamma_on_a_small_tree():
    # gamma 0.9: R7=2 R8=0 R4=0 R5=R6=0.5
    # R3 = 1 + 0.9*mean(2, 0) = 1.9;  R2 = 0 + 0.9*mean(0.5, 0.5) = 0.45
    # R1 = 1 + 0.9*mean(R3=1.9, R4=0) = 1.855
    returns = magrpo_returns(magrpo_tree(), gamma=0.9)
    per_node = [1.855, 0.45, 1.9, 0.0, 0.5, 0.5, 2.0, 0.0]
    expected = [r for r in per_node for _ in ("a", "b")] + [0.3]
    np.testing.assert_allclose(returns, expected, rtol=1e-12)
    # gamma 0: the return is the node reward
    np.testing.assert_allclose(magrpo_returns(magrpo_tree(), gamma=0.0),
                               [1, 1, 0, 0, 1, 1, 0, 0, 0.5, 0.5, 0.5, 0.5, 2, 2, 0, 0, 0.3])


def test_magrpo_groups_siblings_per_agent_and_turn():
    t = magrpo_tree()
    t = t.replace(return_to_go=magrpo_returns(t, 0.9))
    res = magrpo(t, AdvantageConfig())  # paper default: A = R - mean, no std
    # root siblings (1.855, 0.45) -> +-0.7025; node 1's children (1.9, 0) -> +-0.95;
    # node 2's children (0.5, 0.5) -> 0; node 3's children (2, 0) -> +-1; no-tree row -> singleton 0
    per_node = [0.7025, -0.7025, 0.95, -0.95, 0.0, 0.0, 1.0, -1.0]
    expected = [a for a in per_node for _ in ("a", "b")] + [0.0]
    np.testing.assert_allclose(res.advantages, expected, rtol=1e-12, atol=1e-15)
    # 4 sibling sets x 2 agents + the lone row
    assert res.stats["n_groups"] == 9
    a_rows, b_rows = t.agent == "a", t.agent == "b"
    assert not set(res.groups[a_rows]) & set(res.groups[b_rows])
    tree = t.task == "t"
    magrpo(t.select(tree), AdvantageConfig(expected_group_size=2))
    with pytest.raises(ValueError, match="every group must hold 3 rows"):
        magrpo(t.select(tree), AdvantageConfig(expected_group_size=3))


def test_magrpo_std_option():
    t = magrpo_tree().select(np.arange(4))  # root siblings only, R = r here
    t = t.replace(return_to_go=[1.0, 1.0, 0.0, 0.0])
    assert magrpo(t, EXACT).advantages.tolist() == [0.5, 0.5, -0.5, -0.5]
    assert magrpo(t, AdvantageConfig(eps=0.0, scale_by_std=True)).advantages.tolist() == [1.0, 1.0, -1.0, -1.0]


def test_magrpo_fills_missing_returns_from_the_tree_and_rejects_partial_ones():
    t = magrpo_tree()
    auto = magrpo(t, AdvantageConfig(gamma=0.9))
    explicit = magrpo(t.replace(return_to_go=magrpo_returns(t, 0.9)), AdvantageConfig())
    np.testing.assert_array_equal(auto.advantages, explicit.advantages)
    partial = t.return_to_go.copy()
    partial[0] = 1.0
    with pytest.raises(ValueError, match="return_to_go is NaN at rows"):
        magrpo(t.replace(return_to_go=partial), AdvantageConfig())


def test_magrpo_returns_reject_inconsistent_nodes_and_dangling_parents():
    bad_reward = table(Row("t", 0, "a", 1.0, node=1), Row("t", 0, "b", 0.0, node=1))
    with pytest.raises(ValueError, match="share their reward"):
        magrpo_returns(bad_reward, 0.9)
    dangling = table(Row("t", 0, "a", 1.0, node=2, parent=7))
    with pytest.raises(ValueError, match="parent 7 of node 2"):
        magrpo_returns(dangling, 0.9)


def test_magrpo_single_agent_reduces_to_grpo():
    t = table(*flat("q", [1.0, 0.0, 0.5, 0.25]), *flat("p", [3.0, 1.0]))
    t = t.replace(return_to_go=t.reward)
    with_std = AdvantageConfig(scale_by_std=True)
    np.testing.assert_array_equal(magrpo(t, with_std).advantages, grpo(t, with_std).advantages)
    # paper default (no std): A = r - mean; q mean 0.4375, p mean 2
    np.testing.assert_allclose(magrpo(t, AdvantageConfig()).advantages,
                               [0.5625, -0.4375, 0.0625, -0.1875, 1.0, -1.0], rtol=1e-12)


# ----------------------------------------------------------------------------- AT-GRPO


def at_grpo_table() -> SampleTable:
    """Two problems p0, p1; in each, agent coder has K=3 candidates from state "s0" and agent
    tester K=3 from "s1". The state ids repeat across problems (the authors' bug merged them)."""
    team = {"p0": [1.0, 0.0, 0.0], "p1": [0.0, 0.0, 1.0]}
    local = {"p0": [0.0, 1.0, 0.0], "p1": [0.0, 0.0, 0.0]}
    rows = []
    for task in ("p0", "p1"):
        for k in range(3):
            rows.append(Row(task, 0, "coder", team[task][k], local_reward=local[task][k], group="s0", branch=k))
        for k in range(3):
            rows.append(Row(task, 0, "tester", 1.0, turn=1, local_reward=[0.0, 0.5, 1.0][k],
                            group="s1", branch=k))
    return table(*rows)


def test_at_grpo_groups_hold_exactly_k_candidates_of_one_state():
    t = at_grpo_table()
    res = at_grpo(t, AdvantageConfig(expected_group_size=3))
    assert res.stats["n_groups"] == 4
    for g in np.unique(res.groups):
        rows = res.groups == g
        assert rows.sum() == 3
        assert len(set(zip(t.task[rows], t.agent[rows], t.group[rows], t.turn[rows]))) == 1


def test_at_grpo_alpha_mix():
    t = at_grpo_table()
    # alpha=1: p0 coder r = [1, 1, 0] -> mean 2/3, std sqrt(2)/3
    a1 = at_grpo(t, AdvantageConfig(eps=0.0, alpha=1.0))
    np.testing.assert_allclose(a1.values[:3], [1.0, 1.0, 0.0])
    np.testing.assert_allclose(a1.advantages[:3], [0.70710678119, 0.70710678119, -1.41421356237], rtol=1e-10)
    # alpha=2: p0 coder r = [2, 1, 0] -> mean 1, std sqrt(2/3)
    a2 = at_grpo(t, AdvantageConfig(eps=0.0, alpha=2.0))
    np.testing.assert_allclose(a2.values[:3], [2.0, 1.0, 0.0])
    np.testing.assert_allclose(a2.advantages[:3], [1.22474487139, 0.0, -1.22474487139], rtol=1e-10)
    # p1 coder (alpha=2): r = [0, 0, 2] -> its own group, not pooled with p0
    np.testing.assert_allclose(a2.advantages[6:9], [-0.70710678119, -0.70710678119, 1.41421356237], rtol=1e-10)
    # testers: team reward 1 for all, local [0, 0.5, 1] -> alpha shifts only the mean
    np.testing.assert_allclose(a2.advantages[3:6], [-1.22474487139, 0.0, 1.22474487139], rtol=1e-10)


def test_at_grpo_without_state_ids_groups_by_parent_node():
    # no `group`: siblings are rows with the same (episode, parent); parent -1 = the task's
    # initial state, shared across episodes
    t = table(Row("q", 0, "a", 1.0, node=1), Row("q", 0, "a", 0.0, node=2),
              Row("q", 0, "b", 1.0, turn=1, node=3, parent=1), Row("q", 0, "b", 0.0, turn=1, node=4, parent=1),
              Row("q", 1, "a", 0.5, node=1))
    res = at_grpo(t, EXACT)
    assert res.groups.tolist() == [0, 0, 1, 1, 0]
    np.testing.assert_allclose(res.advantages, [1.22474487139, -1.22474487139, 1.0, -1.0, 0.0], rtol=1e-10)


# ----------------------------------------------------------------------------- MARS2


def mars2_table() -> SampleTable:
    """Tree of episode 0: 1(a, root, r=1) 2(b, root, r=0); 3(a, parent 1, r=1) 4(b, parent 1, r=0.5);
    5(a, parent 2, r=1, no sibling). Tree of episode 1 reuses node id 1: a lone root (r=0.3)."""
    return table(
        Row("t", 0, "a", 1.0, node=1), Row("t", 0, "b", 0.0, node=2),
        Row("t", 0, "a", 1.0, node=3, parent=1, depth=1), Row("t", 0, "b", 0.5, node=4, parent=1, depth=1),
        Row("t", 0, "a", 1.0, node=5, parent=2, depth=1),
        Row("t", 1, "a", 0.3, node=1),
    )


def test_mars2_group_is_the_whole_tree():
    res = mars2(mars2_table(), EXACT)
    # tree 0: r = [1, 0, 1, 0.5, 1], mean 0.7, var 0.16, std 0.4; tree 1: singleton -> 0
    np.testing.assert_allclose(res.advantages, [0.75, -1.75, 0.75, -0.5, 0.75, 0.0], rtol=1e-12)
    assert res.groups.tolist() == [0, 0, 0, 0, 0, 1]


def test_mars2_tree_shaping_with_parent_and_siblings():
    # gamma = lambda = 0.5
    # node 1: root, sibling 2 (r=0)            b = 0              r' = 1 + 0.5*1     = 1.5
    # node 2: root, sibling 1 (r=1)            b = 1              r' = 0 - 0.5*1     = -0.5
    # node 3: parent 1 (1), sibling 4 (0.5)    b = 0.5+0.25=0.75  r' = 1 + 0.5*0.25  = 1.125
    # node 4: parent 1 (1), sibling 3 (1)      b = 1              r' = 0.5 - 0.25    = 0.25
    # node 5: parent 2 (0), no sibling         b = r_parent = 0   r' = 1 + 0.5       = 1.5
    # tree 1, lone root                        b = r              r' = 0.3
    shaped = tree_shaping(mars2_table(), gamma=0.5, lam=0.5)
    np.testing.assert_allclose(shaped, [1.5, -0.5, 1.125, 0.25, 1.5, 0.3], rtol=1e-12)
    # lambda 0.25 weighs the parent 0.75: node 3 b = 0.75*1 + 0.25*0.5 = 0.875 -> r' = 1.0625;
    # gamma 1 doubles the deviation: node 1 r' = 1 + (1 - 0) = 2, node 5 r' = 1 + (1 - 0) = 2
    np.testing.assert_allclose(tree_shaping(mars2_table(), gamma=0.5, lam=0.25),
                               [1.5, -0.5, 1.0625, 0.25, 1.5, 0.3], rtol=1e-12)
    np.testing.assert_allclose(tree_shaping(mars2_table(), gamma=1.0, lam=0.5),
                               [2.0, -1.0, 1.25, 0.0, 2.0, 0.3], rtol=1e-12)
    res = mars2(mars2_table(), AdvantageConfig(eps=0.0, shaping=True))
    # tree 0 shaped: mean 0.775, deviations [.725, -1.275, .35, -.525, .725], var 0.615
    sd = 0.615**0.5
    np.testing.assert_allclose(res.advantages, [0.725 / sd, -1.275 / sd, 0.35 / sd, -0.525 / sd, 0.725 / sd, 0.0],
                               rtol=1e-12)
    np.testing.assert_allclose(res.values, [1.5, -0.5, 1.125, 0.25, 1.5, 0.3], rtol=1e-12)


def test_mars2_shaping_refuses_missing_parent_ids():
    no_ids = table(*flat("q", [1.0, 0.0]))
    with pytest.raises(ValueError, match="needs node/parent ids"):
        mars2(no_ids, AdvantageConfig(shaping=True))
    dangling = table(Row("q", 0, "a", 1.0, node=1), Row("q", 0, "b", 0.0, node=2, parent=9))
    with pytest.raises(ValueError, match="parent 9 of node 2"):
        mars2(dangling, AdvantageConfig(shaping=True))
    dup = table(Row("q", 0, "a", 1.0, node=1), Row("q", 0, "b", 0.0, node=1))
    with pytest.raises(ValueError, match="unique"):
        mars2(dup, AdvantageConfig(shaping=True))


def test_overlong_penalty():
    # max 10, buffer 4: no penalty up to 6, linear ramp to -1 at 10, -1 beyond
    np.testing.assert_allclose(overlong_penalty(np.array([3, 6, 8, 10, 12]), 10, 4), [0, 0, -0.5, -1, -1])
    np.testing.assert_allclose(overlong_penalty(np.array([10, 11]), 10, 0, factor=0.5), [0, -0.5])
    # in MARS2: rewards 1, 1 with lengths 2, 9 -> values [1, 0.25] -> advantages [1, -1]
    t = table(Row("q", 0, "a", 1.0, completion_ids=[1, 2], old_logprobs=[0.0, 0.0]),
              Row("q", 0, "b", 1.0, completion_ids=[1] * 9, old_logprobs=[0.0] * 9))
    res = mars2(t, AdvantageConfig(eps=0.0, overlong_max_len=10, overlong_buffer=4))
    np.testing.assert_allclose(res.values, [1.0, 0.25])
    np.testing.assert_allclose(res.advantages, [1.0, -1.0])


# ----------------------------------------------------------------------------- Dr. MAS


def dr_mas_table() -> SampleTable:
    # agents with different reward distributions: a in {1, 0}, b in {3, 5}
    return table(Row("q", 0, "a", 1.0, node=1), Row("q", 0, "a", 0.0, node=2),
                 Row("q", 0, "b", 3.0, node=3), Row("q", 0, "b", 5.0, node=4))


def test_dr_mas_uses_per_agent_statistics():
    t = dr_mas_table()
    np.testing.assert_allclose(dr_mas(t, EXACT).advantages, [1.0, -1.0, -1.0, 1.0], rtol=1e-12)
    # GRPO: one pool [1, 0, 3, 5], mean 2.25, var 3.6875
    sd = 3.6875**0.5
    np.testing.assert_allclose(grpo(t, EXACT).advantages, [-1.25 / sd, -2.25 / sd, 0.75 / sd, 2.75 / sd],
                               rtol=1e-12)


def test_dr_mas_agent_stats_and_amplification():
    stats = agent_reward_stats(dr_mas_table(), EXACT)
    a, b = stats["a"], stats["b"]
    assert (a.count, a.mu, a.sigma) == (2, 0.5, 0.5)
    assert (b.count, b.mu, b.sigma) == (2, 4.0, 1.0)
    assert a.global_mu == 2.25 and a.global_sigma == pytest.approx(3.6875**0.5)
    # (sigma_k^2 + (mu_k - mu)^2) / sigma^2: a (0.25 + 3.0625)/3.6875, b (1 + 3.0625)/3.6875
    assert a.amplification == pytest.approx(3.3125 / 3.6875, rel=1e-12)
    assert b.amplification == pytest.approx(4.0625 / 3.6875, rel=1e-12)
    # single task, biased std: equals the empirical mean of squared GRPO advantages
    assert a.grpo_second_moment == pytest.approx(3.3125 / 3.6875, rel=1e-12)
    assert b.grpo_second_moment == pytest.approx(4.0625 / 3.6875, rel=1e-12)
    log = agent_stats_log(stats)
    assert log["dr_mas/b/mu"] == 4.0 and log["dr_mas/a/count"] == 2.0


# ----------------------------------------------------------------------------- SHARP


def glove(coalition: frozenset[str]) -> float:
    """L holds a left glove, R1 and R2 right gloves: a pair is worth 1."""
    return 1.0 if "L" in coalition and coalition & {"R1", "R2"} else 0.0


def test_sharp_with_exact_shapley_credit():
    agents = ["L", "R1", "R2"]
    tool = {0: [1.0, 1.0, 0.0], 1: [0.0, 1.0, 1.0]}
    rows = [Row("q", ep, k, [1.0, 0.0][ep], tool_reward=tool[ep][i], node=3 * ep + i)
            for ep in (0, 1) for i, k in enumerate(agents)]
    t = table(*rows)
    credits = {("q", 0): shapley_values(glove, agents),  # L 2/3, R1 1/6, R2 1/6
               ("q", 1): shapley_values(lambda s: 0.0, agents)}  # failed episode: all 0
    t = t.replace(credit=credit_column(t, credits))
    np.testing.assert_allclose(t.credit, [2 / 3, 1 / 6, 1 / 6, 0, 0, 0], atol=1e-12)
    cfg = AdvantageConfig(eps=0.0, lambda_s=1.0, lambda_p=0.5, scale_by_std=False)
    res = sharp(t, cfg)
    # R_k = R + phi + 0.5 tool:  ep0 L 1+2/3+0.5, R1 1+1/6+0.5, R2 1+1/6;  ep1 L 0, R1 0.5, R2 0.5
    np.testing.assert_allclose(res.values, [13 / 6, 5 / 3, 7 / 6, 0.0, 0.5, 0.5], rtol=1e-12)
    # per-agent means: L 13/12, R1 13/12, R2 5/6
    np.testing.assert_allclose(res.advantages, [13 / 12, 7 / 12, 1 / 3, -13 / 12, -7 / 12, -1 / 3], rtol=1e-12)
    assert res.stats["n_groups"] == 3


def test_sharp_single_mask_credit_changes_the_rewards():
    from baselines.credit import single_mask_credit

    agents = ["L", "R1", "R2"]
    t = table(*[Row("q", 0, k, 1.0) for k in agents])
    t = t.replace(credit=credit_column(t, {("q", 0): single_mask_credit(glove, agents)}))
    res = sharp(t, AdvantageConfig(lambda_s=2.0, lambda_p=0.0))
    np.testing.assert_allclose(res.values, [3.0, 1.0, 1.0])  # phi = [1, 0, 0]


def test_sharp_requires_credit_when_lambda_s_is_nonzero():
    t = table(*flat("q", [1.0, 0.0]))
    with pytest.raises(ValueError, match="credit column .* NaN on 2 row"):
        sharp(t, AdvantageConfig(lambda_s=0.5))
    res = sharp(t, AdvantageConfig(eps=0.0, lambda_s=0.0, lambda_p=1.0))
    np.testing.assert_allclose(res.advantages, [1.0, -1.0])


# ----------------------------------------------------------------------------- properties

reward = st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0, -1.0])
row_spec = st.tuples(st.sampled_from(["q1", "q2"]), st.integers(0, 3), st.sampled_from(["a", "b", "c"]),
                     st.integers(0, 1), reward, reward)


def random_table(specs) -> SampleTable:
    return table(*[Row(task, ep, agent, r, turn=turn, local_reward=loc, credit=r * 0.5, node=i)
                   for i, (task, ep, agent, turn, r, loc) in enumerate(specs)])


@settings(max_examples=40, deadline=None)
@given(st.lists(row_spec, min_size=1, max_size=24), st.sampled_from(sorted(ADVANTAGE_SCHEMES)),
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
    cfg = AdvantageConfig(shaping=scheme == "mars2", drop_zero_variance=True)
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
