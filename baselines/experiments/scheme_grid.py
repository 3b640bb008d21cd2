"""The nine advantage schemes and the single-model baseline on the signal game and Plan-Path, held out.

    python -m baselines.experiments.scheme_grid --task signal --variant rloo --save runs/grid/signal_rloo.json
    python -m baselines.experiments.scheme_grid --load runs/grid/*.json --plot docs/img/scheme_grid.png

One command per cell (task x variant, seeds 0 1 2 by default); ``--load`` reports the saved cells together.
Variants: the six schemes of the project (GRPO, MAGRPO, AT-GRPO, MARS2, Dr. MAS, SHARP) and the three
other baselines of MAGRPO's trainer (RLOO, ReMax, REINFORCE), each on a team with one LoRA adapter per
agent, and ``single_model``: GRPO on ONE adapter that plays every seat (``model.sharing=single_model``),
the baseline a multi-agent result must beat. Tiny model from random weights, CPU, lr 0.01 (LoRA).

- ``signal``: the default signal game (speaker/listener, 4 words, one round, chance 0.25), 16 tasks x
  group 8 per step, 20 steps.
- ``plan_path``: multi-turn Plan-Path (3x3 grid, no walls, the plan agent alone, one move per turn,
  4 turns, progress shaping: return 2.0 when solved), 8 tasks x group 4, 20 steps. One agent, so the
  single-model team IS the LoRA team there; SHARP needs counterfactual credit, which the task does
  not offer (reported as not applicable).

Held out: ``eval.every_steps`` (:mod:`baselines.heldout`): the same 64 held-out tasks (Plan-Path:
its test split) with the same sampling seed before training, every 5 steps and at the end.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from baselines.experiments.common import (
    Run,
    markdown_table,
    parse_experiment,
    quiet_config,
    runs_to_report,
    save_figure,
    save_runs,
    spread,
    train_run,
)
from baselines.heldout import PeriodicEval
from baselines.trainer import Trainer

SCHEMES = ("grpo", "magrpo", "at_grpo", "mars2", "dr_mas", "sharp", "rloo", "remax", "reinforce")
VARIANTS = (*SCHEMES, "single_model")
COMMON = ("model.sharing=lora", "optim.lr=0.01", "steps=20", "eval.every_steps=5", "eval.episodes=64")
TASKS: dict[str, tuple[str, ...]] = {
    "signal": ("rollout.tasks_per_step=16", "rollout.group_size=8"),
    "plan_path": ("env.name=planning/grid_v0", "env.kwargs={puzzle: plan_path, size: 3, wall_density: 0.0, "
                  "tool: false, max_turns: 4, max_moves_per_turn: 1, shaping: 1.0}", "generation.max_new_tokens=1",
                  "rollout.tasks_per_step=8", "rollout.group_size=4"),
}
#: cells that cannot run, and why
NOT_APPLICABLE = {("plan_path", "sharp"): "Plan-Path offers no counterfactual credit (SHARP's phi_k)"}


def overrides(task: str, variant: str, seed: int) -> list[str]:
    """The config of one run of a cell."""
    scheme, sharing = ("grpo", ["model.sharing=single_model"]) if variant == "single_model" else (variant, [])
    return [*COMMON, *TASKS[task], f"scheme={scheme}", f"seed={seed}", *sharing]


def train_cell(task: str, variant: str, seed: int, run_dir: Path, extra: list[str]) -> Run:
    """One run: the held-out mean return on the fixed split at step 0, every 5 steps and at the end."""
    config = quiet_config([*overrides(task, variant, seed), *extra])
    heldout: dict[int, float] = {}
    evaluations: list[PeriodicEval] = []

    def factory(cfg: Any, path: Path) -> Trainer:
        trainer = Trainer(cfg, path)
        evaluations.append(PeriodicEval(trainer))
        heldout[0] = evaluations[0].run(0)["eval/heldout_reward"]
        return trainer

    def on_step(trainer: Trainer, m: dict[str, float]) -> None:
        if evaluations[0].due(trainer.step, final=trainer.step == config.steps):
            heldout[trainer.step] = m["eval/heldout_reward"] = evaluations[0].run(trainer.step)["eval/heldout_reward"]

    run = train_run(f"{task}/{variant}", config, run_dir, eval_episodes=0, trainer_factory=factory, on_step=on_step)
    run.final_eval = heldout[config.steps]
    run.extra = {"heldout": {str(k): v for k, v in heldout.items()}, "chance": float("nan")}
    return run


def report(runs: list[Run]) -> str:
    """One markdown table per task: held-out return before / after (mean ± std (min..max) over seeds)."""
    out = []
    for task in dict.fromkeys(r.label.split("/")[0] for r in runs):
        rows = []
        for variant in VARIANTS:
            mine = [r for r in runs if r.label == f"{task}/{variant}"]
            if (task, variant) in NOT_APPLICABLE:
                rows.append([variant, "n/a", "n/a", "n/a", "n/a", NOT_APPLICABLE[(task, variant)]])
                continue
            if not mine:
                continue
            start = [r.extra["heldout"]["0"] for r in mine]
            change = " / ".join(f"{r.final_eval - s:+.3f}" for r, s in zip(mine, start))
            rows.append([variant, ", ".join(str(r.seed) for r in mine), spread(start), spread([r.final_eval for r in mine]),
                         change, spread([float(np.mean(r.series("reward")[-5:])) for r in mine]),
                         spread([r.seconds for r in mine], ".0f")])
        out.append(f"### {task}\n\n" + markdown_table(
            ["variant", "seeds", "held-out, step 0", "held-out, step 20", "change per seed", "train reward, last 5",
             "seconds per run"], rows))
    return "\n\n".join(out)


def plot(runs: list[Run], path: Path) -> Path:
    """Held-out return vs step, mean over seeds, one panel per task, one line per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(dict.fromkeys(r.label.split("/")[0] for r in runs))
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.2 * len(tasks), 3.6), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for i, variant in enumerate(VARIANTS):
            mine = [r for r in runs if r.label == f"{task}/{variant}"]
            if mine:
                steps = sorted(int(s) for s in mine[0].extra["heldout"])
                values = np.array([[r.extra["heldout"][str(s)] for s in steps] for r in mine])
                ax.plot(steps, values.mean(axis=0), marker=".", color=f"C{i}", label=variant,
                        linestyle="--" if variant == "single_model" else "-")
        ax.set_title(task)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("held-out mean return (fixed split)")
    axes[0][-1].legend(fontsize=7, ncol=2)
    return save_figure(fig, path)


def main(argv: list[str] | None = None) -> list[Run]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", choices=sorted(TASKS), default="signal")
    ap.add_argument("--variant", choices=VARIANTS, default="grpo")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    args = parse_experiment(ap, argv)
    runs, _ = runs_to_report(args)
    if not args.load:
        if (args.task, args.variant) in NOT_APPLICABLE:
            raise SystemExit(f"{args.task}/{args.variant}: {NOT_APPLICABLE[(args.task, args.variant)]}")
        with tempfile.TemporaryDirectory() as tmp:
            for seed in args.seeds:
                run = train_cell(args.task, args.variant, seed, Path(tmp) / str(seed), list(args.overrides))
                runs.append(run)
                if args.save:
                    save_runs(runs, args.save)
                print(f"{run.label} seed {seed}: held-out {run.extra['heldout']['0']:.3f} -> {run.final_eval:.3f}, "
                      f"{run.seconds:.0f}s", flush=True)
    print(report(runs))
    if args.plot:
        print(f"plot: {plot(runs, args.plot)}")
    return runs


if __name__ == "__main__":
    main()
