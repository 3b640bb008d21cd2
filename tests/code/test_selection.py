"""Thompson-sampling choice of where to expand and who writes (code/selection.py), pinned."""

from __future__ import annotations

import numpy as np
import pytest

from llm_marl_envs.code.selection import (
    SelectionConfig,
    choose,
    choose_agent,
    choose_parent,
    node_weights,
    sample_posterior,
)
from llm_marl_envs.code.tree import SearchTree

AGENTS = ["agent_0", "agent_1"]
#: the score each successive node receives, whatever the choice
SCRIPTED_SCORES = [0.0, 0.5, 1 / 3, 0.0, 1.0, 0.25, 0.75, 0.0, 0.5, 1.0]


def grow(config: SelectionConfig, seed: int = 0, scores=SCRIPTED_SCORES) -> tuple[list[tuple[int, str]], SearchTree]:
    tree, rng, seq = SearchTree(), np.random.default_rng(seed), []
    for turn, s in enumerate(scores):
        d = choose(tree, AGENTS, turn, config, rng)
        tree.add(parent_id=d.parent_id, agent=d.agent, turn=turn, program="", score=s, passed=0, total=1,
                 status="failed")  # fmt: skip
        seq.append((d.parent_id, d.agent))
    return seq, tree


def add(tree: SearchTree, parent: int, agent: str, score: float | None) -> None:
    tree.add(parent_id=parent, agent=agent, turn=len(tree), program="", score=score, passed=0, total=1,
             status="failed" if score is not None else "infra_error")  # fmt: skip


def test_gaussian_sequence_is_the_documented_one():
    # (parent_id, agent) per turn with default_rng(0), Gaussian posterior, default priors
    seq, tree = grow(SelectionConfig())
    assert seq == [
        (-1, "agent_1"), (-1, "agent_0"), (-1, "agent_0"), (2, "agent_0"), (1, "agent_0"),
        (4, "agent_0"), (1, "agent_0"), (1, "agent_0"), (4, "agent_0"), (6, "agent_1"),
    ]  # fmt: skip
    assert [n.depth for n in tree.nodes] == [0, 0, 0, 1, 1, 2, 1, 1, 2, 2]


def test_beta_sequence_is_the_documented_one():
    seq, _ = grow(SelectionConfig(posterior="beta"))
    assert seq == [
        (-1, "agent_1"), (-1, "agent_0"), (0, "agent_1"), (-1, "agent_0"), (2, "agent_0"),
        (1, "agent_0"), (-1, "agent_1"), (3, "agent_0"), (6, "agent_0"), (5, "agent_0"),
    ]  # fmt: skip


def test_depth_weighted_sequence_is_the_documented_one():
    seq, tree = grow(SelectionConfig(depth_weighting=True, max_depth=2))
    assert seq == [
        (-1, "agent_1"), (-1, "agent_0"), (-1, "agent_0"), (2, "agent_0"), (1, "agent_0"),
        (4, "agent_0"), (1, "agent_0"), (1, "agent_0"), (0, "agent_0"), (3, "agent_0"),
    ]  # fmt: skip
    assert max(n.depth for n in tree.nodes) <= 2


def test_same_seed_same_tree_different_seed_differs():
    assert grow(SelectionConfig(), seed=5)[0] == grow(SelectionConfig(), seed=5)[0]
    assert any(grow(SelectionConfig(), seed=s)[0] != grow(SelectionConfig(), seed=5)[0] for s in range(6, 10))


def test_gaussian_posterior_matches_the_formula():
    cfg = SelectionConfig(prior_mean=0.5, prior_std=0.5, noise_std=0.3)
    rng = np.random.default_rng(1)
    values = [1.0, 0.8, 0.9]
    draws = np.array([sample_posterior(values, cfg, rng) for _ in range(20000)])
    precision = 1 / 0.25 + 3 / 0.09
    mean = (0.5 / 0.25 + sum(values) / 0.09) / precision
    assert draws.mean() == pytest.approx(mean, abs=0.005)
    assert draws.std() == pytest.approx(precision**-0.5, rel=0.03)


