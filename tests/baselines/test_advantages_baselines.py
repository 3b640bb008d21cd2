"""Advantage schemes against hand-computed tables (expected numbers are written literally): the other
baselines of MAGRPO's trainer (RLOO, ReMax, REINFORCE) and the actor-critic GAE of IAC and MAAC."""

from __future__ import annotations

import math

import numpy as np
import pytest

from baselines.advantages import AdvantageConfig, compute_advantages, iac, maac, reinforce, remax, rloo
from baselines.samples import Row, SampleTable

from .advantage_tables import EXACT, table
from .test_advantages_tree import magrpo_tree

# ----------------------------------------------------------------------------- RLOO


def three_episodes(agent: str = "a", task: str = "q") -> list[Row]:
    return [Row(task, e, agent, r, return_to_go=r) for e, r in enumerate([1.0, 0.0, 0.5])]


def test_rloo_subtracts_the_mean_of_the_other_samples():
    t = table(*three_episodes("a"), *three_episodes("b"), Row("p", 0, "a", 0.7, return_to_go=0.7))
    res = rloo(t, EXACT)
    # a: 1 - (0 + 0.5)/2 = 0.75, 0 - (1 + 0.5)/2 = -0.75, 0.5 - (1 + 0)/2 = 0; b alike; the lone row: 0
    assert res.advantages.tolist() == [0.75, -0.75, 0.0, 0.75, -0.75, 0.0, 0.0]
    assert res.stats["n_groups"] == 3 and res.stats["adv_abs_max"] == 0.75
    assert rloo(t, AdvantageConfig(singleton="passthrough", eps=0.0)).advantages[-1] == 0.7
    scaled = rloo(t, AdvantageConfig(eps=0.0, scale_by_std=True)).advantages  # / biased std sqrt(1/6)
    np.testing.assert_allclose(scaled[:3], [0.75 * math.sqrt(6), -0.75 * math.sqrt(6), 0.0], rtol=1e-12)


def test_rloo_on_magrpo_tree_siblings_uses_the_return_to_go():
    # G = 2 siblings: A = R_i - R_other. Root (1.855, 0.45) -> +-1.405; node 1 (1.9, 0) -> +-1.9;
    # node 2 (0.5, 0.5) -> 0; node 3 (2, 0) -> +-2 (returns with gamma 0.9, see test_advantages_tree)
    res = rloo(magrpo_tree(), AdvantageConfig(gamma=0.9))
    per_node = [1.405, -1.405, 1.9, -1.9, 0.0, 0.0, 2.0, -2.0]
    np.testing.assert_allclose(res.advantages, [a for a in per_node for _ in "ab"] + [0.0], rtol=1e-12, atol=1e-15)


# ----------------------------------------------------------------------------- ReMax


def two_turn_episodes() -> SampleTable:
    """Two sampled episodes of task q (turn rewards ep0: 1, 1; ep1: 0, 1) and the greedy episode's
    turn rewards 1, 0, all with gamma 0.9: return-to-go ep0 (1.9, 1), ep1 (0.9, 1), greedy (1, 0)."""
    rows = [Row("q", e, "a", total, turn=t, return_to_go=rtg, baseline=b)
            for e, total, rtgs in ((0, 2.0, (1.9, 1.0)), (1, 1.0, (0.9, 1.0)))
            for t, (rtg, b) in enumerate(zip(rtgs, (1.0, 0.0)))]
    return table(*rows)


def test_remax_subtracts_the_greedy_rollouts_return_from_the_same_turn():
    res = remax(two_turn_episodes(), EXACT)
    np.testing.assert_allclose(res.advantages, [0.9, 1.0, -0.1, 1.0], rtol=1e-12)
    assert res.keep.all()  # the turn-1 group has equal returns (1, 1) yet R - b = 1 is signal
    with pytest.raises(ValueError, match="greedy rollout's return in the 'baseline' column"):
        remax(table(*three_episodes()), EXACT)
    with pytest.raises(ValueError, match="does not divide by a group std"):
        remax(two_turn_episodes(), AdvantageConfig(scale_by_std=True))
    with pytest.raises(ValueError, match="nothing to drop"):
        remax(two_turn_episodes(), AdvantageConfig(drop_zero_variance=True))


# ----------------------------------------------------------------------------- REINFORCE


def test_reinforce_has_no_baseline():
    res = reinforce(two_turn_episodes(), EXACT)
    assert res.advantages.tolist() == [1.9, 1.0, 0.9, 1.0] and res.keep.all()
    assert reinforce(magrpo_tree(), AdvantageConfig(gamma=0.0)).advantages.tolist()[:4] == [1.0, 1.0, 0.0, 0.0]


# ----------------------------------------------------------------------------- IAC / MAAC (GAE over turns)


def actor_critic_episode(value_l0: float = 0.6) -> SampleTable:
    """One episode, speaker s then listener l in each of 2 turns (turn rewards 1 and 2), critic values
    V(s0) 0.5, V(l0) 0.6, V(s1) 1.0, V(l1) 1.5; rows stored out of step order."""
    spec = [("l", 1, 3, 1.5), ("s", 0, 0, 0.5), ("s", 1, 2, 1.0), ("l", 0, 1, value_l0)]
    rows = [Row("q", 0, agent, 3.0, turn=turn, step=step, value=v, turn_reward=[1.0, 2.0][turn])
            for agent, turn, step, v in spec]
    return table(*rows, Row("q", 1, "s", 0.0, step=0, value=0.25, turn_reward=0.0))  # a second, 1-row episode


