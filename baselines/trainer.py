"""The training loop: rollout -> advantages -> clipped-surrogate updates, per agent.

One optimizer step (:meth:`Trainer.train_step`):

1. draw ``tasks_per_step`` task seeds from the trainer's seed stream;
2. roll them out with the scheme's sampling mode (:mod:`baselines.rollout`) -> sample table;
3. ``compute_advantages(table, scheme)`` (:mod:`baselines.advantages`);
4. ``optim.epochs`` passes over the rows in minibatches. Each trained parameter set (the
   shared model, an agent's LoRA adapter, or an agent's own model) has its own AdamW and
   learning rate. Within a set, every agent's rows get their own forward pass and loss
   (:func:`baselines.loss.policy_loss`); the set's loss is the row-weighted sum over its agents,
   and each agent's gradient norm is measured on its own loss, so a shared model still logs
   per-agent gradient norms. Then: clip the set's gradient norm, skip the update if it is not
   finite, step.

Everything is logged by AGENT name (``agent/<name>/...``): reward, advantage mean/std,
gradient norm, KL, clip fraction, entropy, response length, the agent's reward statistics
mu_k / sigma_k and the Dr. MAS amplification factor; plus generation and training tokens/s.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence

import llm_marl_envs
from baselines import rollout
from baselines.advantages import AdvantageResult, agent_reward_stats, compute_advantages
from baselines.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from baselines.config import TrainConfig, save_config
from baselines.generation import GenerationConfig, TransformersBackend
from baselines.loss import policy_loss
from baselines.metrics import MetricsLogger, read_jsonl
from baselines.policies import PolicyKey, Team, TeamConfig, build_tiny_model
from baselines.policies.vocab_mask import word_token_ids
from baselines.samples import SampleTable


@dataclass
class ParamSet:
    """One independently optimized set of weights and the agents it serves."""

    key: PolicyKey
    agents: list[str]
    params: list[nn.Parameter]
    optimizer: torch.optim.Optimizer


# ------------------------------------------------------------------------------ setup helpers
def env_texts(env: Any, module: Any, n_episodes: int = 32, seed: int = 0) -> list[str]:
    """Texts seen in ``n_episodes`` episodes of the env's scripted random policy (tokenizer corpus)."""
    rng = np.random.default_rng(seed)
    texts: list[str] = []
    for i in range(n_episodes):
        env.reset(seed=seed + i)
        for _ in range(10_000):
            if env.unwrapped.record.done:
                break
            agent = env.agent_selection
            action = module.random_policy(env, agent, rng)
            texts.append(str(action))
            env.step(action)
        for agent in env.unwrapped.possible_agents:
            texts.extend(m["content"] for m in env.observe_chat(agent))
    return texts


def chance_reward(env: Any, module: Any, n_episodes: int = 1000, seed: int = 10**6) -> float:
    """Mean episode return of the env's scripted random policy (the "chance" level)."""
    rng = np.random.default_rng(seed)
    total = 0.0
    for i in range(n_episodes):
        env.reset(seed=seed + i)
        for _ in range(10_000):
            if env.unwrapped.record.done:
                break
            env.step(module.random_policy(env, env.agent_selection, rng))
        total += env.unwrapped.record.total_reward
    return total / n_episodes