def test_beta_posterior_matches_the_formula():
    cfg = SelectionConfig(posterior="beta", beta_alpha=2.0, beta_beta=1.0)
    rng = np.random.default_rng(2)
    draws = np.array([sample_posterior([1.0, 0.5, 0.0, 0.0], cfg, rng) for _ in range(20000)])
    a, b = 2.0 + 1.5, 1.0 + 2.5
    assert draws.mean() == pytest.approx(a / (a + b), abs=0.005)


def test_agent_with_better_scores_is_chosen_far_more_often():
    tree = SearchTree()
    for _ in range(6):
        add(tree, -1, "agent_0", 0.0)
        add(tree, -1, "agent_1", 1.0)
    rng = np.random.default_rng(3)
    picks = [choose_agent(tree, AGENTS, 0, SelectionConfig(), rng) for _ in range(200)]
    assert picks.count("agent_1") > 190


def test_round_robin_agent_choice():
    tree = SearchTree()
    cfg = SelectionConfig(agent_choice="round_robin")
    rng = np.random.default_rng(0)
    assert [choose_agent(tree, ["a", "b", "c"], t, cfg, rng) for t in range(5)] == ["a", "b", "c", "a", "b"]


def test_good_node_is_refined_and_bad_drafts_invite_new_drafts():
    # one draft solved all but one test, many drafts failed: refining the good one dominates
    tree = SearchTree()
    add(tree, -1, "agent_0", 0.9)
    for _ in range(5):
        add(tree, -1, "agent_1", 0.0)
    rng = np.random.default_rng(4)
    parents = [choose_parent(tree, SelectionConfig(), rng)[0] for _ in range(200)]
    assert parents.count(0) > 150


def test_infra_error_nodes_are_never_expanded_nor_observed():
    tree = SearchTree()
    add(tree, -1, "agent_0", None)  # sandbox failed: no score
    rng = np.random.default_rng(0)
    for _ in range(100):
        parent, path = choose_parent(tree, SelectionConfig(), rng)
        assert parent == -1 and path == ()
    # and its missing score is not an observation for the agent either: both agents see only the prior
    cfg = SelectionConfig()
    assert node_weights(tree, cfg) == [1.0]


def test_max_depth_blocks_refinement():
    tree = SearchTree()
    add(tree, -1, "agent_0", 1.0)
    add(tree, 0, "agent_0", 1.0)  # depth 1
    rng = np.random.default_rng(0)
    cfg = SelectionConfig(max_depth=1)
    for _ in range(100):
        parent, _ = choose_parent(tree, cfg, rng)
        assert parent in (-1, 0)
    assert {choose_parent(tree, SelectionConfig(max_depth=0), rng)[0] for _ in range(50)} == {-1}


def test_depth_weights_are_gamma_to_the_count():
    tree = SearchTree()
    add(tree, -1, "agent_0", 1.0)
    add(tree, -1, "agent_0", 1.0)
    add(tree, 0, "agent_0", 1.0)
    cfg = SelectionConfig(depth_weighting=True, gamma_root=0.98, gamma_decay=0.1, gamma_min=0.5)
    assert cfg.gamma(0) == pytest.approx(0.98) and cfg.gamma(1) == pytest.approx(0.88)
    assert cfg.gamma(10) == pytest.approx(0.5)
    assert node_weights(tree, cfg) == pytest.approx([0.98**2, 0.98**2, 0.88**1])
    assert node_weights(tree, SelectionConfig()) == [1.0, 1.0, 1.0]


@pytest.mark.parametrize(
    "kwargs",
    [{"posterior": "ucb"}, {"agent_choice": "best"}, {"prior_std": 0}, {"gamma_root": 1.5}, {"max_depth": -1}],
)
def test_bad_config_is_rejected(kwargs):
    with pytest.raises(ValueError):
        SelectionConfig(**kwargs)
