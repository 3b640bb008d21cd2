"""Advantage schemes against hand-computed tables (expected numbers are written literally):
the tree- and state-grouped schemes MAGRPO, AT-GRPO and MARS2 (with its shaping and overlong penalty)."""

from __future__ import annotations

import numpy as np
import pytest

from baselines.advantages import (
    AdvantageConfig,
    at_grpo,
    grpo,
    magrpo,
    magrpo_returns,
    mars2,
    overlong_penalty,
    tree_shaping,
)
from baselines.samples import Row, SampleTable

from .advantage_tables import EXACT, flat, table

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
