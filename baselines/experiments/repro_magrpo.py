"""MAGRPO (arXiv 2508.04652) at small scale: does the return-to-go discount matter on a multi-turn task?

    python -m baselines.experiments.repro_magrpo --steps 40 rollout.tasks_per_step=8   # as in docs/reproducing.md
    python -m baselines.experiments.repro_magrpo --reward-at round --plot docs/img/repro_magrpo_round.png
    python -m baselines.experiments.repro_magrpo --gammas 0 --save g0.json   # then: --load g0.json g9.json --plot ...

MAGRPO's per-node advantage uses the return-to-go R_t = r_t + gamma * mean(R of the children).
With gamma = 0 a turn is judged by its own reward only; with gamma = 0.9 (the authors' code)
by what followed too. Setting: the signal game with 2 rounds (2 turns, feedback "correct /
wrong" after each), tiny model, the MAGRPO joint tree of ``baselines/configs/signal_game_magrpo.yaml``
(G = 4 joint actions per node for both turns, A = R - mean). Two reward timings:

- ``--reward-at end`` (default): the delayed-reward variant (``reward_at="end"``): round 1
  pays 0 and round 2 pays the rounds won, so a gamma-0 return gives the first turn's
  actions no signal at all -- the case return-to-go exists for;
- ``--reward-at round``: each round pays its own win, rounds are independent, and gamma > 0
  only adds the next round's noise to the first turn's return.

Printed per gamma over seeds: the held-out episode return (256 episodes, max 2), the train
return of the last 10 steps, and the first step from which 3 consecutive steps reach 90% of
the maximum. The claim (the discount carries the later reward back to earlier turns) holds
here if gamma 0.9 beats gamma 0 with delayed reward.
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

CONFIG = "baselines/configs/signal_game_magrpo.yaml"


def first_step_at(rewards: np.ndarray, threshold: float, window: int = 3) -> float:
    """First step (1-based) starting ``window`` consecutive steps >= ``threshold`` (inf if never)."""
    for i in range(len(rewards) - window + 1):
        if np.all(rewards[i : i + window] >= threshold):
            return float(i + 1)
    return float("inf")


def main(argv: list[str] | None = None) -> list[Run]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gammas", nargs="+", type=float, default=[0.0, 0.9])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--reward-at", choices=["end", "round"], default="end")
    ap.add_argument("--eval-episodes", type=int, default=256)
    args = parse_experiment(ap, argv)
    import yaml

    base = yaml.safe_load(Path(CONFIG).read_text(encoding="utf-8"))
    base["env"]["kwargs"]["reward_at"] = args.reward_at
    runs, labels = runs_to_report(args)
    args.gammas = [float(label.split()[1]) for label in labels] or args.gammas
    with tempfile.TemporaryDirectory() as tmp:
        for gamma in [] if args.load else args.gammas:
            for seed in args.seeds:
                config = quiet_config([f"advantage.gamma={gamma}", f"seed={seed}", f"steps={args.steps}",
                                       *args.overrides], base=base)
                run = train_run(f"gamma {gamma:g}", config, Path(tmp) / f"g{gamma}s{seed}",
                                eval_episodes=args.eval_episodes)
                runs.append(run)
                if args.save:
                    save_runs(runs, args.save)
                print(f"gamma {gamma:g} seed {seed}: eval {run.final_eval:.3f}, {run.seconds:.0f}s", flush=True)
    n_rounds = int(base["env"]["kwargs"]["n_rounds"])
    rows = []
    for gamma in args.gammas:
        mine = [r for r in runs if r.label == f"gamma {gamma:g}"]
        reach = [first_step_at(r.series("reward"), 0.9 * n_rounds) for r in mine]
        rows.append([f"{gamma:g}", spread([r.final_eval for r in mine]),
                     spread([np.mean(r.series("reward")[-10:]) for r in mine]),
                     " / ".join("never" if x == float("inf") else f"{x:.0f}" for x in reach),
                     spread([r.seconds for r in mine], ".0f")])
    print(f"signal game, {n_rounds} rounds, reward_at={args.reward_at}, MAGRPO joint tree, "
          f"{len(args.seeds)} seeds x {args.steps} steps")
    print(markdown_table(["gamma", "held-out return", "last-10 train return", "step reaching 90% (per seed)",
                          "seconds"], rows))
    if args.plot:
        print(f"plot: {plot_panels(runs, [('reward', 'train return (mean over tree paths)')], args.plot, smooth=3, title=f'MAGRPO return-to-go, reward_at={args.reward_at}')}")
    return runs


if __name__ == "__main__":
    main()
