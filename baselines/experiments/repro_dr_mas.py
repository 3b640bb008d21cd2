"""Dr. MAS (arXiv 2602.08847) at small scale: gradient amplification under one global normalization.

    python -m baselines.experiments.repro_dr_mas                     # grpo vs dr_mas, seeds 0 1 2, 60 steps
    python -m baselines.experiments.repro_dr_mas --scale 4 --plot docs/img/repro_dr_mas.png
    python -m baselines.experiments.repro_dr_mas --schemes grpo --save g.json   # then: --load g.json d.json --plot ...
    python -m baselines.experiments.repro_dr_mas --setting few_rows --plot docs/img/repro_dr_mas_few_rows.png

The lemma: with one normalization over every agent's rows, agent k's gradient second moment
is scaled by (sigma_k^2 + (mu_k - mu)^2) / sigma^2. That factor is 1 when all agents share
one reward distribution -- the default signal game, where GRPO and Dr. MAS give
bit-identical runs. Setting here: the default signal game (tiny model, CPU) whose rows carry
role-specific reward scales: every speaker row gets the team reward R, every listener row
``scale * R`` (roles whose rewards live on different scales, as with Dr. MAS's per-agent
rewards). The joint task is unchanged; the logged "reward" is still the team's R.

Two settings (``--setting``):
- ``scaled`` (default): one round, one speaker row and one listener row per episode; the
  listener's rows carry ``scale * R``. Each agent holds half the rows, and since the pooled
  variance is sum_j w_j (sigma_j^2 + (mu_j - mu)^2) (w_j: agent j's share of the rows), the
  factor is at most 1 / w_k = 2: no reward scale can amplify more.
- ``few_rows``: the agent with few rows is the one amplified. ``speaker_turns="first"`` with
  ``n_rounds=7``: the speaker sends one message per episode, the listener guesses among fresh
  candidates every round, so the speaker holds w = 1/8 of the rows (factor up to 8, gradient
  norm up to ~2.8x); the speaker's rows carry ``scale * R`` (R = rounds won, 0..7), so its
  rewards sit far from the pool's mean. Each agent has its own model and optimizer
  (``model.sharing=separate``), so each agent's update is clipped on its own norm; 8 tasks x
  8 episodes per step.

Printed per scheme and agent, over seeds (mean ± std (min..max)), for the learning phase
(the first ``--phase`` steps, before the game is solved and most groups have zero variance)
and for the rest:
- the amplification factor predicted by the lemma from the batch's reward statistics, and the
  measured second moment E[A^2] of the advantages the scheme actually gave (means over steps);
- the gradient norm of the agent's own loss, before clipping: its mean and max over the
  learning phase, and the steps where it exceeds the clip threshold (``optim.max_grad_norm``,
  where clipping starts to distort the update) -- the spikes. A threshold relative to the
  run's median is useless here: the norm falls to ~0 once the game is solved;
- the mean advantage of the agent's rows over the run (the (mu_k - mu) offset GRPO gives it);
- the gradient norm at step 1, where every scheme of a seed plays the very same rollout from the
  same weights (so the ratio of two schemes' norms there is the advantages' doing alone);
- the median gradient norm over the whole run and max / median (how far the largest step
  stands out; read it with the median: a policy that stops learning has a median near 0);
- the train reward of the last 10 steps and the held-out reward (256 episodes).
The claim holds here if Dr. MAS brings every agent's second moment to the same level, has
fewer / smaller spikes, and its reward is no worse.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from baselines.config import TrainConfig
from baselines.experiments.common import (
    Run,
    markdown_table,
    parse_experiment,
    plot_panels,
    quiet_config,
    runs_to_report,
    save_runs,
    spread,
    train_run,
)
from baselines.rollout import RolloutResult, Task
from baselines.trainer import Trainer

AGENTS = ("speaker", "listener")


@dataclass(frozen=True)
class Setting:
    """One experiment setting: config overrides and which agent's rows carry ``scale * R``."""

    overrides: tuple[str, ...]
    scaled_agent: str
    description: str
    phase: int  #: default number of steps counted as the learning phase


