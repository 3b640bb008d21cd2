"""AT-GRPO (arXiv 2510.11062) at small scale: AT-GRPO vs GRPO vs MAGRPO on a multi-turn task.

    python -m baselines.experiments.repro_at_grpo --steps 40        # 3 schemes x seeds 0 1 2
    python -m baselines.experiments.repro_at_grpo --schemes at_grpo --save a.json   # then --load a.json g.json ...

Setting: the signal game with 2 rounds (each round pays its own win, feedback after each),
tiny model, 8 tasks per step and group size 4 for every scheme: G = 4 independent episodes
per task (GRPO), a joint tree with 4 joint actions per node (MAGRPO), 4 candidates per
agent-turn from one cloned state, continuing from the best (AT-GRPO). The schemes spend
different numbers of generations per step, so the table gives both steps and generated
sequences. Printed over seeds: held-out success rate (rounds won / rounds, 256 episodes),
the first step from which 3 consecutive steps reach 90% train success, and the sequences
generated per step. The claim (one-state groups make AT-GRPO's comparisons fair and
learning faster) holds here if AT-GRPO reaches 90% in fewer steps, at a comparable cost.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

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
from baselines.experiments.repro_magrpo import first_step_at

N_ROUNDS = 2


def main(argv: list[str] | None = None) -> list[Run]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schemes", nargs="+", default=["at_grpo", "grpo", "magrpo"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--eval-episodes", type=int, default=256)
    args = parse_experiment(ap, argv)
    runs, labels = runs_to_report(args)
    args.schemes = labels or args.schemes
    with tempfile.TemporaryDirectory() as tmp:
        for scheme in [] if args.load else args.schemes:
            for seed in args.seeds:
                config = quiet_config([f"scheme={scheme}", f"seed={seed}", f"steps={args.steps}",
                                       f"env.kwargs.n_rounds={N_ROUNDS}", "rollout.tasks_per_step=8",
                                       "rollout.group_size=4", *args.overrides])
                run = train_run(scheme, config, Path(tmp) / f"{scheme}{seed}", eval_episodes=args.eval_episodes)
                for m in run.metrics:
                    m["success"] = m["reward"] / N_ROUNDS if scheme != "at_grpo" else m["reward"]
                runs.append(run)
                if args.save:
                    save_runs(runs, args.save)
                print(f"{scheme:8s} seed {seed}: held-out success {run.final_eval / N_ROUNDS:.3f}, "
                      f"{run.seconds:.0f}s", flush=True)
    rows = []
    for scheme in args.schemes:
        mine = [r for r in runs if r.label == scheme]
        reach = [first_step_at(r.series("success"), 0.9) for r in mine]
        seqs = [float(np.mean(r.series("n_rows"))) for r in mine]
        rows.append([scheme, spread([r.final_eval / N_ROUNDS for r in mine]),
                     " / ".join("never" if x == float("inf") else f"{x:.0f}" for x in reach),
                     spread(seqs, ".0f"), spread([r.seconds for r in mine], ".0f")])
    print(f"signal game, {N_ROUNDS} rounds, 8 tasks x group 4 per step, {len(args.seeds)} seeds x {args.steps} steps")
    print(markdown_table(["scheme", "held-out success", "step reaching 90% (per seed)", "trained rows per step",
                          "seconds"], rows))
    if args.plot:
        print(f"plot: {plot_panels(runs, [('success', 'train success (per round)')], args.plot, smooth=3, title='AT-GRPO vs GRPO vs MAGRPO, 2-round signal game')}")
    return runs


if __name__ == "__main__":
    main()
