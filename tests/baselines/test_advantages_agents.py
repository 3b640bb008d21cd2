"""Advantage schemes against hand-computed tables (expected numbers are written literally):
the per-agent schemes Dr. MAS and SHARP."""

from __future__ import annotations

import numpy as np
import pytest

from baselines.advantages import (
    AdvantageConfig,
    agent_reward_stats,
    agent_stats_log,
    dr_mas,
    grpo,
    sharp,
)
from baselines.credit import credit_column, shapley_values
from baselines.samples import Row, SampleTable

from .advantage_tables import EXACT, flat, table

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
