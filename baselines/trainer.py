"""The training loop: rollout -> advantages -> clipped-surrogate updates, per agent.

One optimizer step (:meth:`Trainer.train_step`):

1. draw ``tasks_per_step`` task seeds from the trainer's seed stream;
2. roll them out with the scheme's sampling mode (:mod:`baselines.rollout`) -> sample table;
3. ``compute_advantages(table, scheme)`` (:mod:`baselines.advantages`);
4. ``optim.epochs`` passes over the rows in minibatches, per trained parameter set
   (:mod:`baselines.update`).

Metrics (:mod:`baselines.step_metrics`) are logged by AGENT name, plus generation and training
tokens/s. Set-up helpers (tokenizer corpus, team, run folder) live in :mod:`baselines.trainer_setup`.

Data parallelism (:mod:`baselines.distributed`, docs/scaling.md): given a :class:`DistContext` of
several ranks, each rank rolls out its share of the step's tasks, the sample tables are gathered,
advantages are computed on the whole table, and the update sums gradients across ranks; only rank 0
writes logs, checkpoints and plots. With ``distributed.fsdp`` the models are sharded across the ranks
(:mod:`baselines.sharding`) and gathered whole for generation only.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

import llm_marl_envs
from baselines import rollout
from baselines.advantages import CRITIC_SCHEMES, AdvantageResult, compute_advantages
from baselines.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from baselines.config import TrainConfig, save_config
from baselines.critic import Critic, make_critic
from baselines.distributed import DistContext
from baselines.generation import GenerationConfig, TransformersBackend
from baselines.heldout import PeriodicEval, final_tasks, play_heldout
from baselines.metrics import MetricsLogger, read_jsonl
from baselines.policies import Team
from baselines.report.capture import save_step_samples
from baselines.samples import SampleTable
from baselines.sharding import Sharding
from baselines.step_metrics import mean, progress_line, step_metrics
from baselines.trainer_setup import (  # noqa: F401  (re-exported: the trainer's public helpers)
    build_team,
    chance_reward,
    default_run_dir,
    env_texts,
    mask_words,
    seed_everything,
)
from baselines.update import ParamSet, Updater, make_param_sets  # noqa: F401  (ParamSet re-exported)


# ------------------------------------------------------------------------------ trainer
class Trainer:
    """Trains a :class:`~baselines.policies.Team` on one registered environment (module docstring)."""

    def __init__(self, config: TrainConfig, run_dir: str | Path | None = None, *, team: Team | None = None,
                 dist: DistContext | None = None) -> None:
        self.config = config
        self.dist = dist = dist or DistContext.single()
        if dist.active and config.loss.loss_agg_mode == "seq-mean-token-sum-norm" and config.loss.norm_len is None:
            raise ValueError("data-parallel training needs loss.norm_len with seq-mean-token-sum-norm "
                             "(the padded length it falls back to differs between ranks)")
        if dist.active and any(m.device for m in config.model.agents.values()):
            raise ValueError("model.agents.<agent>.device places each agent's model itself: not with several "
                             "ranks (each rank takes one device, docs/scaling.md)")
        self.run_dir = Path(dist.broadcast_object(str(run_dir if run_dir is not None else default_run_dir(config))))
        if dist.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        dist.barrier()
        seed_everything(config.seed)
        spec = llm_marl_envs.spec(config.env.name)
        self.env_module = spec.load()
        env_kwargs = dict(config.env.kwargs)
        self.sandbox = None
        if config.ray.sandbox_actors > 0:  # code runs in Ray actors, possibly on other machines
            from baselines.ray_workers import connect_sandbox

            self.sandbox = env_kwargs["sandbox"] = connect_sandbox(config.ray, spec)
        self.pool = rollout.EnvPool(lambda: spec.make(**env_kwargs))
        self.agents = list(self.pool.take(1)[0].unwrapped.possible_agents)
        self.pool.release()
        self.team = team if team is not None else self._build_team(spec)
        g = config.generation
        # the backend samples call i with seed (gen seed + i): reproducible, and resumable by its call counter;
        # each rank has its own stream
        self.gen_config = GenerationConfig(max_new_tokens=g.max_new_tokens, temperature=g.temperature,
                                           top_p=g.top_p, top_k=g.top_k,
                                           seed=config.seed * 1_000_003 + 1 + dist.rank * 1_000_000_007)
        self.backend = self._make_backend()
        dist.broadcast_params(list(self.team.trainable_parameters().values()))  # every rank starts from rank 0's
        # weights; then, with distributed.fsdp, each rank keeps its shard of every model
        self.sharding = Sharding.apply(self.team, dist, config.distributed.fsdp, config.device)
        self.param_sets = make_param_sets(config, self.team, self.agents)
        self.critic: Critic | None = None
        if config.scheme in CRITIC_SCHEMES:  # IAC / MAAC: value heads on the policies' features
            if config.distributed.fsdp and dist.active:
                raise ValueError(f"{config.scheme}'s critic reads whole models: not with distributed.fsdp")
            c = config.critic
            self.critic = make_critic(config.scheme, self.team, self.agents, hidden=c.hidden, lr=c.lr,
                                      epochs=c.epochs, device=config.device)
        self.updater = Updater(config, self.team, self.agents, self.gen_config, self.param_sets, dist, self.sharding)
        self.task_rng = np.random.default_rng(config.seed)
        self.mode = config.rollout_mode
        self.step = 0
        self._chance: float | None = None

    # -------------------------------------------------------------------- construction
    def _build_team(self, spec: Any) -> Team:
        """:func:`build_team`; with several ranks, rank 0 builds the tiny model and the others load it."""
        config = self.config
        env = spec.make(**config.env.kwargs)
        texts = env_texts(env, self.env_module)
        wait = config.model.path is None and not self.dist.is_main
        if wait:  # rank 0 builds the tiny model first, then the other ranks load what it saved
            self.dist.barrier()
            tiny_dir = Path(config.model.tiny_dir) if config.model.tiny_dir else self.run_dir / "tiny_model"
            config = dataclasses.replace(config, model=dataclasses.replace(config.model, path=str(tiny_dir)))
        team = build_team(config, self.agents, texts, self.run_dir, env=env)
        if not wait:
            self.dist.barrier()
        return team

    def _make_backend(self) -> Any:
        g = self.config.generation
        if g.backend != "transformers" and self.config.distributed.fsdp and self.dist.active:
            raise ValueError(f"distributed.fsdp supports generation.backend=transformers only, not {g.backend!r} "
                             "(the vLLM backends read whole weights; see docs/scaling.md)")
        if g.backend == "vllm":
            from baselines.generation.vllm_backend import VLLMBackend  # optional dependency

            return VLLMBackend(self.team, self.gen_config, gpu_memory_utilization=g.vllm_gpu_memory_utilization)
        if g.backend == "vllm_server":
            from baselines.generation.vllm_server import VLLMServerBackend

            if not g.vllm_server_url:
                raise ValueError("generation.backend=vllm_server needs generation.vllm_server_url")
            adapters = Path(g.vllm_adapter_dir) if g.vllm_adapter_dir else self.run_dir / "vllm_adapters"
            return VLLMServerBackend(self.team, self.gen_config, url=g.vllm_server_url,
                                     adapter_dir=adapters / f"rank{self.dist.rank}", tag=f"r{self.dist.rank}")
        return TransformersBackend(self.team, self.gen_config, **self.backend_options())

    def backend_options(self) -> dict:
        """The transformers backend's options; with ``distributed.fsdp`` models decode through ``generate``
        (the fast path's merged sampling weights would hold copies of sharded parameters)."""
        options = self.config.generation.backend_options()
        if self.team.per_agent_masks:  # each generate call must serve one adapter (one mask)
            options = {**options, "mixed_adapters": False}
        return {**options, "decode": "generate"} if self.config.distributed.fsdp else options

    # -------------------------------------------------------------------- one step
    def next_tasks(self) -> list[rollout.Task]:
        seeds = self.task_rng.integers(0, 2**31 - 1, size=self.config.rollout.tasks_per_step)
        return [rollout.Task(int(s)) for s in seeds]

    def collect(self, tasks: list[rollout.Task]) -> rollout.RolloutResult:
        r = self.config.rollout
        with torch.no_grad(), self.sharding.gathered():  # FSDP: whole weights while generating
            return rollout.sample(
                self.mode, self.pool, tasks, self.backend, group_size=r.group_size, tree_depth=r.tree_depth,
                gamma=self.config.advantage.gamma, with_credit=self.config.scheme == "sharp", credit_method=r.credit_method,
                credit_mode=r.credit_mode, tool_reward_key=r.tool_reward_key, max_steps=r.max_steps_per_episode,
                greedy_baseline=self.config.scheme == "remax", max_tree_nodes=r.max_tree_nodes)

    def train_step(self) -> dict[str, float]:
        """Rollout, advantages and update for one optimizer step; returns the step's metrics."""
        t0 = time.perf_counter()
        result = self.dist.gather_rollout(self.collect(self.dist.shard(self.next_tasks())))
        t1 = time.perf_counter()
        table = result.table
        if self.critic is not None:  # its estimates, for the scheme's GAE
            table = table.replace(value=self.critic.values(table))
        adv = compute_advantages(table, self.config.scheme, self.config.advantage)
        update = self.update(table, adv)
        critic_stats = self.critic.update(adv.values) if self.critic is not None else {}
        self.backend.sync_weights()  # no-op for transformers; pushes weights into vLLM engines
        t2 = time.perf_counter()
        self.step += 1
        if self.dist.is_main:  # samples/ for report.html (all ranks' rows): every step, or a bounded sample
            save_step_samples(self.run_dir, self.step, self.config.steps, table, adv, self.team, self.config.log)
        metrics = step_metrics(result, adv, update, self.agents, self.config.advantage)
        metrics.update({
            "time/rollout_s": t1 - t0, "time/update_s": t2 - t1, "time/step_s": t2 - t0,
            "time/generation_share": result.gen.seconds / max(t2 - t0, 1e-9),
            "tokens_per_s/generation": (result.gen.prompt_tokens + result.gen.completion_tokens)
            / max(result.gen.seconds, 1e-9),
            "tokens_per_s/generated": result.gen.completion_tokens / max(result.gen.seconds, 1e-9),
            "tokens_per_s/train": update["train_tokens"] / max(update["train_seconds"], 1e-9),
            **self.sharding.memory(self.team, [s.optimizer for s in self.param_sets]),  # rank 0's
        })
        metrics.update(critic_stats)
        graphs = getattr(self.backend, "graphs", None)
        if graphs is not None:  # the fast path's CUDA graphs (a failed capture is also warned, with its reason)
            summary = graphs.summary()
            metrics.update({"generation/cuda_graphs_on": float(summary["mode"] == "on"),
                            "generation/cuda_graph_captures": float(summary["captures"])})  # fmt: skip
        if "idle_passes" in update:  # FSDP: passes a rank ran with weight 0 to keep the collectives in step
            metrics["fsdp/idle_passes"] = float(update["idle_passes"])
        return metrics

    def update(self, table: SampleTable, adv: AdvantageResult) -> dict[str, Any]:
        """``optim.epochs`` passes of minibatch updates over the kept rows of ``table``."""
        return self.updater.update(table, adv, self.step)

    # -------------------------------------------------------------------- evaluation
    def evaluate(self, n_episodes: int = 256, seed: int = 12_345) -> float:
        """Mean joint return of ``n_episodes`` sampled episodes on held-out seeds (:mod:`baselines.heldout`).

        Uses its own seeded backend, so evaluating never changes the training run's random streams.
        With several ranks it is a collective call: each rank plays its share of the episodes."""
        return mean(play_heldout(self, self.pool, final_tasks(n_episodes, seed), seed))

    def chance(self) -> float:
        """Mean return of the env's scripted random policy (cached)."""
        if self._chance is None:
            env = llm_marl_envs.make(self.config.env.name, **self.config.env.kwargs)
            self._chance = chance_reward(env, self.env_module)
        return self._chance

    # -------------------------------------------------------------------- checkpoints
    def state(self) -> dict[str, Any]:
        """Everything the next step depends on; with several ranks (a collective call), the weights and
        optimizer states (the same on every rank; gathered whole when FSDP shards them) plus each rank's RNG
        states and generation counter."""
        per_rank = self.dist.all_gather_object((rng_state(self.task_rng), getattr(self.backend, "_calls", 0)))
        return {
            "team": self.sharding.team_state(self.team),  # full tensors, also when sharded (FSDP)
            "optimizers": {str(s.key): self.sharding.optimizer_state(s.optimizer) for s in self.param_sets},
            "rng": per_rank[0][0],
            "generation_calls": per_rank[0][1],
            "world_size": self.dist.world_size,
            "rng_per_rank": [r for r, _ in per_rank],
            "generation_calls_per_rank": [c for _, c in per_rank],
            "config": self.config.to_dict(),
            **({"critic": self.critic.state_dict()} if self.critic is not None else {}),
        }

    def save(self) -> Path:
        """Write a checkpoint (rank 0 writes; every rank must call it) and return its path."""
        state = self.state()
        path = save_checkpoint(self.run_dir, self.step, state) if self.dist.is_main else None
        return Path(self.dist.broadcast_object(str(path)))  # also: nobody goes on before the file exists

    def load(self, path: str | Path) -> None:
        """Restore weights, optimizer states, RNG states and the step counter (exact resume).

        Each rank of a run with as many ranks as the checkpoint's writer restores its own RNG states and
        generation counter; with another number of ranks, every rank takes rank 0's RNG states and
        the largest counter: training goes on correctly, but its sampling differs from an uninterrupted run."""
        ckpt = load_checkpoint(path)
        self.sharding.load_team_state(self.team, ckpt["team"])
        if self.critic is not None:
            self.critic.load_state_dict(ckpt["critic"])
        for s in self.param_sets:
            self.sharding.load_optimizer_state(s.optimizer, ckpt["optimizers"][str(s.key)])
        written_by = int(ckpt.get("world_size", 1))
        rngs = ckpt.get("rng_per_rank", [ckpt["rng"]])
        calls = ckpt.get("generation_calls_per_rank", [ckpt["generation_calls"]])
        if written_by == self.dist.world_size:
            rng, n_calls = rngs[self.dist.rank], calls[self.dist.rank]
        else:
            warnings.warn(f"checkpoint written by {written_by} rank(s), resumed on {self.dist.world_size}: "
                          "the run goes on, but not bit-for-bit as an uninterrupted run", stacklevel=2)
            rng, n_calls = rngs[0], max(calls)
        set_rng_state(rng, self.task_rng)
        if hasattr(self.backend, "_calls"):  # the backend seeds call i with (seed + i)
            self.backend._calls = int(n_calls)
        self.step = int(ckpt["step"])

    # -------------------------------------------------------------------- the run
    @staticmethod
    def _log(logger: MetricsLogger | None, step: int, metrics: dict[str, float]) -> None:
        if logger is not None:  # rank 0
            logger.log(step, metrics)

    def fit(self, resume: str | Path | None = None, eval_episodes: int = 256) -> dict[str, Any]:
        """Train for ``config.steps`` steps with logging, checkpoints, final eval and plot."""
        from tqdm.auto import tqdm

        from baselines.plotting import plot_run

        cfg = self.config
        if resume is not None:
            self.load(resume)
        main = self.dist.is_main  # only rank 0 writes logs, checkpoints and plots
        logger = None
        if main:
            save_config(cfg, self.run_dir / "config.yaml")
            logger = MetricsLogger(self.run_dir, tensorboard=cfg.log.tensorboard, wandb=cfg.log.wandb,
                                   wandb_project=cfg.log.wandb_project, config=cfg.to_dict(), resume_step=self.step)
        chance = self.chance()
        start = time.perf_counter()
        recent: list[float] = []
        heldout = PeriodicEval(self) if cfg.eval.every_steps else None
        if heldout is not None and heldout.due(self.step) and self.step == 0:  # the untrained team
            self._log(logger, 0, heldout.run(0))
        bar = tqdm(total=cfg.steps, initial=self.step, disable=not (cfg.log.progress and main), desc=cfg.scheme,
                   dynamic_ncols=True)
        try:
            while self.step < cfg.steps:
                metrics = self.train_step()
                if heldout is not None and heldout.due(self.step, final=self.step == cfg.steps):
                    metrics.update(heldout.run(self.step))
                metrics["time/elapsed_s"] = time.perf_counter() - start
                self._log(logger, self.step, metrics)
                recent = (recent + [metrics["reward"]])[-3:]
                bar.update(1)
                bar.set_postfix(reward=f"{metrics['reward']:.3f}", step_s=f"{metrics['time/step_s']:.2f}")
                if main and cfg.log.log_every and self.step % cfg.log.log_every == 0:
                    bar.write(progress_line(self.step, metrics, self.agents))
                if cfg.log.save_every and self.step % cfg.log.save_every == 0:
                    self.save()
                if cfg.target_reward is not None and len(recent) == 3 and mean(recent) >= cfg.target_reward:
                    if main:  # the gathered reward is the same on every rank: they all stop here
                        bar.write(f"target reward {cfg.target_reward} reached at step {self.step}")
                    break
        finally:
            bar.close()
        if heldout is not None and heldout.due(self.step, final=True):  # stopped early: the last step too
            self._log(logger, self.step, heldout.run(self.step))
        final = self.evaluate(eval_episodes) if eval_episodes else float("nan")
        wall = time.perf_counter() - start
        self.save()
        plot = None
        # FSDP: gathering the weights is a collective call; else only rank 0 needs them
        team_state = self.sharding.team_state(self.team) if self.sharding.enabled or main else None
        if logger is not None:
            logger.log(self.step, {"eval/reward": final, "eval/chance": chance, "time/elapsed_s": wall})
            logger.close()
            self.team.save(self.run_dir / "team", team_state)
            if cfg.log.plot:
                plot = plot_run(read_jsonl(self.run_dir / "metrics.jsonl"), self.run_dir / "curves.png",
                                title=f"{cfg.env.name} / {cfg.scheme}", chance=chance)
            outcome = f"final reward {final:.3f}" if eval_episodes else "final evaluation skipped"
            print(f"{outcome} (chance {chance:.2f}) after {self.step} steps in {wall:.0f}s "
                  f"[{cfg.scheme} on {cfg.env.name}; eval over {eval_episodes} episodes] -> {self.run_dir}",
                  flush=True)
        self.dist.barrier()
        return {"final_reward": final, "chance": chance, "steps": self.step, "wall_s": wall,
                "run_dir": str(self.run_dir), "plot": str(plot) if plot else None}
