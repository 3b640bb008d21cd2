"""The policy update of one optimizer step: minibatched clipped-surrogate passes, per parameter set.

Each trained parameter set (the shared model, an agent's LoRA adapter, or an agent's own model)
has its own AdamW and learning rate (:func:`make_param_sets`). Within a set, every agent's rows
get their own forward pass and loss (:func:`baselines.loss.policy_loss`); the set's loss is the
row-weighted sum over its agents, and each agent's gradient norm is measured on its own loss, so
a shared model still logs per-agent gradient norms. Then: clip the set's gradient norm, skip the
update if it is not finite, step. ``optim.micro_batch_rows`` splits an agent's rows into passes of
that many rows whose gradients add up to the one-pass gradient (each pass's loss scaled by its share,
like a rank's below): less peak memory, the same update.

Under data parallelism (:mod:`baselines.distributed`) each agent's rows of a minibatch are dealt
round-robin to the ranks, each rank's loss is scaled by its share of the rows / tokens, and the
per-agent gradients are summed across ranks before they are accumulated, so every rank steps with
the single-process gradient. With FSDP (:mod:`baselines.sharding`) each agent's pass is
``backward()``-ed instead: FSDP reduce-scatters the rank-summed gradient into each rank's shard,
every rank runs every pass (a weight-0 pass where it has no rows), and clipping uses the global norm.
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
from baselines.distributed import DistContext
from baselines.generation import GenerationConfig
from baselines.loss import policy_loss
from baselines.policies import PolicyKey, Team
from baselines.samples import SampleTable
from baselines.sharding import Sharding


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
                 param_sets: list[ParamSet], dist: DistContext | None = None,
                 sharding: Sharding | None = None) -> None:
        self.config = config
        self.dist = dist or DistContext.single()
        self.sharding = sharding or Sharding(dist_ctx=self.dist)
        self._idle = 0  # FSDP: this rank's weight-0 passes (no rows of the agent here) in this update
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
        self._idle = 0
        old_all = self.old_logprobs(table, rows) if o.recompute_old_logprobs else None
        per_agent: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        per_set: dict[str, list[float]] = defaultdict(list)
        pending: list[tuple[str, int, dict[str, float]]] = []
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
                        weight = len(idx) / len(set_rows)
                        local = idx[self.dist.rank::self.dist.world_size]  # all of idx in one process
                        train_tokens += int(sum(len(table.prompt_ids[i]) + lengths[i] for i in local))
                        accumulate = self._accumulate_sharded if self.sharding.enabled else self._accumulate
                        norm, stats = accumulate(pset, agent, table, idx, local, weight, advantages, old_all)
                        if self.dist.active:  # reduced across ranks after the loop
                            per_agent[agent]["grad_norm"].append(norm)
                            pending.append((agent, len(local), stats))
                            continue
                        stats["grad_norm"] = norm
                        for k, v in stats.items():
                            per_agent[agent][k].append(v)
                    total = self.sharding.clip_grad_norm(pset.params, o.max_grad_norm if o.max_grad_norm > 0
                                                         else float("inf"))  # the global norm, even sharded
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
        idle = self._idle
        if self.dist.active:
            train_tokens, idle = self._reduce_stats(pending, train_tokens, per_agent)
        out = {"per_agent": per_agent, "per_set": per_set, "skipped": skipped, "train_tokens": train_tokens,
               "train_seconds": time.perf_counter() - start, "rows": len(rows)}
        if self.sharding.enabled:
            out["idle_passes"] = idle  # summed over the ranks
        return out

    def _accumulate(self, pset: ParamSet, agent: str, table: SampleTable, idx: np.ndarray, local: np.ndarray,
                    weight: float, advantages: torch.Tensor, old_all: dict[int, torch.Tensor] | None,
                    ) -> tuple[float, dict[str, float]]:
        """Add ``agent``'s gradient (rows ``idx``, this rank's ``local`` share) to the set's ``.grad``:
        per-agent gradients by ``autograd.grad``, summed over the ranks; returns (its norm, its stats)."""
        stats: dict[str, float] = {}
        grads: list[torch.Tensor | None] = [None] * len(pset.params)
        micro = self.config.optim.micro_batch_rows
        passes = [local[i:i + micro] for i in range(0, len(local), micro)] if micro else [local]
        parts: list[tuple[int, dict[str, float]]] = []
        for rows in (p for p in passes if len(p)):
            # one pass's share of the loss, as a rank's share under data parallelism: the sum is the whole
            scales = self._scales(table, idx, rows) if self.dist.active or len(passes) > 1 else None
            loss, part = self.agent_loss(agent, table, rows, advantages, old_all, scales)
            parts.append((len(rows), part))
            got = torch.autograd.grad(loss * weight, pset.params, allow_unused=True)
            grads = [g if a is None else a if g is None else a + g for a, g in zip(grads, got)]
        if parts:
            stats = _combine_all(parts)
        grads = self.dist.all_reduce_grads(grads, pset.params)
        for p, g in zip(pset.params, grads):
            if g is not None:
                p.grad = g if p.grad is None else p.grad + g
        return grad_norm(grads) / weight, stats

    def _accumulate_sharded(self, pset: ParamSet, agent: str, table: SampleTable, idx: np.ndarray,
                            local: np.ndarray, weight: float, advantages: torch.Tensor,
                            old_all: dict[int, torch.Tensor] | None) -> tuple[float, dict[str, float]]:
        """:meth:`_accumulate` for FSDP models: ``backward()`` reduce-scatters the (rank-summed) gradient
        into the sharded ``.grad``. Every rank must run the pass, so a rank without rows of ``agent``
        runs one of the agent's rows with weight 0 (its statistics are dropped); the agent's norm is the
        global norm of what its pass added to the shards."""
        before = self.sharding.snapshot_grads(pset.params)
        rows, scales = (local, self._scales(table, idx, local)) if len(local) else (idx[:1], (0.0, 0.0))
        self._idle += not len(local)
        loss, stats = self.agent_loss(agent, table, rows, advantages, old_all, scales)
        (loss * weight).backward()
        return self.sharding.grad_norm_since(pset.params, before) / weight, (stats if len(local) else {})

    def agent_loss(
        self, agent: str, table: SampleTable, idx: np.ndarray, advantages: torch.Tensor,
        old_all: dict[int, torch.Tensor] | None, scales: tuple[float, float] | None = None,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """The policy loss of ``agent`` on rows ``idx`` (plus the entropy bonus) and its statistics.

        ``scales`` (data parallelism): this rank's share (of the rows or tokens the loss and the
        entropy are averaged over) multiplies the policy loss and the entropy bonus."""
        prompts = [table.prompt_ids[i] for i in idx]
        completions = [table.completion_ids[i] for i in idx]
        temp = self.gen_config.scoring_temperature
        bonus = bool(self.config.optim.entropy_coef)  # else the entropy is a statistic: kept out of the graph
        logps, ents = self.team.sequence_logprobs(agent, prompts, completions, with_entropy=True,
                                                  entropy_grad=bonus, temperature=temp)
        device = logps[0].device
        lp = pad_sequence(logps, batch_first=True)
        mask = pad_sequence([torch.ones(len(x), dtype=torch.bool) for x in logps], batch_first=True).to(device)
        rollout_lp = pad_sequence([torch.tensor(table.old_logprobs[i], dtype=torch.float32) for i in idx],
                                  batch_first=True).to(device)
        old = pad_sequence([old_all[int(i)] for i in idx], batch_first=True).to(device) if old_all else rollout_lp
        ref = None
        if self.config.loss.kl_coef > 0 or self.config.log.kl_to_start:  # the KL term, or the statistic only
            ref = pad_sequence(self.team.reference_logprobs(agent, prompts, completions, temperature=temp),
                               batch_first=True).to(device)
        loss, stats = policy_loss(lp, old, advantages[torch.as_tensor(idx)].to(device), mask, self.config.loss,
                                  ref_logprobs=ref,
                                  rollout_logprobs=rollout_lp if self.config.loss.tis_cap is not None else None)
        ent = torch.cat(ents) if ents else torch.zeros(0)
        stats["entropy"] = float(ent.detach().mean()) if ent.numel() else float("nan")
        ent_scale = 1.0
        if scales is not None:
            loss, ent_scale = loss * scales[0], scales[1]
        if bonus and ent.numel():
            loss = loss - self.config.optim.entropy_coef * ent_scale * ent.mean()
        return loss, stats

    def _scales(self, table: SampleTable, idx: np.ndarray, local: np.ndarray) -> tuple[float, float]:
        """This rank's share of ``idx``: (of what the loss averages over, of the completion tokens)."""
        lengths = table.completion_lengths
        tokens = float(lengths[local].sum()) / float(lengths[idx].sum())
        if self.config.loss.loss_agg_mode == "token-mean":
            return tokens, tokens
        return len(local) / len(idx), tokens  # the seq-mean modes average over (non-empty) rows

    def _reduce_stats(self, pending: list[tuple[str, int, dict[str, float]]], train_tokens: int,
                      per_agent: dict[str, dict[str, list[float]]]) -> tuple[int, int]:
        """Each agent's per-minibatch statistics combined over the ranks (:func:`_combine`, appended to
        ``per_agent``); returns the ranks' totals of trained tokens and of weight-0 (FSDP) passes."""
        parts = self.dist.all_gather_object((pending, train_tokens, self._idle))
        for j, (agent, _, _) in enumerate(pending):
            entries = [(part[0][j][1], part[0][j][2]) for part in parts if part[0][j][1] > 0]
            for key, value in _combine_all(entries).items():
                per_agent[agent][key].append(value)
        return sum(part[1] for part in parts), sum(part[2] for part in parts)

    def old_logprobs(self, table: SampleTable, rows: np.ndarray) -> dict[int, torch.Tensor]:
        """pi_old recomputed by the training forward pass (``optim.recompute_old_logprobs``)."""
        out: dict[int, torch.Tensor] = {}
        temp = self.gen_config.scoring_temperature
        with torch.no_grad():
            for agent in self.agents:
                mine = rows[table.agent[rows] == agent]
                idx = mine[self.dist.rank::self.dist.world_size]
                # FSDP: every rank runs the forward pass (a rank without rows scores one and drops it)
                score = idx if len(idx) or not self.sharding.enabled else mine[:1]
                self._idle += len(score) > len(idx)
                if len(score):
                    logps, _ = self.team.sequence_logprobs(
                        agent, [table.prompt_ids[i] for i in score], [table.completion_ids[i] for i in score],
                        temperature=temp, batch_size=self.config.optim.micro_batch_rows or None)
                    out.update({int(i): lp.detach().cpu() for i, lp in zip(idx, logps)})
        if self.dist.active:  # each rank scored its share of the rows
            for part in self.dist.all_gather_object(out):
                out.update(part)
        return out


def _combine(key: str, values: list[tuple[int, float]]) -> float:
    """One statistic of the ranks' (rows, value) pairs: counts ``n_*`` add up, ``*_min`` / ``*_max``
    take the extreme, everything else is the row-weighted mean."""
    if key.startswith("n_"):
        return float(sum(v for _, v in values))
    if key.endswith("_min"):
        return float(min(v for _, v in values))
    if key.endswith("_max"):
        return float(max(v for _, v in values))
    return sum(n * v for n, v in values) / sum(n for n, _ in values)


def _combine_all(entries: list[tuple[int, dict[str, float]]]) -> dict[str, float]:
    """Every statistic of several (rows, statistics) parts -- ranks, or a rank's passes -- by :func:`_combine`."""
    keys = dict.fromkeys(k for _, stats in entries for k in stats)
    return {key: _combine(key, [(n, stats[key]) for n, stats in entries if key in stats]) for key in keys}


def grad_norm(grads: tuple[torch.Tensor | None, ...]) -> float:
    """L2 norm of a tuple of gradients (None entries count as zero)."""
    sq = [g.detach().float().pow(2).sum() for g in grads if g is not None]
    return float(torch.stack(sq).sum().sqrt()) if sq else 0.0
