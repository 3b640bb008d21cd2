"""How far training moved each agent's policy from where it started.

The trainer's per-step ``kl`` is KL(pi_old || pi) inside one update; with one epoch over one
minibatch it is zero by construction and says nothing about how far a run has gone. This
module measures the distance a whole run covered: keep a copy of the trainable parameters at
the start (:func:`snapshot`), and after training score the same completions under the
trained and the starting parameters (:func:`drift`). Per agent it reports

- ``kl``: the k3 estimate of KL(trained || start) per completion token,
  ``mean(exp(d) - d - 1)`` with ``d = logp_start - logp_trained`` (completions sampled by the
  trained policy, or one step before it, so the estimate is close to unbiased);
- ``logp_change``: the mean per-token log-probability the trained policy gained on them;
- ``weight_change``: ``||theta - theta_start|| / ||theta_start||`` over the agent's trainable
  parameters (for a LoRA adapter, whose B starts at zero, relative to the adapter's A).

:mod:`baselines.experiments.heldout_training` reports it for every run it trains. For a run saved
earlier (its ``config.yaml`` and ``team/``):

    python -m baselines.experiments.policy_drift runs/<run>/seed0 [runs/<run>/seed1 ...] --tasks 2 --threads 1

rebuilds the run's starting team from its config (same seed: same initial weights, the base
model for LoRA), loads the trained weights, lets the trained team play ``--tasks`` held-out
tasks (held-out seeds; the task's eval split where it has one) with the run's group size, and
scores those completions under both.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines.config import load_config
from baselines.evaluate_core import held_out_kwargs, held_out_tasks
from baselines.policies.team import Team
from baselines.policies.team_files import read_team
from baselines.samples import SampleTable
from baselines.trainer import Trainer


def snapshot(team: Team) -> dict[str, dict[str, torch.Tensor]]:
    """A copy of the team's trained weights (:meth:`Team.state_dict`), to compare against later."""
    return {key: {n: t.clone() for n, t in params.items()} for key, params in team.state_dict().items()}


def drift(team: Team, start: dict[str, dict[str, torch.Tensor]], table: SampleTable, *,
          temperature: float = 1.0, max_rows: int = 64) -> dict[str, dict[str, float]]:
    """Per agent: KL(trained || start) and log-prob change on ``table``'s completions, and weight change."""
    rows = {a: [i for i in range(len(table)) if table.agent[i] == a and len(table.completion_ids[i])][:max_rows]
            for a in team.agents}

    def score() -> dict[str, torch.Tensor]:
        with torch.no_grad():
            return {a: torch.cat(team.sequence_logprobs(a, [table.prompt_ids[i] for i in idx],
                                                        [table.completion_ids[i] for i in idx],
                                                        temperature=temperature)[0])
                    for a, idx in rows.items() if idx}

    trained_state = snapshot(team)  # (state_dict() shares the parameters' storage on CPU)
    trained = score()
    team.load_state_dict(start)
    try:
        started = score()
    finally:
        team.load_state_dict(trained_state)
    out: dict[str, dict[str, float]] = {}
    for agent in team.agents:
        key = str(team.policy_key(agent))
        now, base = trained_state[key], start[key]
        moved = float(torch.sqrt(sum(((now[n] - base[n]) ** 2).sum() for n in base)))
        size = float(torch.sqrt(sum((t**2).sum() for t in base.values())))
        result = {"weight_change": moved / size if size else float("nan"), "kl": float("nan"),
                  "logp_change": float("nan"), "tokens": 0.0}
        if agent in trained:
            d = started[agent] - trained[agent]
            result.update(kl=float((torch.expm1(d) - d).mean()), logp_change=float((-d).mean()),
                          tokens=float(d.numel()))
        out[agent] = result
    return out


def summarize(per_agent: dict[str, dict[str, float]]) -> dict[str, Any]:
    """The mean over agents of each figure, plus the per-agent table."""
    keys = ("kl", "logp_change", "weight_change")
    return {**{k: float(np.nanmean([v[k] for v in per_agent.values()])) for k in keys}, "per_agent": per_agent}


def drift_of_saved_run(run_dir: str | Path, tasks: int = 2, seed: int = 12_345) -> dict[str, Any]:
    """:func:`drift` of a saved run (its ``config.yaml`` and ``team/``) on ``tasks`` held-out tasks."""
    run_dir = Path(run_dir)
    config = load_config(str(run_dir / "config.yaml"), [])
    config.env.kwargs = held_out_kwargs(config.env.name, dict(config.env.kwargs), "eval")
    config.log.tensorboard = config.log.progress = config.log.plot = False
    with tempfile.TemporaryDirectory() as scratch:
        trainer = Trainer(config, scratch)
        start = snapshot(trainer.team)
        _, agents, state = read_team(run_dir / "team")
        if agents != trainer.team.agents:
            raise ValueError(f"{run_dir}: team agents {agents}, config's task has {trainer.team.agents}")
        trainer.team.load_state_dict(state)
        table = trainer.collect(held_out_tasks(tasks, seed)).table
        return summarize(drift(trainer.team, start, table, temperature=trainer.gen_config.scoring_temperature))


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="run folders holding config.yaml and team/")
    ap.add_argument("--tasks", type=int, default=2, help="held-out tasks to sample (x the run's group size)")
    ap.add_argument("--seed", type=int, default=12_345, help="picks the held-out tasks")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    ap.add_argument("--out", help="write the results here as JSON")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    results = []
    for run in args.runs:
        moved = drift_of_saved_run(run, args.tasks, args.seed)
        results.append({"run": str(run), **moved})
        for agent, v in moved["per_agent"].items():
            print(f"{run} [{agent}]: KL(trained || start) {v['kl']:.3g} per token over {v['tokens']:.0f} tokens, "
                  f"log-prob {v['logp_change']:+.3g} per token, weights moved {v['weight_change']:.3g} (relative)",
                  flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
