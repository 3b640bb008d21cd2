"""Shared pieces of the paper-reproduction experiments (``baselines.experiments.repro_*``).

Each experiment trains a few configurations x seeds with the real :class:`Trainer` (tiny
models, CPU), keeps every step's metrics, and reports mean, std and range over the seeds,
plus one PNG of curves (mean over seeds, min..max band). Nothing here is specific to one
paper; the experiment modules say what they measure and what would support the claim.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from baselines.config import TrainConfig, load_config
from baselines.trainer import Trainer


@dataclass
class Run:
    """One training run: its label (the configuration), seed, per-step metrics and held-out reward."""

    label: str
    seed: int
    metrics: list[dict[str, float]]
    final_eval: float
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    def series(self, key: str) -> np.ndarray:
        """``key`` at every step (NaN where a step did not log it)."""
        return np.array([m.get(key, float("nan")) for m in self.metrics], dtype=np.float64)


def save_runs(runs: Sequence[Run], path: Path) -> Path:
    """Write runs as JSON, so that runs trained by separate processes can be reported together."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([vars(r) for r in runs]), encoding="utf-8")
    return path


def load_runs(paths: Sequence[Path]) -> list[Run]:
    """The runs of every file written by :func:`save_runs`, in order."""
    return [Run(**item) for p in paths for item in json.loads(Path(p).read_text(encoding="utf-8"))]


def add_run_io_args(ap: Any) -> None:
    """``--save`` / ``--load`` on an experiment's argument parser (one experiment, several processes)."""
    ap.add_argument("--save", type=Path, default=None, help="write the runs to this JSON file (after every run)")
    ap.add_argument("--load", type=Path, nargs="+", default=None,
                    help="report runs saved by --save (e.g. by one process per scheme) instead of training")


def parse_experiment(ap: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Add ``--threads`` (torch threads per run, 1), ``--plot``, ``--save`` / ``--load`` and ``key=value``
    overrides to an experiment's parser, parse ``argv`` and set the torch threads."""
    import torch

    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--plot", type=Path, default=None)
    add_run_io_args(ap)
    ap.add_argument("overrides", nargs="*", help="extra key=value config overrides")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    return args


def runs_to_report(args: Any) -> tuple[list[Run], list[str]]:
    """The runs ``--load`` names (and sets ``args.seeds`` / ``args.steps`` from them) with their labels
    in order; ``([], [])`` when nothing is loaded."""
    if not args.load:
        return [], []
    runs = load_runs(args.load)
    args.seeds = sorted({r.seed for r in runs})
    args.steps = len(runs[0].metrics) if runs else 0
    return runs, list(dict.fromkeys(r.label for r in runs))


def config_parser(doc: str, configs: Sequence[str], *, steps: int = 30) -> argparse.ArgumentParser:
    """An experiment's parser with ``--configs`` (one of ``configs``, all by default), ``--seeds`` and
    ``--steps``; add the experiment's own arguments, then call :func:`parse_runs`."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--configs", nargs="+", default=list(configs), choices=list(configs))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=steps)
    return ap


def parse_runs(ap: argparse.ArgumentParser, argv: list[str] | None) -> tuple[argparse.Namespace, list[Run]]:
    """Add ``--plot`` and ``--save`` / ``--load`` to a :func:`config_parser`, parse ``argv``, and return the
    arguments with the runs ``--load`` names (``args.configs`` then their labels; see :func:`runs_to_report`)."""
    ap.add_argument("--plot", type=Path, default=None)
    add_run_io_args(ap)
    args = ap.parse_args(argv)
    runs, labels = runs_to_report(args)
    args.configs = labels or args.configs
    return args, runs


def train_configs(
    args: argparse.Namespace, runs: list[Run], train_one: Callable[[str, int], Run], describe: Callable[[Run], str]
) -> None:
    """Train ``train_one(config, seed)`` for every ``--configs`` x ``--seeds``, appending to ``runs``, writing
    them after every run (``--save``) and printing ``"<config> seed <seed>: " + describe(run)``."""
    for label in args.configs:
        for seed in args.seeds:
            run = train_one(label, seed)
            runs.append(run)
            if args.save:
                save_runs(runs, args.save)
            print(f"{label:9s} seed {seed}: {describe(run)}", flush=True)


def quiet_config(overrides: Sequence[str], base: dict[str, Any] | None = None) -> TrainConfig:
    """``load_config`` with no TensorBoard, plot or progress bar (benchmarks print their own lines)."""
    return load_config(overrides=["log.tensorboard=false", "log.plot=false", "log.progress=false",
                                  *overrides], base=base)


def train_run(
    label: str,
    config: TrainConfig,
    run_dir: Path,
    *,
    eval_episodes: int = 256,
    trainer_factory: Callable[[TrainConfig, Path], Trainer] = Trainer,
    on_step: Callable[[Trainer, dict[str, float]], None] | None = None,
) -> Run:
    """Train ``config.steps`` steps; ``on_step`` may add entries to each step's metrics."""
    start = time.perf_counter()
    trainer = trainer_factory(config, run_dir)
    metrics = []
    for _ in range(config.steps):
        m = trainer.train_step()
        if on_step is not None:
            on_step(trainer, m)
        metrics.append(m)
    final = trainer.evaluate(eval_episodes) if eval_episodes else float("nan")
    return Run(label, config.seed, metrics, final, time.perf_counter() - start)


def spread(values: Sequence[float], fmt: str = ".3f") -> str:
    """``mean ± std (min..max)`` over seeds (population std; ``n/a`` for no values)."""
    vals = [float(v) for v in values if np.isfinite(v)]
    if not vals:
        return "n/a"
    std = statistics.pstdev(vals) if len(vals) > 1 else 0.0
    return f"{statistics.fmean(vals):{fmt}} ± {std:{fmt}} ({min(vals):{fmt}}..{max(vals):{fmt}})"


def moving_average(x: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over ``window`` steps (shorter at the start); NaNs ignored."""
    out = np.empty_like(x)
    for i in range(len(x)):
        chunk = x[max(0, i - window + 1) : i + 1]
        out[i] = np.nanmean(chunk) if np.any(np.isfinite(chunk)) else np.nan
    return out


def plot_panels(
    runs: Sequence[Run],
    panels: Sequence[tuple[str, str]],
    path: Path,
    *,
    title: str = "",
    smooth: int = 1,
    log_y: Sequence[str] = (),
) -> Path:
    """One subplot per ``(metric key, y label)``; per label the mean over seeds and a min..max band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(dict.fromkeys(r.label for r in runs))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.3), squeeze=False)
    for ax, (key, ylabel) in zip(axes[0], panels):
        for i, label in enumerate(labels):
            curves = np.array([moving_average(r.series(key), smooth) for r in runs if r.label == label])
            steps = np.arange(1, curves.shape[1] + 1)
            color = f"C{i}"
            ax.plot(steps, np.nanmean(curves, axis=0), color=color, label=label)
            ax.fill_between(steps, np.nanmin(curves, axis=0), np.nanmax(curves, axis=0), color=color, alpha=0.2)
        if key in log_y:
            ax.set_yscale("log")
        ax.set_xlabel("optimizer step")
        ax.set_ylabel(ylabel)
    axes[0][0].legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)


def save_figure(fig: Any, path: Path) -> Path:
    """Lay out ``fig``, write it to ``path`` (creating its folder) and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
