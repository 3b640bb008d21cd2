"""Policy loss on tiny tensors with hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from baselines.loss import (
    LossConfig,
    aggregate_loss,
    entropy_from_logits,
    kl_k3,
    logprobs_from_logits,
    policy_loss,
)

# Two sequences, T=3. Ratios (old log-prob 0): seq0 [1.5, 0.5, 1.1] with A=+1,
# seq1 [1.5, 0.5, pad] with A=-1. eps 0.2 -> clip range [0.8, 1.2]. Per-token loss
# max(-A r, -A clip(r)):
#   seq0: r=1.5 -> max(-1.5, -1.2) = -1.2 (clipped, high)   r=0.5 -> max(-0.5, -0.8) = -0.5
#         r=1.1 -> -1.1
#   seq1: r=1.5 -> max(1.5, 1.2) = 1.5                       r=0.5 -> max(0.5, 0.8) = 0.8 (clipped, low)
RATIOS = [[1.5, 0.5, 1.1], [1.5, 0.5, 1.0]]
MASK = torch.tensor([[1, 1, 1], [1, 1, 0]])
ADV = torch.tensor([1.0, -1.0])


def batch(pad_value: float = 0.0):
    logp = torch.log(torch.tensor(RATIOS, dtype=torch.float64))
    logp[1, 2] = pad_value
    logp.requires_grad_(True)
    old = torch.zeros(2, 3, dtype=torch.float64)
    return logp, old


@pytest.mark.parametrize(
    ("mode", "norm_len", "expected"),
    [
        ("token-mean", None, (-1.2 - 0.5 - 1.1 + 1.5 + 0.8) / 5),  # -0.1
        ("seq-mean-token-mean", None, (-2.8 / 3 + 2.3 / 2) / 2),  # 0.108333
        ("seq-mean-token-sum-norm", 4, (-2.8 / 4 + 2.3 / 4) / 2),  # -0.0625
        ("seq-mean-token-sum-norm", None, (-2.8 / 3 + 2.3 / 3) / 2),  # T=3 when no constant given
    ],
)
def test_clipped_surrogate_aggregation_modes(mode, norm_len, expected):
    logp, old = batch()
    loss, stats = policy_loss(logp, old, ADV, MASK, LossConfig(loss_agg_mode=mode, norm_len=norm_len))
    assert loss.item() == pytest.approx(expected, rel=1e-12)
    assert stats["loss"] == pytest.approx(expected, rel=1e-12)


def test_clip_stats_and_ratio_stats():
    logp, old = batch()
    _, stats = policy_loss(logp, old, ADV, MASK, LossConfig())
    assert stats["clip_frac"] == pytest.approx(2 / 5)
    assert stats["clip_frac_high"] == pytest.approx(1 / 5)
    assert stats["clip_frac_low"] == pytest.approx(1 / 5)
    assert stats["ratio_mean"] == pytest.approx(5.1 / 5)
    assert stats["ratio_min"] == pytest.approx(0.5) and stats["ratio_max"] == pytest.approx(1.5)
    assert stats["n_tokens"] == 5
    # k3 of old vs new: mean of (r - 1 - log r) over the 5 tokens
    k3 = 2 * (0.5 - math.log(1.5)) + 2 * (-0.5 - math.log(0.5)) + (0.1 - math.log(1.1))
    assert stats["approx_kl"] == pytest.approx(k3 / 5, rel=1e-10)


def test_gradients_are_zero_where_clipped_and_on_padding():
    logp, old = batch()
    loss, _ = policy_loss(logp, old, ADV, MASK, LossConfig())
    loss.backward()
    # token-mean over 5 tokens: d(-A r)/dlogp = -A r where unclipped, 0 where clipped
    expected = torch.tensor([[0.0, -0.5 / 5, -1.1 / 5], [1.5 / 5, 0.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(logp.grad, expected)


@pytest.mark.parametrize("garbage", [1e4, float("inf"), float("nan")])
def test_padded_tokens_are_ignored(garbage):
    logp, old = batch(pad_value=garbage)
    old[1, 2] = -garbage
    ref = torch.zeros(2, 3, dtype=torch.float64)
    ref[1, 2] = garbage
    loss, stats = policy_loss(logp, old, ADV, MASK, LossConfig(kl_coef=0.1), ref_logprobs=ref)
    clean_logp, clean_old = batch()
    clean, _ = policy_loss(clean_logp, clean_old, ADV, MASK, LossConfig(kl_coef=0.1), ref_logprobs=torch.zeros(2, 3))
    assert loss.item() == pytest.approx(clean.item(), rel=1e-12)
    loss.backward()
    assert torch.isfinite(logp.grad).all() and logp.grad[1, 2] == 0
    assert all(math.isfinite(v) for v in stats.values())


def test_token_level_advantages_match_broadcast():
    logp, old = batch()
    seq, _ = policy_loss(logp, old, ADV, MASK, LossConfig())
    tok, _ = policy_loss(logp, old, ADV[:, None].expand(2, 3), MASK, LossConfig())
    assert seq.item() == tok.item()


def test_gspo_sequence_ratio():
    # s0 = (1.5*0.5*1.1)^(1/3) = 0.825^(1/3), s1 = (1.5*0.5)^(1/2) = 0.75^(1/2)
    s0, s1 = 0.825 ** (1 / 3), 0.75**0.5
    logp, old = batch()
    cfg = LossConfig(ratio_level="sequence", loss_agg_mode="seq-mean-token-mean")
    loss, stats = policy_loss(logp, old, ADV, MASK, cfg)
    assert loss.item() == pytest.approx((-s0 + s1) / 2, rel=1e-12)  # both inside [0.8, 1.2]
    assert stats["ratio_mean"] == pytest.approx((3 * s0 + 2 * s1) / 5, rel=1e-12)
    # eps 0.05: s1 = 0.866 < 0.95 with A=-1 is clipped (loss 0.95); s0 = 0.938 with A=+1 is not
    logp, old = batch()
    tight = LossConfig(eps_low=0.05, eps_high=0.05, ratio_level="sequence", loss_agg_mode="seq-mean-token-mean")
    loss, stats = policy_loss(logp, old, ADV, MASK, tight)
    assert loss.item() == pytest.approx((-s0 + 0.95) / 2, rel=1e-12)
    assert stats["clip_frac"] == pytest.approx(2 / 5)  # both tokens of seq1
    loss.backward()
    # every token of seq0 gets d(-s0/2)/dlogp_t = -(1/2)(s0/3); seq1 is clipped -> 0
    expected = torch.tensor([[-s0 / 6] * 3, [0.0, 0.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(logp.grad, expected)


def test_k3_kl_value_and_kl_term():
    # logp = log 0.5, ref = log 0.25: d = ref - logp = -log 2 -> e^d - d - 1 = 0.5 + log 2 - 1
    val = kl_k3(torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)]))
    assert val.item() == pytest.approx(math.log(2) - 0.5, rel=1e-6)
    assert kl_k3(torch.tensor([-1.3]), torch.tensor([-1.3])).item() == 0.0
    logp, old = batch()
    ref = torch.full((2, 3), math.log(0.5), dtype=torch.float64) + logp.detach()  # ref - logp = -log 2
    loss, stats = policy_loss(logp, old, ADV, MASK, LossConfig(kl_coef=0.1), ref_logprobs=ref)
    assert stats["kl_ref"] == pytest.approx(math.log(2) - 0.5, rel=1e-12)
    assert loss.item() == pytest.approx(-0.1 + 0.1 * (math.log(2) - 0.5), rel=1e-12)
    assert stats["pg_loss"] == pytest.approx(-0.1, rel=1e-12)


def test_truncated_importance_correction():
    # old - rollout: token (0,0) log 3 -> weight min(3, 2) = 2; token (0,1) -log 2 -> 0.5; others 1
    logp, old = batch()
    rollout = torch.zeros(2, 3, dtype=torch.float64)
    rollout[0, 0], rollout[0, 1] = -math.log(3), math.log(2)
    loss, stats = policy_loss(logp, old, ADV, MASK, LossConfig(tis_cap=2.0), rollout_logprobs=rollout)
    assert loss.item() == pytest.approx((2 * -1.2 + 0.5 * -0.5 - 1.1 + 1.5 + 0.8) / 5, rel=1e-12)
    assert stats["tis_weight_mean"] == pytest.approx((2 + 0.5 + 1 + 1 + 1) / 5)
    assert stats["tis_clip_frac"] == pytest.approx(1 / 5)
    off, _ = policy_loss(*batch(), ADV, MASK, LossConfig(), rollout_logprobs=rollout)
    assert off.item() == pytest.approx(-0.1, rel=1e-12)  # off by default


def test_entropy_stat_and_gradient_through_logits():
    torch.manual_seed(0)
    logits = torch.zeros(2, 3, 4, requires_grad=True)  # uniform over 4 tokens: entropy log 4
    ids = torch.tensor([[0, 1, 2], [3, 0, 0]])
    logp = logprobs_from_logits(logits, ids)
    assert torch.allclose(logp, torch.full((2, 3), -math.log(4)))
    old = logp.detach() - 0.1  # ratio e^0.1 for every token
    loss, stats = policy_loss(logp, old, ADV, MASK, LossConfig(), logits=logits)
    assert stats["entropy"] == pytest.approx(math.log(4), rel=1e-6)
    loss.backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0
    assert logits.grad[1, 2].abs().sum() == 0  # padded position
    assert entropy_from_logits(torch.tensor([[0.0, -1e9]])).item() == pytest.approx(0.0, abs=1e-6)


def test_aggregate_loss_skips_empty_sequences_in_seq_mean():
    per_token = torch.tensor([[1.0, 3.0], [5.0, 7.0]])
    mask = torch.tensor([[1, 1], [0, 0]])
    assert aggregate_loss(per_token, mask, "seq-mean-token-mean").item() == 2.0
    assert aggregate_loss(per_token, mask, "token-mean").item() == 2.0
    assert aggregate_loss(per_token, mask, "seq-mean-token-sum-norm", norm_len=8).item() == 0.25


def test_config_and_input_errors():
    with pytest.raises(ValueError, match="loss_agg_mode"):
        LossConfig(loss_agg_mode="sum")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ratio_level"):
        LossConfig(ratio_level="tok")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="eps_low"):
        LossConfig(eps_low=1.0)
    logp, old = batch()
    with pytest.raises(ValueError, match="needs ref_logprobs"):
        policy_loss(logp, old, ADV, MASK, LossConfig(kl_coef=0.1))
    with pytest.raises(ValueError, match="rollout_logprobs"):
        policy_loss(logp, old, ADV, MASK, LossConfig(tis_cap=2.0))
    with pytest.raises(ValueError, match="equal \\[B, T\\] shapes"):
        policy_loss(logp, old[:, :2], ADV, MASK)
    with pytest.raises(ValueError, match="advantages must be"):
        policy_loss(logp, old, torch.ones(3), MASK)