def build_team(config: TrainConfig, agents: list[str], texts: list[str], run_dir: Path, env: Any = None) -> Team:
    """Load ``config.model.path``, or build the tiny local model over ``texts`` when it is None;
    then apply the word mask of :func:`mask_words` (``env`` declares its ``action_words``)."""
    path = config.model.path
    if path is None:
        tiny_dir = Path(config.model.tiny_dir) if config.model.tiny_dir else run_dir / "tiny_model"
        extra = [str(w) for w in config.env.kwargs.get("words", ())]
        build_tiny_model(tiny_dir, texts=texts, tokenizer=config.model.tokenizer, extra_words=extra,
                         hidden_size=config.model.tiny_hidden_size, num_layers=config.model.tiny_layers,
                         num_heads=config.model.tiny_heads, seed=config.seed,
                         init_std=config.model.tiny_init_std, embed_std=config.model.tiny_embed_std,
                         head_std=config.model.tiny_head_std, qk_std=config.model.tiny_qk_std,
                         tie_embeddings=config.model.tiny_tie_embeddings,
                         sliding_window=config.model.tiny_sliding_window)
        path = str(tiny_dir)
    team_config = TeamConfig(mode=config.model.sharing, model=path, lora_r=config.model.lora_r,
                             lora_alpha=config.model.lora_alpha, dtype=config.model.dtype, device=config.device,
                             reference=config.loss.kl_coef > 0)
    team = Team.from_config(team_config, agents)
    for slot, slot_agents in team.models_and_agents().items():
        words = mask_words(config, env, slot_agents)
        if words:
            team.restrict_vocabulary(slot, word_token_ids(team.tokenizer(slot_agents[0]), words))
    return team


def mask_words(config: TrainConfig, env: Any, agents: list[str]) -> list[str] | None:
    """Words the model serving ``agents`` is restricted to: ``model.restrict_to_words``, else the env's
    ``action_words`` of those agents (when ``model.mask_to_action_words``), else None (no mask)."""
    if config.model.restrict_to_words:
        return list(config.model.restrict_to_words)
    if not config.model.mask_to_action_words or env is None:
        return None
    declared = [getattr(env.unwrapped, "action_words", lambda agent: None)(agent) for agent in agents]
    if any(words is None for words in declared):
        return None  # one free-text agent on this policy: no mask
    return list(dict.fromkeys(w for words in declared for w in words))


def default_run_dir(config: TrainConfig) -> Path:
    name = config.log.run_name or (
        f"{config.env.name.replace('/', '_')}-{config.scheme}-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}")
    return Path(config.log.out_dir) / name


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _mean(values: list[float]) -> float:
    return float(sum(values) / len(values)) if values else float("nan")


