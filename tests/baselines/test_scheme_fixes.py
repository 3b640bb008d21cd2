"""The fixes an independent check of the schemes asked for: TIS, one MAGRPO gamma, overflow,
and whether SHARP's credit carries information (the AT-GRPO local reward: test_local_reward.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from baselines.advantages import (
    AdvantageConfig,
    NonFiniteAdvantageError,
    compute_advantages,
    credit_informativeness,
    group_normalize,
    magrpo_returns,
)
from baselines.config import load_config
from baselines.samples import Row, SampleTable
from baselines.trainer import Trainer
from tests.baselines.test_rollout import build_signal_model, signal_kwargs


# ----------------------------------------------------------------------------- TIS
def test_tis_cap_without_a_recomputed_pi_old_is_rejected():
    with pytest.raises(ValueError, match="recompute_old_logprobs=true"):
        load_config(overrides=["loss.tis_cap=2.0"])
    cfg = load_config(overrides=["loss.tis_cap=2.0", "optim.recompute_old_logprobs=true"])
    assert cfg.loss.tis_cap == 2.0 and cfg.optim.recompute_old_logprobs


# ----------------------------------------------------------------------------- one gamma
def test_rollout_gamma_is_gone_with_a_pointer_to_advantage_gamma(tmp_path):
    with pytest.raises(ValueError, match="advantage.gamma"):
        load_config(overrides=["rollout.gamma=0.5"])
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"scheme": "magrpo", "rollout": {"gamma": 0.5}}))
    with pytest.raises(ValueError, match="advantage.gamma"):
        load_config(path)


@pytest.fixture(scope="module")
def namer_dir(tmp_path_factory) -> Path:
    return build_signal_model(tmp_path_factory.mktemp("namer"), signal_kwargs(n_rounds=2), imitate_steps=25)


@pytest.mark.parametrize("mode", ["joint_tree", "episodes"])
def test_advantage_gamma_is_the_discount_the_sampler_uses(mode, namer_dir, tmp_path):
    def table_with(gamma: float) -> SampleTable:
        cfg = load_config(overrides=[
            "scheme=magrpo", f"rollout.mode={mode}", "rollout.tasks_per_step=3", "rollout.group_size=3",
            f"advantage.gamma={gamma}", "log.tensorboard=false", f"model.path={namer_dir}",
            "env.kwargs.n_rounds=2"])  # fmt: skip
        trainer = Trainer(cfg, tmp_path / f"{mode}{gamma}")
        return trainer.collect(trainer.next_tasks()).table

    zero, half = table_with(0.0), table_with(0.5)
    np.testing.assert_array_equal(zero.reward, half.reward)  # same seeds, same samples
    if mode == "joint_tree":  # reward = the node's turn reward
        np.testing.assert_array_equal(zero.return_to_go, zero.reward)
        np.testing.assert_allclose(half.return_to_go, magrpo_returns(half, 0.5))
    else:  # reward = the episode return; the turn-1 part is discounted once from turn 0
        last = zero.turn == 1
        np.testing.assert_array_equal(zero.return_to_go[~last], zero.reward[~last] - zero.return_to_go[last])
        r1 = half.return_to_go[last]  # rows: speaker, listener of turn 0, then of turn 1
        np.testing.assert_allclose(half.return_to_go[~last], half.reward[~last] - r1 + 0.5 * r1)
    assert not np.array_equal(zero.return_to_go, half.return_to_go)


# ----------------------------------------------------------------------------- overflow
@pytest.mark.parametrize("values", [[1e308, 1e308, 0.0], [1e200, -1e200, 0.0]])
def test_overflow_in_the_normalization_is_an_error_not_nan_or_zero(values):
    with pytest.raises(NonFiniteAdvantageError, match="overflowed in group 1"):
        group_normalize(np.array([1.0, 2.0, *values]), np.array([0, 0, 1, 1, 1]))
    # the same magnitudes without std are still an error when the mean overflows
    with pytest.raises(NonFiniteAdvantageError):
        group_normalize(np.array([1e308, 1e308]), np.array([0, 0]), scale_by_std=False)


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_overflow_in_a_scheme_reward_mix_is_reported():
    rows = [Row("q", e, "a", 1e308, local_reward=1e308, group="s", branch=e) for e in range(2)]
    with pytest.raises(NonFiniteAdvantageError, match="overflowed"):
        compute_advantages(SampleTable.from_rows(rows), "at_grpo", AdvantageConfig())


# ----------------------------------------------------------------------------- SHARP credit
def _credit_table(credits: list[float], rewards: list[float]) -> SampleTable:
    return SampleTable.from_rows([Row("q", e, "w", r, credit=c) for e, (r, c) in enumerate(zip(rewards, credits))])


def test_affine_credit_is_cancelled_by_per_agent_normalization():
    rewards = [0.0, 1.0, 1.0, 0.0]
    affine = _credit_table([0.1 + 0.5 * r for r in rewards], rewards)
    stats = credit_informativeness(affine, AdvantageConfig())
    assert stats == {"credit_groups": 1.0, "credit_informative_groups": 0.0, "credit_informative_frac": 0.0}
    # the same wins split differently between episodes: the credit now reorders them
    informative = _credit_table([0.0, 1.0, 0.2, 0.0], rewards)
    assert credit_informativeness(informative, AdvantageConfig())["credit_informative_frac"] == 1.0
    res = compute_advantages(informative, "sharp", AdvantageConfig())
    assert res.stats["credit_informative_frac"] == 1.0
    assert res.advantages[1] > res.advantages[2]  # the win this worker earned counts more


# ----------------------------------------------------------------------------- delayed reward
def test_signal_game_reward_at_end_pays_every_win_on_the_last_round():
    from llm_marl_envs.toy import signal_game_v0

    def turn_rewards(reward_at: str) -> list[float]:
        env = signal_game_v0.env(n_rounds=3, n_candidates=2, words=["apple", "boat"], reward_at=reward_at)
        env.reset(seed=2)  # the targets of seed 2 are boat, apple, boat
        for agent in env.agent_iter():
            _, _, term, trunc, _ = env.last()
            # the listener always says "apple": right in some rounds, wrong in others
            env.step(None if term or trunc else signal_game_v0.best_policy(env, agent) if agent == "speaker"
                     else "apple")
        return [t.reward for t in env.unwrapped.record.turns]

    per_round = turn_rewards("round")
    assert 0 < sum(per_round) < 3
    assert turn_rewards("end") == [0.0, 0.0, sum(per_round)]
    with pytest.raises(ValueError, match="reward_at"):
        signal_game_v0.env(reward_at="later")
