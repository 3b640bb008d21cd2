"""The embedded default run for every advantage scheme: how fast each learns the signal game.

    python -m baselines.experiments.schemes                         # 6 schemes x seeds 0 1 2, 60 steps
    python -m baselines.experiments.schemes --schemes grpo magrpo --seeds 0 --steps 120

Each run is ``python -m baselines.train scheme=<scheme> seed=<seed>`` (the default config,
tiny model built locally, CPU) with ``--steps`` steps. Printed per run: the train reward of
the first step, the first step from which three consecutive steps reach ``--threshold``, the
held-out reward of the untrained and of the trained team (256 episodes), and the wall time.
The last lines are per-scheme medians and the reference: the chance level of the env's random
policy. ``--plot`` writes every run's train-reward curve to one PNG.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from baselines.advantages import ADVANTAGE_SCHEMES
from baselines.config import TrainConfig
from baselines.trainer import Trainer


@dataclass
class RunResult:
    scheme: str
    seed: int
    rewards: list[float]
    start_eval: float
    final_eval: float
    chance: float
    seconds: float

    def first_step_at(self, threshold: float, window: int = 3) -> int | None:
        """First step (1-based) that starts ``window`` consecutive steps with reward >= ``threshold``."""
        for i in range(len(self.rewards) - window + 1):
            if min(self.rewards[i : i + window]) >= threshold:
                return i + 1
        return None


def run_default(scheme: str, seed: int, steps: int, run_dir: Path, eval_episodes: int = 256) -> RunResult:
    """One default run of ``scheme`` (no plot, no TensorBoard, no progress bar)."""
    config = TrainConfig(scheme=scheme, seed=seed, steps=steps)
    config.log.tensorboard = config.log.plot = config.log.progress = False
    t0 = time.perf_counter()
    trainer = Trainer(config, run_dir)
    start = trainer.evaluate(eval_episodes)
    rewards = [trainer.train_step()["reward"] for _ in range(steps)]
    final = trainer.evaluate(eval_episodes)
    return RunResult(scheme, seed, rewards, start, final, trainer.chance(), time.perf_counter() - t0)


def plot_runs(results: list[RunResult], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    schemes = list(dict.fromkeys(r.scheme for r in results))
    fig, axes = plt.subplots(1, len(schemes), figsize=(3.2 * len(schemes), 3), sharey=True, squeeze=False)
    for ax, scheme in zip(axes[0], schemes):
        for r in (r for r in results if r.scheme == scheme):
            ax.plot(range(1, len(r.rewards) + 1), r.rewards, label=f"seed {r.seed}")
        ax.axhline(results[0].chance, color="grey", linestyle="--")
        ax.set_title(scheme)
        ax.set_xlabel("optimizer step")
    axes[0][0].set_ylabel("joint reward (train)")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> list[RunResult]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schemes", nargs="+", default=["grpo", "dr_mas", "magrpo", "at_grpo", "mars2", "sharp"],
                        choices=sorted(ADVANTAGE_SCHEMES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--plot", type=Path, default=None, help="write the reward curves to this PNG")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    results = []
    print(f"{'scheme':8s} {'seed':>4s} {'step 1':>7s} {'>=' + str(args.threshold) + ' at':>9s} "
          f"{'eval before':>11s} {'eval after':>10s} {'seconds':>8s}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for scheme in args.schemes:
            for seed in args.seeds:
                r = run_default(scheme, seed, args.steps, Path(tmp) / f"{scheme}_{seed}")
                results.append(r)
                reached = r.first_step_at(args.threshold)
                print(f"{scheme:8s} {seed:4d} {r.rewards[0]:7.3f} {str(reached or 'never'):>9s} "
                      f"{r.start_eval:11.3f} {r.final_eval:10.3f} {r.seconds:8.1f}", flush=True)
    print("medians per scheme:")
    for scheme in args.schemes:
        runs = [r for r in results if r.scheme == scheme]
        steps = [r.first_step_at(args.threshold) or float("inf") for r in runs]
        print(f"  {scheme:8s} step reaching {args.threshold}: {statistics.median(steps)}  "
              f"final eval {statistics.median(r.final_eval for r in runs):.3f}  "
              f"runs reaching it {sum(s != float('inf') for s in steps)}/{len(runs)}")
    print(f"reference: chance (random policy) {results[0].chance:.3f}")
    if args.plot:
        print(f"plot: {plot_runs(results, args.plot)}")
    return results


if __name__ == "__main__":
    main()
