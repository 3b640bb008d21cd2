"""Dr. MAS (arXiv 2602.08847) at small scale: gradient amplification under one global normalization.

    python -m baselines.bench.repro_dr_mas                     # grpo vs dr_mas, seeds 0 1 2, 60 steps
    python -m baselines.bench.repro_dr_mas --scale 4 --plot docs/img/repro_dr_mas.png
    python -m baselines.bench.repro_dr_mas --schemes grpo --save g.json   # then: --load g.json d.json --plot ...

The lemma: with one normalization over every agent's rows, agent k's gradient second moment
is scaled by (sigma_k^2 + (mu_k - mu)^2) / sigma^2. That factor is 1 when all agents share
one reward distribution -- the default signal game, where GRPO and Dr. MAS give
bit-identical runs. Setting here: the default signal game (tiny model, CPU) whose rows carry
role-specific reward scales: every speaker row gets the team reward R, every listener row
``scale * R`` (roles whose rewards live on different scales, as with Dr. MAS's per-agent
rewards). The joint task is unchanged; the logged "reward" is still the team's R.

Printed per scheme and agent, over seeds (mean ± std (min..max)), for the learning phase
(the first ``--phase`` steps, before the game is solved and most groups have zero variance)
and for the rest:
- the amplification factor predicted by the lemma from the batch's reward statistics, and the
  measured second moment E[A^2] of the advantages the scheme actually gave (means over steps);
- the gradient norm of the agent's own loss, before clipping: its mean and max over the
  learning phase, and the steps where it exceeds the clip threshold (``optim.max_grad_norm``,
  where clipping starts to distort the update) -- the spikes. A threshold relative to the
  run's median is useless here: the norm falls to ~0 once the game is solved;
- the train reward of the last 10 steps and the held-out reward (256 episodes).
The claim holds here if Dr. MAS brings every agent's second moment to the same level, has
fewer / smaller spikes, and its reward is no worse.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch

from baselines.bench.experiments import (
    Run,
    add_run_io_args,
    markdown_table,
    plot_panels,
    quiet_config,
    runs_to_report,
    save_runs,
    spread,
    train_run,
)
from baselines.config import TrainConfig
from baselines.rollout import RolloutResult, Task
from baselines.trainer import Trainer

AGENTS = ("speaker", "listener")


class ScaledRewardTrainer(Trainer):
    """The default trainer whose sample table carries role-specific reward scales."""

    def __init__(self, config: TrainConfig, run_dir: Path, scales: dict[str, float]) -> None:
        super().__init__(config, run_dir)
        self.scales = scales

    def collect(self, tasks: list[Task]) -> RolloutResult:
        result = super().collect(tasks)
        factor = np.array([self.scales.get(a, 1.0) for a in result.table.agent], dtype=np.float64)
        result.table = result.table.replace(reward=result.table.reward * factor)
        return result


def agent_summary(runs: list[Run], agent: str, clip: float, phase: int) -> list[str]:
    """Per-agent figures of one scheme over its seeds (see the module docstring)."""
    p = f"agent/{agent}/"
    cols: dict[str, list[float]] = {k: [] for k in ("amp", "a2", "a2_late", "mean", "max", "over")}
    for r in runs:
        g = r.series(p + "grad_norm")
        a2 = r.series(p + "adv_std") ** 2 + r.series(p + "adv_mean") ** 2
        cols["amp"].append(float(np.nanmean(r.series(p + "amplification")[:phase])))
        cols["a2"].append(float(np.nanmean(a2[:phase])))
        cols["a2_late"].append(float(np.nanmean(a2[phase:])) if len(a2) > phase else float("nan"))
        cols["mean"].append(float(np.mean(g[:phase])))
        cols["max"].append(float(np.max(g)))
        cols["over"].append(float(np.sum(g > clip)))
    fmt = {"amp": ".2f", "a2": ".2f", "a2_late": ".2f", "mean": ".2f", "max": ".2f", "over": ".1f"}
    return [spread(cols[k], fmt[k]) for k in fmt]


def main(argv: list[str] | None = None) -> list[Run]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schemes", nargs="+", default=["grpo", "dr_mas"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--scale", type=float, default=4.0, help="listener reward scale (speaker: 1)")
    ap.add_argument("--phase", type=int, default=15, help="steps counted as the learning phase")
    ap.add_argument("--eval-episodes", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--plot", type=Path, default=None)
    add_run_io_args(ap)
    ap.add_argument("overrides", nargs="*", help="extra key=value config overrides")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    scales = {"speaker": 1.0, "listener": args.scale}
    runs, labels = runs_to_report(args)
    args.schemes = labels or args.schemes
    with tempfile.TemporaryDirectory() as tmp:
        for scheme in [] if args.load else args.schemes:
            for seed in args.seeds:
                config = quiet_config([f"scheme={scheme}", f"seed={seed}", f"steps={args.steps}", *args.overrides])
                run = train_run(scheme, config, Path(tmp) / f"{scheme}{seed}", eval_episodes=args.eval_episodes,
                                trainer_factory=lambda c, d: ScaledRewardTrainer(c, d, scales))
                runs.append(run)
                if args.save:
                    save_runs(runs, args.save)
                print(f"{scheme:7s} seed {seed}: eval {run.final_eval:.3f}, last-10 train reward "
                      f"{np.mean(run.series('reward')[-10:]):.3f}, {run.seconds:.0f}s", flush=True)
    clip = quiet_config([]).optim.max_grad_norm
    rows = []
    for scheme in args.schemes:
        mine = [r for r in runs if r.label == scheme]
        rows += [[scheme, agent, *agent_summary(mine, agent, clip, args.phase)] for agent in AGENTS]
        rows.append([scheme, "team", f"last-10 train reward {spread([np.mean(r.series('reward')[-10:]) for r in mine])}",
                     f"held-out {spread([r.final_eval for r in mine])}", "", "", "", ""])
    print(f"signal game, listener reward x{args.scale:g}, {len(args.seeds)} seeds x {args.steps} steps "
          f"(learning phase: steps 1-{args.phase}; clip threshold {clip:g})")
    print(markdown_table(["scheme", "agent", "amplification (lemma), phase", "E[A^2], phase", "E[A^2], after",
                          "mean |g|, phase", "max |g|", "steps with |g| > clip"], rows))
    if args.plot:
        panels = [(f"agent/{a}/grad_norm", f"{a} |g| (before clip)") for a in AGENTS]
        panels += [("agent/listener/amplification", "listener amplification"), ("reward", "team reward (train)")]
        print(f"plot: {plot_panels(runs, panels, args.plot, title=f'Dr. MAS vs GRPO, listener reward x{args.scale:g}')}")
    return runs


if __name__ == "__main__":
    main()
