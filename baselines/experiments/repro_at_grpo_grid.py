"""AT-GRPO (arXiv 2510.11062) at small scale on a planning task: AT-GRPO vs GRPO vs MAGRPO.

    python -m baselines.experiments.repro_at_grpo_grid --steps 40 --plot docs/img/repro_at_grpo_grid.png
    python -m baselines.experiments.repro_at_grpo_grid --schemes at_grpo --save a.json   # then --load a.json g.json ...

Setting (:data:`GRID_KWARGS`): ``planning/grid_v0`` Plan-Path on a 3x3 grid without walls,
the plan agent alone (no tool: a tiny model cannot write a BFS program), ONE move per turn
and 4 turns, so every puzzle (start 3 or 4 moves from the goal) needs 3-4 turns and each
turn's prompt shows the state the earlier moves produced. Reward: solved + progress shaping
(``shaping=1.0``: each turn adds the potential gained, phi = 1 - distance / initial
distance; the return is 2.0 if solved, phi_final < 1 if not). Tiny model from random
weights, output restricted to ``U D L R``. Every scheme gets 8 tasks per step and group
size 4: GRPO 4 independent episodes per task (every row rewarded with its episode's return),
MAGRPO a joint tree with 4 children per node on the first ``rollout.tree_depth`` (2) turns
(return-to-go, gamma 0.9), AT-GRPO 4 candidates per turn from one cloned state, each scored
by its own turn reward (alpha r_team + r_local, r_local = the plan agent's progress), the
episode continuing from the best.

The schemes spend different numbers of generations per step, so the report gives, per run:
held-out success (solved fraction on the test split) every ``--eval-every`` steps, the step
and the number of generated sequences at which held-out success first reaches
``--threshold``, the sequences generated per step, the final held-out success (more
episodes) and the wall time. The claim (one-state groups make each turn's comparison fair,
so AT-GRPO learns a multi-turn task better) holds here if AT-GRPO reaches the threshold in
fewer steps AND fewer generated sequences, or ends clearly higher.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines.evaluate_core import evaluate_team, held_out_kwargs
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
from baselines.generation import TransformersBackend
from baselines.trainer import Trainer

ENV = "planning/grid_v0"
GRID_KWARGS: dict[str, Any] = {"puzzle": "plan_path", "size": 3, "wall_density": 0.0, "tool": False,
                               "max_turns": 4, "max_moves_per_turn": 1, "shaping": 1.0}
EVAL_SEED = 4_242


class CountingTrainer(Trainer):
    """A :class:`Trainer` that keeps the number of sequences its last rollout generated."""

    last_sequences: int = 0

    def collect(self, tasks):  # type: ignore[override]
        result = super().collect(tasks)
        self.last_sequences = int(result.gen.sequences)
        return result


def heldout_success(trainer: Trainer, episodes: int, seed: int = EVAL_SEED) -> float:
    """Solved fraction of ``episodes`` test-split puzzles (one sampled episode each, fixed seeds).

    An episode passes when its return reaches the scripted best policy's on that puzzle; that
    is "solved" only if the best policy solves every puzzle within the turns, which is checked."""
    cfg = trainer.config
    kwargs = held_out_kwargs(cfg.env.name, {k: v for k, v in cfg.env.kwargs.items() if k != "split"}, "eval")
    backend = TransformersBackend(trainer.team, dataclasses.replace(trainer.gen_config, seed=seed))
    with torch.no_grad():
        report = evaluate_team(backend, cfg.env.name, kwargs, episodes=episodes, seed=seed, tasks_per_batch=episodes)
    solved_return = 1.0 + float(kwargs.get("shaping", 0.0))
    if abs(report.oracle_return - solved_return) > 1e-9:
        raise ValueError(f"the best policy does not solve every test puzzle within the turns (mean return "
                         f"{report.oracle_return:.3f} < {solved_return}): pass rate would not be a success rate")
    return float(report.pass_at_k)


def train_scheme(scheme: str, seed: int, steps: int, run_dir: Path, *, eval_every: int, eval_episodes: int,
                 final_episodes: int, overrides: list[str], label: str | None = None) -> Run:
    """One run: held-out success before training, every ``eval_every`` steps and (more episodes) at the end."""
    kw = "{" + ", ".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}" for k, v in GRID_KWARGS.items()) + "}"
    config = quiet_config([f"scheme={scheme}", f"seed={seed}", f"steps={steps}", f"env.name={ENV}",
                           f"env.kwargs={kw}", "generation.max_new_tokens=1", "rollout.tasks_per_step=8",
                           "rollout.group_size=4", "optim.lr=0.003", *overrides])
    initial: list[float] = []

    def factory(cfg: Any, path: Path) -> Trainer:
        trainer = CountingTrainer(cfg, path)
        initial.append(heldout_success(trainer, eval_episodes))
        return trainer

    def on_step(trainer: Trainer, m: dict[str, float]) -> None:
        m["sequences"] = float(trainer.last_sequences)  # type: ignore[attr-defined]
        if trainer.step % eval_every == 0 or trainer.step == steps:
            m["heldout_success"] = heldout_success(trainer, eval_episodes)
        if trainer.step == steps:
            m["final_success"] = heldout_success(trainer, final_episodes, seed=EVAL_SEED + 1)

    run = train_run(label or scheme, config, run_dir, eval_episodes=0, trainer_factory=factory, on_step=on_step)
    run.final_eval = run.metrics[-1]["final_success"]
    run.extra = {"initial_success": initial[0], "train_seconds": float(np.sum(run.series("time/step_s")))}
    return run


def eval_curve(run: Run) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, cumulative generated sequences, held-out success) at step 0 and every evaluated step."""
    seqs = np.cumsum(run.series("sequences"))
    success = run.series("heldout_success")
    at = np.flatnonzero(np.isfinite(success))
    return (np.concatenate([[0], at + 1]), np.concatenate([[0], seqs[at]]),
            np.concatenate([[run.extra["initial_success"]], success[at]]))


