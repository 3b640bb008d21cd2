"""The policy update of one optimizer step: minibatched clipped-surrogate passes, per parameter set.

Each trained parameter set (the shared model, an agent's LoRA adapter, or an agent's own model)
has its own AdamW and learning rate (:func:`make_param_sets`). Within a set, every agent's rows
get their own forward pass and loss (:func:`baselines.loss.policy_loss`); the set's loss is the
row-weighted sum over its agents, and each agent's gradient norm is measured on its own loss, so
a shared model still logs per-agent gradient norms. Then: clip the set's gradient norm, skip the
update if it is not finite, step.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence

from baselines.advantages import AdvantageResult
from baselines.config import TrainConfig
from baselines.generation import GenerationConfig
from baselines.loss import policy_loss
from baselines.policies import PolicyKey, Team
from baselines.samples import SampleTable


@dataclass
class ParamSet:
    """One independently optimized set of weights and the agents it serves."""

    key: PolicyKey
    agents: list[str]
    params: list[nn.Parameter]
    optimizer: torch.optim.Optimizer


def make_param_sets(config: TrainConfig, team: Team, agents: list[str]) -> list[ParamSet]:
    """One :class:`ParamSet` (with its AdamW) per policy of ``team``; checks ``optim.agent_lr``."""
    o = config.optim
    unknown = set(o.agent_lr) - set(agents)
    if unknown:
        raise ValueError(f"optim.agent_lr names unknown agents {sorted(unknown)}; agents: {agents}")
    sets = []
    for key in team.policy_keys():
        set_agents = team.agents_of(key)
        lrs = {o.agent_lr.get(a, o.lr) for a in set_agents}
        if len(lrs) > 1:
            raise ValueError(f"agents {set_agents} share the weights of {key} but optim.agent_lr gives them "
                             f"different learning rates {sorted(lrs)}; use model.sharing=lora or separate")
        params = list(team.trainable_parameters(set_agents[0]).values())
        if not params:
            raise ValueError(f"policy {key} has no trainable parameters")
        opt = torch.optim.AdamW(params, lr=lrs.pop(), betas=o.betas, weight_decay=o.weight_decay)
        sets.append(ParamSet(key, set_agents, params, opt))
    return sets


class Updater:
    """Runs ``optim.epochs`` passes of minibatch updates of ``param_sets`` over a sample table."""

    def __init__(self, config: TrainConfig, team: Team, agents: list[str], gen_config: GenerationConfig,
                 param_sets: list[ParamSet]) -> None:
        self.config = config
        self.team = team
        self.agents = agents
        self.gen_config = gen_config
        self.param_sets = param_sets

    def update(self, table: SampleTable, adv: AdvantageResult, step: int) -> dict[str, Any]:
        """``optim.epochs`` passes of minibatch updates over the kept rows of ``table``."""
        o = self.config.optim
        lengths = table.completion_lengths
        rows = np.flatnonzero(adv.keep & (lengths > 0))
        advantages = torch.as_tensor(adv.advantages, dtype=torch.float32)
        old_all = self.old_logprobs(table, rows) if o.recompute_old_logprobs else None
        per_agent: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        per_set: dict[str, list[float]] = defaultdict(list)
        skipped = 0
        train_tokens = 0
        start = time.perf_counter()
        gen = torch.Generator().manual_seed(self.config.seed * 1_000_003 + step)
        n_mb = max(1, math.ceil(len(rows) / o.minibatch_size)) if o.minibatch_size > 0 else 1
        for _ in range(o.epochs):
            order = rows[torch.randperm(len(rows), generator=gen).numpy()] if len(rows) else rows
            for chunk in np.array_split(order, n_mb):
                for pset in self.param_sets:
                    set_rows = chunk[np.isin(table.agent[chunk], pset.agents)]
                    if not len(set_rows):
                        continue
                    for p in pset.params:
                        p.grad = None
                    for agent in pset.agents:
                        idx = set_rows[table.agent[set_rows] == agent]
                        if not len(idx):
                            continue
                        loss, stats = self.agent_loss(agent, table, idx, advantages, old_all)
                        weight = len(idx) / len(set_rows)
                        grads = torch.autograd.grad(loss * weight, pset.params, allow_unused=True)
                        norm = grad_norm(grads) / weight
                        for p, g in zip(pset.params, grads):
                            if g is not None:
                                p.grad = g if p.grad is None else p.grad + g
                        stats["grad_norm"] = norm
                        for k, v in stats.items():
                            per_agent[agent][k].append(v)
                        train_tokens += int(sum(len(table.prompt_ids[i]) + lengths[i] for i in idx))
                    total = float(torch.nn.utils.clip_grad_norm_(
                        pset.params, o.max_grad_norm if o.max_grad_norm > 0 else float("inf")))
                    per_set[str(pset.key)].append(total)
                    if not math.isfinite(total) and o.skip_nonfinite:
                        skipped += 1
                        for p in pset.params:
                            p.grad = None
                        continue
                    pset.optimizer.step()
        for pset in self.param_sets:
            for p in pset.params:
                p.grad = None
        return {"per_agent": per_agent, "per_set": per_set, "skipped": skipped, "train_tokens": train_tokens,
                "train_seconds": time.perf_counter() - start, "rows": len(rows)}

    def agent_loss(
        self, agent: str, table: SampleTable, idx: np.ndarray, advantages: torch.Tensor,
        old_all: dict[int, torch.Tensor] | None,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """The policy loss of ``agent`` on rows ``idx`` (plus the entropy bonus) and its statistics."""
        prompts = [table.prompt_ids[i] for i in idx]
        completions = [table.completion_ids[i] for i in idx]
        temp = self.gen_config.scoring_temperature
        logps, ents = self.team.sequence_logprobs(agent, prompts, completions, with_entropy=True, temperature=temp)
        device = logps[0].device
        lp = pad_sequence(logps, batch_first=True)
        mask = pad_sequence([torch.ones(len(x), dtype=torch.bool) for x in logps], batch_first=True).to(device)
        rollout_lp = pad_sequence([torch.tensor(table.old_logprobs[i], dtype=torch.float32) for i in idx],
                                  batch_first=True).to(device)
        old = pad_sequence([old_all[int(i)] for i in idx], batch_first=True).to(device) if old_all else rollout_lp
        ref = None
        if self.config.loss.kl_coef > 0:
            ref = pad_sequence(self.team.reference_logprobs(agent, prompts, completions, temperature=temp),
                               batch_first=True).to(device)
        loss, stats = policy_loss(lp, old, advantages[torch.as_tensor(idx)].to(device), mask, self.config.loss,
                                  ref_logprobs=ref,
                                  rollout_logprobs=rollout_lp if self.config.loss.tis_cap is not None else None)
        ent = torch.cat(ents) if ents else torch.zeros(0)
        stats["entropy"] = float(ent.detach().mean()) if ent.numel() else float("nan")
        if self.config.optim.entropy_coef and ent.numel():
            loss = loss - self.config.optim.entropy_coef * ent.mean()
        return loss, stats

    def old_logprobs(self, table: SampleTable, rows: np.ndarray) -> dict[int, torch.Tensor]:
        """pi_old recomputed by the training forward pass (``optim.recompute_old_logprobs``)."""
        out: dict[int, torch.Tensor] = {}
        temp = self.gen_config.scoring_temperature
        with torch.no_grad():
            for agent in self.agents:
                idx = rows[table.agent[rows] == agent]
                if len(idx):
                    logps, _ = self.team.sequence_logprobs(
                        agent, [table.prompt_ids[i] for i in idx], [table.completion_ids[i] for i in idx],
                        temperature=temp)
                    out.update({int(i): lp.detach().cpu() for i, lp in zip(idx, logps)})
        return out


def grad_norm(grads: tuple[torch.Tensor | None, ...]) -> float:
    """L2 norm of a tuple of gradients (None entries count as zero)."""
    sq = [g.detach().float().pow(2).sum() for g in grads if g is not None]
    return float(torch.stack(sq).sum().sqrt()) if sq else 0.0