SETTINGS: dict[str, Setting] = {
    "scaled": Setting((), "listener", "signal game, 1 round", 15),
    "few_rows": Setting(("env.kwargs.n_rounds=7", "env.kwargs.speaker_turns=first", "model.sharing=separate",
                         "rollout.tasks_per_step=8"), "speaker",
                        "signal game, one speaker message, 7 listener rounds (speaker w = 1/8), separate models", 25),
}


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
    cols: dict[str, list[float]] = {k: [] for k in ("rows", "amp", "a2", "a2_late", "a_mean", "first", "mean", "median",
                                                    "max", "ratio", "over")}
    for r in runs:
        g = r.series(p + "grad_norm")
        a2 = r.series(p + "adv_std") ** 2 + r.series(p + "adv_mean") ** 2
        cols["rows"].append(float(np.nanmean(r.series(p + "n_rows"))))
        cols["amp"].append(float(np.nanmean(r.series(p + "amplification")[:phase])))
        cols["a2"].append(float(np.nanmean(a2[:phase])))
        cols["a2_late"].append(float(np.nanmean(a2[phase:])) if len(a2) > phase else float("nan"))
        cols["a_mean"].append(float(np.nanmean(r.series(p + "adv_mean"))))
        cols["first"].append(float(g[0]))
        cols["mean"].append(float(np.mean(g[:phase])))
        cols["median"].append(float(np.median(g)))
        cols["max"].append(float(np.max(g)))
        cols["ratio"].append(float(np.max(g) / max(np.median(g), 1e-12)))
        cols["over"].append(float(np.sum(g > clip)))
    fmt = {"rows": ".0f", "amp": ".2f", "a2": ".2f", "a2_late": ".2f", "a_mean": "+.2f", "first": ".2f",
           "mean": ".2f", "median": ".2f", "max": ".2f", "ratio": ".1f", "over": ".1f"}
    return [spread(cols[k], fmt[k]) for k in fmt]


def main(argv: list[str] | None = None) -> list[Run]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schemes", nargs="+", default=["grpo", "dr_mas"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--setting", choices=sorted(SETTINGS), default="scaled", help="see the module docstring")
    ap.add_argument("--scale", type=float, default=4.0,
                    help="reward scale of the setting's scaled agent (listener for scaled, speaker for few_rows)")
    ap.add_argument("--phase", type=int, default=None,
                    help="steps counted as the learning phase (default: 15 for scaled, 25 for few_rows)")
    ap.add_argument("--eval-episodes", type=int, default=256)
    args = parse_experiment(ap, argv)
    setting = SETTINGS[args.setting]
    args.phase = setting.phase if args.phase is None else args.phase
    scales = {a: args.scale if a == setting.scaled_agent else 1.0 for a in AGENTS}
    runs, labels = runs_to_report(args)
    args.schemes = labels or args.schemes
    with tempfile.TemporaryDirectory() as tmp:
        for scheme in [] if args.load else args.schemes:
            for seed in args.seeds:
                config = quiet_config([f"scheme={scheme}", f"seed={seed}", f"steps={args.steps}",
                                       *setting.overrides, *args.overrides])
                run = train_run(scheme, config, Path(tmp) / f"{scheme}{seed}", eval_episodes=args.eval_episodes,
                                trainer_factory=lambda c, d: ScaledRewardTrainer(c, d, scales))
                runs.append(run)
                if args.save:
                    save_runs(runs, args.save)
                print(f"{scheme:7s} seed {seed}: eval {run.final_eval:.3f}, last-10 train reward "
                      f"{np.mean(run.series('reward')[-10:]):.3f}, {run.seconds:.0f}s", flush=True)
    clip = quiet_config([*setting.overrides, *args.overrides]).optim.max_grad_norm
    rows = []
    for scheme in args.schemes:
        mine = [r for r in runs if r.label == scheme]
        rows += [[scheme, agent, *agent_summary(mine, agent, clip, args.phase)] for agent in AGENTS]
        rows.append([scheme, "team", f"last-10 train reward {spread([np.mean(r.series('reward')[-10:]) for r in mine])}",
                     f"held-out {spread([r.final_eval for r in mine])}", *[""] * 10])
    what = f"{setting.description}, {setting.scaled_agent} reward x{args.scale:g}"
    print(f"{what}, {len(args.seeds)} seeds x {args.steps} steps "
          f"(learning phase: steps 1-{args.phase}; clip threshold {clip:g})")
    print(markdown_table(["scheme", "agent", "rows per step", "amplification (lemma), phase", "E[A^2], phase",
                          "E[A^2], after", "mean A, all steps", "|g|, step 1",
                          "mean |g|, phase", "median |g|", "max |g|", "max / median",
                          "steps with |g| > clip"], rows))
    if args.plot:
        panels = [(f"agent/{a}/grad_norm", f"{a} |g| (before clip)") for a in AGENTS]
        k = setting.scaled_agent
        for r in runs:  # the measured second moment next to the lemma's prediction
            for m in r.metrics:
                if f"agent/{k}/adv_std" in m:
                    m[f"agent/{k}/adv_sq"] = m[f"agent/{k}/adv_std"] ** 2 + m[f"agent/{k}/adv_mean"] ** 2
        panels += [(f"agent/{k}/amplification", f"{k} amplification (lemma)"), (f"agent/{k}/adv_sq", f"{k} E[A^2]"),
                   ("reward", "team reward (train)")]
        log_y = [f"agent/{a}/grad_norm" for a in AGENTS] if args.setting == "few_rows" else []
        print(f"plot: {plot_panels(runs, panels, args.plot, title=f'Dr. MAS vs GRPO, {what}', log_y=log_y)}")
    return runs


if __name__ == "__main__":
    main()