def first_reach(run: Run, threshold: float) -> tuple[float, float]:
    """(step, cumulative sequences) of the first evaluation with held-out success >= threshold (inf if never)."""
    steps, seqs, success = eval_curve(run)
    hit = np.flatnonzero(success >= threshold)
    return (float(steps[hit[0]]), float(seqs[hit[0]])) if len(hit) else (float("inf"), float("inf"))


def plot(runs: list[Run], path: Path, title: str) -> Path:
    """Held-out success vs optimizer step and vs generated sequences (mean over seeds, min..max band)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for i, label in enumerate(dict.fromkeys(r.label for r in runs)):
        curves = [eval_curve(r) for r in runs if r.label == label]
        steps = curves[0][0]
        success = np.array([c[2] for c in curves])
        seqs = np.mean([c[1] for c in curves], axis=0)
        for ax, x in zip(axes, (steps, seqs)):
            ax.plot(x, success.mean(axis=0), color=f"C{i}", marker=".", label=label)
            ax.fill_between(x, success.min(axis=0), success.max(axis=0), color=f"C{i}", alpha=0.2)
    axes[0].set_xlabel("optimizer step")
    axes[1].set_xlabel("generated sequences (cumulative, mean over seeds)")
    for ax in axes:
        ax.set_ylabel("held-out success (test split)")
        ax.set_ylim(-0.02, 1.02)
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)


def _reach_cell(values: list[float], fmt: str = ".0f") -> str:
    return " / ".join("never" if not np.isfinite(v) else f"{v:{fmt}}" for v in values)


def report(runs: list[Run], schemes: list[str], threshold: float) -> str:
    """The markdown table of the runs (one row per scheme, spread over seeds)."""
    rows = []
    for scheme in schemes:
        mine = [r for r in runs if r.label == scheme]
        reach = [first_reach(r, threshold) for r in mine]
        rows.append([scheme, spread([r.extra["initial_success"] for r in mine]), spread([r.final_eval for r in mine]),
                     spread([float(np.mean(eval_curve(r)[2][1:])) for r in mine]),
                     _reach_cell([s for s, _ in reach]), _reach_cell([q for _, q in reach]),
                     spread([float(np.mean(r.series("sequences"))) for r in mine], ".0f"),
                     spread([r.seconds for r in mine], ".0f")])
    return markdown_table(["scheme", "held-out success, start", "held-out success, end", "mean over the evaluations",
                           f"step reaching {threshold:.0%} (per seed)", f"sequences to {threshold:.0%} (per seed)",
                           "sequences per step", "seconds per run"], rows)


def main(argv: list[str] | None = None) -> list[Run]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schemes", nargs="+", default=["at_grpo", "grpo", "magrpo"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--eval-every", type=int, default=4)
    ap.add_argument("--eval-episodes", type=int, default=64, help="test puzzles per evaluation during training")
    ap.add_argument("--final-episodes", type=int, default=256, help="test puzzles of the final evaluation")
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--label-suffix", default="", help="appended to the scheme's label (a variant set by overrides)")
    args = parse_experiment(ap, argv)
    runs, labels = runs_to_report(args)
    args.schemes = labels or [s + args.label_suffix for s in args.schemes]
    with tempfile.TemporaryDirectory() as tmp:
        for label in [] if args.load else args.schemes:
            scheme = label.removesuffix(args.label_suffix) if args.label_suffix else label
            for seed in args.seeds:
                run = train_scheme(scheme, seed, args.steps, Path(tmp) / f"{scheme}{seed}", eval_every=args.eval_every,
                                   eval_episodes=args.eval_episodes, final_episodes=args.final_episodes,
                                   overrides=list(args.overrides), label=label)
                runs.append(run)
                if args.save:
                    save_runs(runs, args.save)
                step, seqs = first_reach(run, args.threshold)
                print(f"{label:8s} seed {seed}: held-out success {run.extra['initial_success']:.3f} -> "
                      f"{run.final_eval:.3f}, {args.threshold:.0%} at step {step:.0f} ({seqs:.0f} sequences), "
                      f"{run.seconds:.0f}s", flush=True)
    extra = f", overrides {' '.join(args.overrides)}" if args.overrides else ""
    print(f"{ENV} {GRID_KWARGS}, 8 tasks x group 4 per step{extra}, {len(args.seeds)} seeds x {args.steps} steps")
    print(report(runs, args.schemes, args.threshold))
    if args.plot:
        title = " vs ".join(args.schemes) + ", 3x3 Plan-Path, 1 move per turn, 4 turns"
        print(f"plot: {plot(runs, args.plot, title)}")
    return runs


if __name__ == "__main__":
    main()