# ------------------------------------------------------------------------------ trainer
class Trainer:
    """Trains a :class:`~baselines.policies.Team` on one registered environment (module docstring)."""

    def __init__(self, config: TrainConfig, run_dir: str | Path | None = None, *, team: Team | None = None) -> None:
        self.config = config
        self.run_dir = Path(run_dir) if run_dir is not None else default_run_dir(config)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        seed_everything(config.seed)
        spec = llm_marl_envs.spec(config.env.name)
        self.env_module = spec.load()
        self.pool = rollout.EnvPool(lambda: spec.make(**config.env.kwargs))
        self.agents = list(self.pool.take(1)[0].unwrapped.possible_agents)
        self.pool.release()
        if team is None:
            env = spec.make(**config.env.kwargs)
            team = build_team(config, self.agents, env_texts(env, self.env_module), self.run_dir, env=env)
        self.team = team
        g = config.generation
        # the backend samples call i with seed (gen seed + i): reproducible, and resumable by its call counter
        self.gen_config = GenerationConfig(max_new_tokens=g.max_new_tokens, temperature=g.temperature,
                                           top_p=g.top_p, top_k=g.top_k, seed=config.seed * 1_000_003 + 1)
        self.backend = self._make_backend()
        self.param_sets = self._make_param_sets()
        self.task_rng = np.random.default_rng(config.seed)
        self.mode = config.rollout_mode
        self.step = 0
        self._chance: float | None = None

    # -------------------------------------------------------------------- construction
    def _make_backend(self) -> Any:
        g = self.config.generation
        if g.backend == "vllm":
            from baselines.generation.vllm_backend import VLLMBackend  # optional dependency

            return VLLMBackend(self.team, self.gen_config, gpu_memory_utilization=g.vllm_gpu_memory_utilization)
        return TransformersBackend(self.team, self.gen_config, max_batch_size=g.max_batch_size or None)

    def _make_param_sets(self) -> list[ParamSet]:
        o = self.config.optim
        unknown = set(o.agent_lr) - set(self.agents)
        if unknown:
            raise ValueError(f"optim.agent_lr names unknown agents {sorted(unknown)}; agents: {self.agents}")
        sets = []
        for key in self.team.policy_keys():
            agents = self.team.agents_of(key)
            lrs = {o.agent_lr.get(a, o.lr) for a in agents}
            if len(lrs) > 1:
                raise ValueError(f"agents {agents} share the weights of {key} but optim.agent_lr gives them "
                                 f"different learning rates {sorted(lrs)}; use model.sharing=lora or separate")
            params = list(self.team.trainable_parameters(agents[0]).values())
            if not params:
                raise ValueError(f"policy {key} has no trainable parameters")
            opt = torch.optim.AdamW(params, lr=lrs.pop(), betas=o.betas, weight_decay=o.weight_decay)
            sets.append(ParamSet(key, agents, params, opt))
        return sets

    # -------------------------------------------------------------------- one step
    def next_tasks(self) -> list[rollout.Task]:
        seeds = self.task_rng.integers(0, 2**31 - 1, size=self.config.rollout.tasks_per_step)
        return [rollout.Task(int(s)) for s in seeds]

    def collect(self, tasks: list[rollout.Task]) -> rollout.RolloutResult:
        r = self.config.rollout
        with torch.no_grad():
            return rollout.sample(
                self.mode, self.pool, tasks, self.backend, group_size=r.group_size, tree_depth=r.tree_depth,
                gamma=self.config.advantage.gamma, with_credit=self.config.scheme == "sharp", credit_method=r.credit_method,
                credit_mode=r.credit_mode, tool_reward_key=r.tool_reward_key, max_steps=r.max_steps_per_episode)

    def train_step(self) -> dict[str, float]:
        """Rollout, advantages and update for one optimizer step; returns the step's metrics."""
        t0 = time.perf_counter()
        result = self.collect(self.next_tasks())
        t1 = time.perf_counter()
        table = result.table
        adv = compute_advantages(table, self.config.scheme, self.config.advantage)
        update = self.update(table, adv)
        self.backend.sync_weights()  # no-op for transformers; pushes weights into vLLM engines
        t2 = time.perf_counter()
        self.step += 1
        metrics = self._step_metrics(result, adv, update)
        metrics.update({
            "time/rollout_s": t1 - t0, "time/update_s": t2 - t1, "time/step_s": t2 - t0,
            "time/generation_share": result.gen.seconds / max(t2 - t0, 1e-9),
            "tokens_per_s/generation": (result.gen.prompt_tokens + result.gen.completion_tokens)
            / max(result.gen.seconds, 1e-9),
            "tokens_per_s/generated": result.gen.completion_tokens / max(result.gen.seconds, 1e-9),
            "tokens_per_s/train": update["train_tokens"] / max(update["train_seconds"], 1e-9),
        })
        return metrics

    def update(self, table: SampleTable, adv: AdvantageResult) -> dict[str, Any]:
        """``optim.epochs`` passes of minibatch updates over the kept rows of ``table``."""
        o = self.config.optim
        lengths = table.completion_lengths
        rows = np.flatnonzero(adv.keep & (lengths > 0))
        advantages = torch.as_tensor(adv.advantages, dtype=torch.float32)
        old_all = self._old_logprobs(table, rows) if o.recompute_old_logprobs else None
        per_agent: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        per_set: dict[str, list[float]] = defaultdict(list)
        skipped = 0
        train_tokens = 0
        start = time.perf_counter()
        gen = torch.Generator().manual_seed(self.config.seed * 1_000_003 + self.step)
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
                        loss, stats = self._agent_loss(agent, table, idx, advantages, old_all)
                        weight = len(idx) / len(set_rows)
                        grads = torch.autograd.grad(loss * weight, pset.params, allow_unused=True)
                        norm = _grad_norm(grads) / weight
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

    def _agent_loss(
        self, agent: str, table: SampleTable, idx: np.ndarray, advantages: torch.Tensor,
        old_all: dict[int, torch.Tensor] | None,
    ) -> tuple[torch.Tensor, dict[str, float]]:
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

    def _old_logprobs(self, table: SampleTable, rows: np.ndarray) -> dict[int, torch.Tensor]:
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

    # -------------------------------------------------------------------- metrics
    def _step_metrics(self, result: rollout.RolloutResult, adv: AdvantageResult, update: dict) -> dict[str, float]:
        table = result.table
        m: dict[str, float] = {
            "reward": _mean(result.returns),
            "reward_std": float(np.std(result.returns)) if result.returns else float("nan"),
            "n_rows": float(len(table)),
            "n_trained_rows": float(update["rows"]),
            "skipped_updates": float(update["skipped"]),
        }
        m.update({f"adv/{k}": v for k, v in adv.stats.items()})
        m.update({f"rollout/{k}": float(v) for k, v in result.info.items() if isinstance(v, (int, float))})
        stats = agent_reward_stats(table, self.config.advantage, values=adv.values)
        lengths = table.completion_lengths
        for agent in self.agents:
            rows = table.agent == agent
            p = f"agent/{agent}/"
            if rows.any():
                a = adv.advantages[rows]
                m.update({p + "reward": float(table.reward[rows].mean()), p + "adv_mean": float(a.mean()),
                          p + "adv_std": float(a.std()), p + "response_len": float(lengths[rows].mean()),
                          p + "n_rows": float(rows.sum())})
            if agent in stats:
                s = stats[agent]
                m.update({p + "mu": s.mu, p + "sigma": s.sigma, p + "amplification": s.amplification})
            for key, values in update["per_agent"].get(agent, {}).items():
                name = {"approx_kl": "kl", "kl_ref": "kl_ref"}.get(key, key)
                if key in ("grad_norm", "approx_kl", "kl_ref", "clip_frac", "entropy", "loss", "ratio_mean",
                           "clip_frac_low", "clip_frac_high"):
                    m[p + name] = _mean(values)
                if key == "grad_norm":
                    m[p + "grad_norm_max"] = float(max(values))
        for key, values in update["per_set"].items():
            m[f"policy/{key}/grad_norm"] = _mean(values)
        return m

    # -------------------------------------------------------------------- evaluation
    def evaluate(self, n_episodes: int = 256, seed: int = 12_345) -> float:
        """Mean joint return of ``n_episodes`` sampled episodes on held-out seeds.

        Uses its own seeded backend, so evaluating never changes the training run's random streams."""
        rng = np.random.default_rng(seed)
        tasks = [rollout.Task(int(s)) for s in rng.integers(2**31 - 1, 2**32 - 1, size=n_episodes)]
        backend = TransformersBackend(self.team, dataclasses.replace(self.gen_config, seed=seed),
                                      max_batch_size=self.config.generation.max_batch_size or None)
        with torch.no_grad():
            result = rollout.sample("episodes", self.pool, tasks, backend, group_size=1,
                                    max_steps=self.config.rollout.max_steps_per_episode)
        return _mean(result.returns)

    def chance(self) -> float:
        """Mean return of the env's scripted random policy (cached)."""
        if self._chance is None:
            env = llm_marl_envs.make(self.config.env.name, **self.config.env.kwargs)
            self._chance = chance_reward(env, self.env_module)
        return self._chance

    # -------------------------------------------------------------------- checkpoints
    def state(self) -> dict[str, Any]:
        return {
            "team": self.team.state_dict(),
            "optimizers": {str(s.key): s.optimizer.state_dict() for s in self.param_sets},
            "rng": rng_state(self.task_rng),
            "generation_calls": getattr(self.backend, "_calls", 0),
            "config": self.config.to_dict(),
        }

    def save(self) -> Path:
        return save_checkpoint(self.run_dir, self.step, self.state())

    def load(self, path: str | Path) -> None:
        """Restore weights, optimizer states, RNG states and the step counter (exact resume)."""
        ckpt = load_checkpoint(path)
        self.team.load_state_dict(ckpt["team"])
        for s in self.param_sets:
            s.optimizer.load_state_dict(ckpt["optimizers"][str(s.key)])
        set_rng_state(ckpt["rng"], self.task_rng)
        if hasattr(self.backend, "_calls"):  # the backend seeds call i with (seed + i)
            self.backend._calls = int(ckpt["generation_calls"])
        self.step = int(ckpt["step"])

    # -------------------------------------------------------------------- the run
    def fit(self, resume: str | Path | None = None, eval_episodes: int = 256) -> dict[str, Any]:
        """Train for ``config.steps`` steps with logging, checkpoints, final eval and plot."""
        from tqdm.auto import tqdm

        from baselines.plotting import plot_run

        cfg = self.config
        if resume is not None:
            self.load(resume)
        save_config(cfg, self.run_dir / "config.yaml")
        logger = MetricsLogger(self.run_dir, tensorboard=cfg.log.tensorboard, wandb=cfg.log.wandb,
                               wandb_project=cfg.log.wandb_project, config=cfg.to_dict(), resume_step=self.step)
        chance = self.chance()
        start = time.perf_counter()
        recent: list[float] = []
        bar = tqdm(total=cfg.steps, initial=self.step, disable=not cfg.log.progress, desc=cfg.scheme,
                   dynamic_ncols=True)
        try:
            while self.step < cfg.steps:
                metrics = self.train_step()
                metrics["time/elapsed_s"] = time.perf_counter() - start
                logger.log(self.step, metrics)
                recent = (recent + [metrics["reward"]])[-3:]
                bar.update(1)
                bar.set_postfix(reward=f"{metrics['reward']:.3f}", step_s=f"{metrics['time/step_s']:.2f}")
                if cfg.log.log_every and self.step % cfg.log.log_every == 0:
                    bar.write(self._line(metrics))
                if cfg.log.save_every and self.step % cfg.log.save_every == 0:
                    self.save()
                if cfg.target_reward is not None and len(recent) == 3 and _mean(recent) >= cfg.target_reward:
                    bar.write(f"target reward {cfg.target_reward} reached at step {self.step}")
                    break
        finally:
            bar.close()
        final = self.evaluate(eval_episodes) if eval_episodes else float("nan")
        wall = time.perf_counter() - start
        logger.log(self.step, {"eval/reward": final, "eval/chance": chance, "time/elapsed_s": wall})
        logger.close()
        self.save()
        self.team.save(self.run_dir / "team")
        plot = None
        if cfg.log.plot:
            plot = plot_run(read_jsonl(self.run_dir / "metrics.jsonl"), self.run_dir / "curves.png",
                            title=f"{cfg.env.name} / {cfg.scheme}", chance=chance)
        print(f"final reward {final:.3f} (chance {chance:.2f}) after {self.step} steps in {wall:.0f}s "
              f"[{cfg.scheme} on {cfg.env.name}; eval over {eval_episodes} episodes] -> {self.run_dir}",
              flush=True)
        return {"final_reward": final, "chance": chance, "steps": self.step, "wall_s": wall,
                "run_dir": str(self.run_dir), "plot": str(plot) if plot else None}

    def _line(self, m: dict[str, float]) -> str:
        parts = [f"step {self.step:4d}", f"reward {m['reward']:.3f}"]
        for agent in self.agents:
            g = m.get(f"agent/{agent}/grad_norm")
            if g is not None:
                parts.append(f"{agent} |g| {g:.3g}")
        parts.append(f"{m['time/step_s']:.2f}s/step")
        return "  ".join(parts)


def _grad_norm(grads: tuple[torch.Tensor | None, ...]) -> float:
    sq = [g.detach().float().pow(2).sum() for g in grads if g is not None]
    return float(torch.stack(sq).sum().sqrt()) if sq else 0.0