def test_iac_runs_gae_over_each_agents_own_turns():
    res = iac(actor_critic_episode(), AdvantageConfig(gamma=0.9, gae_lambda=0.5))
    # speaker: delta(s0) = 1 + 0.9*1.0 - 0.5 = 1.4, delta(s1) = 2 - 1.0 = 1.0, A(s0) = 1.4 + 0.45*1.0 = 1.85
    # listener: delta(l0) = 1 + 0.9*1.5 - 0.6 = 1.75, delta(l1) = 2 - 1.5 = 0.5, A(l0) = 1.75 + 0.45*0.5 = 1.975
    # the 1-row episode: 0 - 0.25
    np.testing.assert_allclose(res.advantages, [0.5, 1.85, 1.0, 1.975, -0.25], rtol=1e-12)
    np.testing.assert_allclose(res.values, [2.0, 2.35, 2.0, 2.575, 0.0], rtol=1e-12)  # critic targets A + V
    assert res.stats["n_groups"] == 3  # (episode 0, s), (episode 0, l), (episode 1, s)
    td = iac(actor_critic_episode(), AdvantageConfig(gamma=0.9, gae_lambda=0.0)).advantages
    np.testing.assert_allclose(td[:4], [0.5, 1.4, 1.0, 1.75], rtol=1e-12)  # lambda 0: the TD errors
    mc = iac(actor_critic_episode(), AdvantageConfig(gamma=0.9, gae_lambda=1.0)).advantages
    np.testing.assert_allclose(mc[:4], [0.5, 1 + 0.9 * 2 - 0.5, 1.0, 1 + 0.9 * 2 - 0.6], rtol=1e-12)


def test_maac_runs_gae_over_the_joint_sequence_with_the_central_value():
    res = maac(actor_critic_episode(), AdvantageConfig(gamma=0.9, gae_lambda=0.5))
    # s0 -> l0 same turn (r 0, discount 1): delta 0.6 - 0.5 = 0.1;  l0 -> s1: delta 1 + 0.9*1.0 - 0.6 = 1.3
    # s1 -> l1 same turn: delta 1.5 - 1.0 = 0.5;  l1 last: delta 2 - 1.5 = 0.5
    # A(l1) 0.5, A(s1) 1.0, A(l0) 1.3 + 0.45*1.0 = 1.75, A(s0) 0.1 + 1.75 = 1.85
    np.testing.assert_allclose(res.advantages, [0.5, 1.85, 1.0, 1.75, -0.25], rtol=1e-12)
    assert res.stats["n_groups"] == 2
    # the listener's value is the baseline of its own row and the bootstrap of the speaker's only
    moved = maac(actor_critic_episode(value_l0=0.0), AdvantageConfig(gamma=0.9, gae_lambda=0.5)).advantages
    np.testing.assert_allclose(moved, [0.5, 1.85, 1.0, 2.35, -0.25], rtol=1e-12)


def test_gae_refuses_a_table_without_critic_values_or_steps():
    plain = table(*three_episodes())
    with pytest.raises(ValueError, match="needs the 'value' column"):
        iac(plain, AdvantageConfig())
    no_steps = actor_critic_episode().replace(step=np.full(5, -1))
    with pytest.raises(ValueError, match="needs the 'step' column"):
        maac(no_steps, AdvantageConfig())
    with pytest.raises(ValueError, match="share a step index"):
        maac(actor_critic_episode().replace(step=np.array([3, 0, 2, 2, 0])), AdvantageConfig())


# ----------------------------------------------------------------------------- what each scheme reads


@pytest.mark.parametrize("scheme,reads", [
    ("rloo", ("return_to_go",)), ("remax", ("return_to_go", "baseline")), ("reinforce", ("return_to_go",)),
    ("iac", ("value", "turn_reward")), ("maac", ("value", "turn_reward")),
])
def test_each_scheme_reads_its_documented_columns_and_nothing_else(scheme, reads):
    """Scrambling a column the formula does not name leaves the advantages as they are; changing one it
    names moves them (no hidden input, no dead input)."""
    base = actor_critic_episode().replace(return_to_go=[1.0, 0.5, 2.0, 0.0, 1.5], baseline=[0.2, 0.1, 0.4, 0.3, 0.0])
    cfg = AdvantageConfig(gamma=0.9)
    expected = compute_advantages(base, scheme, cfg).advantages
    rng = np.random.default_rng(0)
    columns = ("reward", "return_to_go", "local_reward", "tool_reward", "credit", "turn_reward", "value", "baseline")
    for name in columns:
        changed = base.replace(**{name: getattr(base, name) + rng.uniform(0.5, 1.5, len(base))})
        moved = not np.allclose(compute_advantages(changed, scheme, cfg).advantages, expected)
        assert moved == (name in reads), (scheme, name)
