"""Clipped-surrogate policy loss shared by every scheme (algorithms.md, "Policy loss").

Per token t of sequence i (mask m_it = 1 on completion tokens, 0 on padding):

    token ratio:     rho_it = exp(logp_it - logp_old_it)
    GSPO ratio:      rho_it = s_i = exp( sum_t m_it (logp_it - logp_old_it) / sum_t m_it )
    surrogate:       l_it = max(-A_it * rho_it, -A_it * clip(rho_it, 1 - eps_low, 1 + eps_high))
    mismatch (TIS):  l_it *= min(exp(logp_old_it - logp_rollout_it), tis_cap)      (detached, off by default)
    KL to ref (k3):  l_it += kl_coef * (exp(ref_it - logp_it) - (ref_it - logp_it) - 1)

then aggregated over the masked tokens:

    token-mean                sum_it m l / sum_it m
    seq-mean-token-mean       mean_i ( sum_t m l / sum_t m )            (over non-empty sequences)
    seq-mean-token-sum-norm   mean_i ( sum_t m l / norm_len )           (Dr. GRPO; norm_len a constant)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

AggMode = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")


@dataclass(frozen=True)
class LossConfig:
    """Options of :func:`policy_loss`.

    eps_low / eps_high: clip range [1 - eps_low, 1 + eps_high] (DAPO clip-higher: eps_high=0.28;
        GSPO uses much smaller values, e.g. 3e-4 / 4e-4).
    ratio_level: "token" (PPO/GRPO) or "sequence" (GSPO, MARS2+).
    loss_agg_mode: see the module docstring.
    norm_len: the constant divisor of "seq-mean-token-sum-norm" (set it to the generation max
        length); None falls back to the padded length T of the batch, which is not constant.
    kl_coef: weight of the k3 KL to the frozen reference (needs ``ref_logprobs`` when > 0).
    tis_cap: cap C of the truncated importance weight min(pi_old / pi_rollout, C) correcting
        rollout-vs-training log-prob mismatch; None = off (needs ``rollout_logprobs`` when set).
    log_ratio_clamp: log-ratios are clamped to +-this before exp (overflow guard, as in verl).
    """

    eps_low: float = 0.2
    eps_high: float = 0.2
    ratio_level: Literal["token", "sequence"] = "token"
    loss_agg_mode: AggMode = "token-mean"
    norm_len: int | None = None
    kl_coef: float = 0.0
    tis_cap: float | None = None
    log_ratio_clamp: float = 20.0

    def __post_init__(self) -> None:
        if not 0 <= self.eps_low < 1 or self.eps_high < 0:
            raise ValueError(f"need 0 <= eps_low < 1 and eps_high >= 0, got {self.eps_low}, {self.eps_high}")
        if self.ratio_level not in ("token", "sequence"):
            raise ValueError(f"ratio_level must be 'token' or 'sequence', got {self.ratio_level!r}")
        if self.loss_agg_mode not in AGG_MODES:
            raise ValueError(f"loss_agg_mode must be one of {AGG_MODES}, got {self.loss_agg_mode!r}")
        if self.norm_len is not None and self.norm_len <= 0:
            raise ValueError(f"norm_len must be positive, got {self.norm_len}")
        if self.kl_coef < 0:
            raise ValueError(f"kl_coef must be >= 0, got {self.kl_coef}")
        if self.tis_cap is not None and self.tis_cap <= 0:
            raise ValueError(f"tis_cap must be positive, got {self.tis_cap}")


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(pi || ref): exp(ref - logp) - (ref - logp) - 1 (>= 0)."""
    diff = ref_logprobs - logprobs
    return torch.exp(diff) - diff - 1


def aggregate_loss(
    per_token: torch.Tensor, mask: torch.Tensor, mode: AggMode, norm_len: int | None = None
) -> torch.Tensor:
    """Reduce a [B, T] per-token loss over the masked tokens (see the module docstring)."""
    mask = mask.to(per_token.dtype)
    token_sum = (per_token * mask).sum(-1)
    if mode == "token-mean":
        return token_sum.sum() / mask.sum().clamp(min=1)
    if mode == "seq-mean-token-mean":
        lengths = mask.sum(-1)
        nonempty = lengths > 0
        seq = token_sum / lengths.clamp(min=1)
        return (seq * nonempty).sum() / nonempty.sum().clamp(min=1)
    if mode == "seq-mean-token-sum-norm":
        denom = norm_len if norm_len is not None else per_token.shape[-1]
        return (token_sum / denom).mean() if per_token.shape[0] else token_sum.sum()
    raise ValueError(f"loss_agg_mode must be one of {AGG_MODES}, got {mode!r}")


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Per-position entropy of softmax(logits) over the last axis."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def logprobs_from_logits(logits: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[..., token_ids]: [B, T, V], [B, T] -> [B, T]."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, token_ids.long().unsqueeze(-1)).squeeze(-1)


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: LossConfig | None = None,
    *,
    ref_logprobs: torch.Tensor | None = None,
    rollout_logprobs: torch.Tensor | None = None,
    logits: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped-surrogate loss (scalar, differentiable in ``logprobs``) and float stats.

    logprobs: [B, T] current policy log-probs of the sampled tokens.
    old_logprobs: [B, T] log-probs of pi_old (the behaviour policy of the ratio).
    advantages: [B] (one per sequence) or [B, T].
    mask: [B, T] bool or 0/1; padded positions may hold any value, even inf/NaN.
    ref_logprobs: [B, T] frozen reference, for the KL term / stat.
    rollout_logprobs: [B, T] sampler log-probs, for the TIS correction (``config.tis_cap``).
    logits: [B, T, V], only for the entropy stat.
    stats: loss, pg_loss, clip_frac, clip_frac_low, clip_frac_high, approx_kl (k3 of old vs
    new), ratio_mean/min/max, n_tokens, and kl_ref, tis_weight_mean, tis_clip_frac, entropy
    when their inputs are given.
    """
    config = config or LossConfig()
    if logprobs.dim() != 2 or old_logprobs.shape != logprobs.shape or mask.shape != logprobs.shape:
        raise ValueError(
            f"logprobs, old_logprobs and mask must be equal [B, T] shapes, got "
            f"{tuple(logprobs.shape)}, {tuple(old_logprobs.shape)}, {tuple(mask.shape)}"
        )
    valid = mask.bool()
    maskf = valid.to(logprobs.dtype)
    adv = torch.where(valid, _broadcast_advantages(advantages, logprobs), 0.0)

    token_log_ratio = torch.where(valid, logprobs - old_logprobs, 0.0)
    if config.ratio_level == "sequence":
        seq_log_ratio = token_log_ratio.sum(-1) / maskf.sum(-1).clamp(min=1)
        log_ratio = seq_log_ratio.unsqueeze(-1).expand_as(logprobs)
    else:
        log_ratio = token_log_ratio
    ratio = torch.exp(log_ratio.clamp(-config.log_ratio_clamp, config.log_ratio_clamp))
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1 - config.eps_low, 1 + config.eps_high)
    per_token = torch.maximum(unclipped, clipped)

    stats: dict[str, float] = {}
    if config.tis_cap is not None:
        if rollout_logprobs is None:
            raise ValueError("LossConfig.tis_cap is set but rollout_logprobs was not given")
        raw = torch.exp(torch.where(valid, old_logprobs - rollout_logprobs, 0.0).clamp(max=config.log_ratio_clamp))
        weight = raw.clamp(max=config.tis_cap).detach()
        per_token = per_token * weight
        stats["tis_weight_mean"] = _masked_mean(weight, maskf)
        stats["tis_clip_frac"] = _masked_mean((raw > config.tis_cap).to(maskf.dtype), maskf)
    pg_loss = aggregate_loss(per_token, maskf, config.loss_agg_mode, config.norm_len)

    loss = pg_loss
    if config.kl_coef > 0 and ref_logprobs is None:
        raise ValueError("LossConfig.kl_coef > 0 needs ref_logprobs")
    if ref_logprobs is not None:
        kl = kl_k3(torch.where(valid, logprobs, 0.0), torch.where(valid, ref_logprobs, 0.0))
        if config.kl_coef > 0:
            loss = pg_loss + config.kl_coef * aggregate_loss(kl, maskf, config.loss_agg_mode, config.norm_len)
        stats["kl_ref"] = _masked_mean(kl, maskf)

    is_clipped = (clipped > unclipped).to(maskf.dtype)
    stats.update(
        loss=float(loss.detach()),
        pg_loss=float(pg_loss.detach()),
        clip_frac=_masked_mean(is_clipped, maskf),
        clip_frac_low=_masked_mean(is_clipped * (ratio < 1 - config.eps_low), maskf),
        clip_frac_high=_masked_mean(is_clipped * (ratio > 1 + config.eps_high), maskf),
        approx_kl=_masked_mean(torch.expm1(token_log_ratio) - token_log_ratio, maskf),  # k3, KL(old||new)
        ratio_mean=_masked_mean(ratio, maskf),
        ratio_min=float(ratio.detach()[valid].min()) if valid.any() else 1.0,
        ratio_max=float(ratio.detach()[valid].max()) if valid.any() else 1.0,
        n_tokens=float(maskf.sum()),
    )
    if logits is not None:
        stats["entropy"] = _masked_mean(entropy_from_logits(logits.detach()), maskf)
    return loss, stats


def _broadcast_advantages(advantages: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    adv = advantages.to(device=like.device, dtype=like.dtype)
    if adv.dim() == 1 and adv.shape[0] == like.shape[0]:
        return adv.unsqueeze(-1).expand_as(like)
    if adv.shape == like.shape:
        return adv
    raise ValueError(f"advantages must be [B] or [B, T] for logprobs {tuple(like.shape)}, got {tuple(adv.shape)}")


def _masked_mean(values: torch.Tensor, maskf: torch.Tensor) -> float:
    values = torch.where(maskf > 0, values.detach().to(maskf.dtype), 0.0)
    return float(values.sum() / maskf.sum().clamp(min=1))
