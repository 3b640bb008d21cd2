"""Train a team with several seeds and measure it on held-out tasks before and after.

    python -m baselines.experiments.heldout_training --config baselines/configs/helper_main_magrpo_smollm2.yaml \\
        --seeds 0 1 2 --eval-episodes 8 --out runs/smollm2

For every seed: build the :class:`~baselines.trainer.Trainer` from the config (seed set), score
the untrained team with :func:`baselines.evaluate_core.evaluate_team` on held-out tasks (the
task's ``split="eval"`` problems when it has a split, held-out seeds always), train with
``Trainer.fit`` (its ``metrics.jsonl`` and ``curves.png`` land in the run folder), score again
on the same tasks with the same sampling seed, and record why learning may stall: per step the
fraction of sample groups whose rewards are all equal (zero advantage), and the KL, clip
fraction, entropy and response length the trainer logs, and how far the run moved each
agent's policy from its start (:mod:`.policy_drift`: KL per token on the last step's
samples, log-prob change, relative weight change). Writes ``<out>/<name>/results.json``
and ``<out>/<name>/curves.png`` (train reward of every seed, held-out before/after).

Time budgets (a GPU window must come back with its figures): ``--deadline`` is an absolute time
(seconds since the epoch) for the whole process, after-evaluation included; ``--train-seconds``
bounds each seed's training alone. Training stops before a step that the time left can no longer
hold -- one more step (the slowest seen so far; before the first, as long as the before-evaluation)
plus, for ``--deadline``, the after-evaluation (estimated from the before-evaluation's own time, with
a margin) -- so the after-evaluation always runs. ``results.json`` is written as the run goes: after the before-evaluation and after every
step (the seed's record then says ``"partial": true`` and has no ``after`` yet), and when the seed
ends; a process killed by a timeout still leaves every figure it had.

Seeds run as separate processes (two at a time on a 2-core machine) are merged afterwards:

    python -m baselines.experiments.heldout_training --combine runs/a/<name>/results.json runs/b/<name>/results.json \
        --out runs/smollm2

writes the merged ``results.json`` and ``curves.png`` and prints the per-seed lines and the
mean over seeds (before, after, and their paired difference with its spread).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines.config import load_config
from baselines.evaluate_core import evaluate_team, held_out_kwargs
from baselines.experiments.policy_drift import drift, snapshot, summarize
from baselines.generation import TransformersBackend
from baselines.trainer import Trainer

DIAGNOSTICS = ("kl", "clip_frac", "entropy", "response_len", "grad_norm")


def zero_variance_fraction(table: Any) -> float:
    """Fraction of sample groups (same task, sampler group and parent node) with all-equal rewards."""
    groups: dict[tuple, list[float]] = defaultdict(list)
    for i in range(len(table)):
        groups[(table.task[i], table.group[i], int(table.parent[i]), int(table.depth[i]))].append(
            float(table.reward[i]))
    sizes = [v for v in groups.values() if len(v) > 1]
    return float(np.mean([np.ptp(v) == 0 for v in sizes])) if sizes else float("nan")


#: the after-evaluation is estimated at this many times the before-evaluation's seconds
EVAL_MARGIN = 1.3


@dataclasses.dataclass
class Budget:
    """When training must stop: ``deadline`` (``time.time()``) leaves room for ``reserve`` seconds after
    training (the after-evaluation); ``train_seconds`` bounds training alone. None: no limit."""

    deadline: float | None = None
    reserve: float = 0.0
    train_seconds: float | None = None

    def end_of_training(self, started: float) -> float:
        """The latest ``time.time()`` at which a training step may still end."""
        ends = [float("inf")]
        if self.deadline is not None:
            ends.append(self.deadline - self.reserve)
        if self.train_seconds is not None:
            ends.append(started + self.train_seconds)
        return min(ends)


class _DiagnosedTrainer(Trainer):
    """A Trainer that records each step's zero-variance group fraction, keeps to a :class:`Budget` and
    reports every finished step (``on_step``)."""

    zero_var: list[float]
    history: list[dict[str, float]]  #: every step's metrics, as logged
    last_table: Any = None
    budget: Budget = Budget()
    on_step: Any = None  #: called after every step (the results file is rewritten there)
    _started: float | None = None
    #: the seconds a step is assumed to take until one has been timed (run_seed: the before-evaluation's)
    first_step_guess: float = 0.0
    _step_seconds: list[float]

    def fits_another_step(self) -> bool:
        """Whether one more step (as slow as the slowest so far) ends before the budget's end of training."""
        self._started = self._started or time.time()
        need = max(self._step_seconds) if getattr(self, "_step_seconds", None) else self.first_step_guess
        return time.time() + need <= self.budget.end_of_training(self._started)

    def train_step(self):  # type: ignore[override]
        began = time.time()
        self._started = self._started or began
        metrics = super().train_step()
        self.history.append(metrics)
        self._step_seconds = [*getattr(self, "_step_seconds", []), time.time() - began]
        if not self.fits_another_step():
            self.config.steps = self.step  # fit's loop ends here; the after-evaluation still runs
        if self.on_step is not None:
            self.on_step(self)
        return metrics

    def collect(self, tasks):  # type: ignore[override]
        result = super().collect(tasks)
        self.zero_var.append(zero_variance_fraction(result.table))
        self.last_table = result.table
        return result


def heldout_score(trainer: Trainer, episodes: int, seed: int) -> dict[str, Any]:
    """Mean held-out joint return (and interval, pass rate) of the trainer's current team."""
    cfg = trainer.config
    kwargs = {k: v for k, v in cfg.env.kwargs.items() if k != "split"}
    kwargs = held_out_kwargs(cfg.env.name, kwargs, "eval")
    backend = TransformersBackend(trainer.team, dataclasses.replace(trainer.gen_config, seed=seed),
                                  **trainer.backend_options())
    with torch.no_grad():
        report = evaluate_team(backend, cfg.env.name, kwargs, episodes=episodes, samples=1, seed=seed)
    return {"mean_return": report.mean_return, "ci95": report.ci95, "pass": report.pass_at_k,
            "format_error_rate": {a: s.format_error_rate for a, s in report.agents.items()},
            "seconds": report.seconds}


def _progress(trainer: _DiagnosedTrainer, seed: int, before: dict[str, Any], wall: float) -> dict[str, Any]:
    """The seed's record from the steps so far (``after`` is added when it is measured)."""
    records = trainer.history
    diag = {}
    for name in DIAGNOSTICS:
        vals = [v for r in records for k, v in r.items() if k.startswith("agent/") and k.endswith("/" + name)
                and v == v]
        diag[name] = float(np.mean(vals)) if vals else float("nan")
    return {
        "seed": seed, "before": before, "steps": trainer.step, "train_wall_s": wall,
        "step_s": statistics.median(r["time/step_s"] for r in records) if records else float("nan"),
        "train_rewards": [r["reward"] for r in records], "zero_variance_fraction": list(trainer.zero_var),
        "diagnostics": diag, "run_dir": str(trainer.run_dir),
    }


def run_seed(config_path: str, overrides: list[str], seed: int, out: Path, eval_episodes: int,
             eval_seed: int, budget: Budget | None = None, report: Any = None) -> dict[str, Any]:
    """Before-evaluation, training within ``budget``, after-evaluation of one seed; ``report(record)`` is
    called with the partial record after the before-evaluation and after every step."""
    config = load_config(config_path, [*overrides, f"seed={seed}"])
    trainer = _DiagnosedTrainer(config, out / f"seed{seed}")
    trainer.zero_var, trainer.history = [], []
    budget = budget or Budget()
    before = heldout_score(trainer, eval_episodes, eval_seed)
    print(f"seed {seed}: held-out before {before['mean_return']:.3f} ({before['seconds']:.0f} s)", flush=True)
    trainer.budget = dataclasses.replace(budget, reserve=budget.reserve + EVAL_MARGIN * before["seconds"])
    trainer.first_step_guess = before["seconds"]  # no step timed yet: as long as an evaluation
    start = time.perf_counter()

    def partial(t: _DiagnosedTrainer) -> None:
        if report is not None:
            report(_progress(t, seed, before, time.perf_counter() - start) | {"partial": True})

    partial(trainer)
    trainer.on_step = partial
    start_weights = snapshot(trainer.team)
    if not trainer.fits_another_step():
        trainer.config.steps = trainer.step  # not even one step fits: evaluate the untrained team again
        print(f"seed {seed}: no time left for a training step", flush=True)
    trainer.fit(eval_episodes=0)
    wall = time.perf_counter() - start
    moved = summarize(drift(trainer.team, start_weights, trainer.last_table,
                            temperature=trainer.gen_config.scoring_temperature)) if trainer.last_table is not None else None
    after = heldout_score(trainer, eval_episodes, eval_seed)
    print(f"seed {seed}: held-out after {after['mean_return']:.3f} ({trainer.step} steps, {wall:.0f} s)", flush=True)
    return _progress(trainer, seed, before, wall) | {"after": after, "drift": moved}


def plot(results: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_h) = plt.subplots(1, 2, figsize=(11, 4))
    trained, results = results, finished(results)
    for r in trained:
        ax_t.plot(range(1, len(r["train_rewards"]) + 1), r["train_rewards"], "o-", label=f"seed {r['seed']}")
    ax_t.set_xlabel("optimizer step")
    ax_t.set_ylabel("train joint reward")
    ax_t.legend()
    x = np.arange(len(results))
    ax_h.bar(x - 0.2, [r["before"]["mean_return"] for r in results], 0.4, label="before")
    ax_h.bar(x + 0.2, [r["after"]["mean_return"] for r in results], 0.4, label="after")
    ax_h.set_xticks(x, [f"seed {r['seed']}" for r in results])
    ax_h.set_ylabel("held-out joint return")
    ax_h.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def combine(paths: list[str]) -> list[dict[str, Any]]:
    """The seeds of several ``results.json`` files (one config), in seed order; a seed may appear once."""
    results: dict[int, dict[str, Any]] = {}
    for path in paths:
        for r in json.loads(Path(path).read_text()):
            if r["seed"] in results:
                raise ValueError(f"seed {r['seed']} appears twice (again in {path})")
            results[r["seed"]] = r
    if not results:
        raise ValueError("no seeds in " + ", ".join(paths))
    return [results[seed] for seed in sorted(results)]


def finished(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The seeds that reached their after-evaluation (a partial record has none)."""
    return [r for r in results if "after" in r]


def summary_lines(name: str, results: list[dict[str, Any]]) -> list[str]:
    """One line per seed, then the mean over seeds of held-out before/after and of the paired change
    (partial seeds -- stopped before their after-evaluation -- are named and left out)."""
    lines = [f"{name} seed {r['seed']}: partial, stopped after {r['steps']} step(s) before its after-evaluation"
             for r in results if "after" not in r]
    results = finished(results)
    if not results:
        return [*lines, f"{name}: no seed finished"]
    for r in results:
        zv = [v for v in r["zero_variance_fraction"] if v == v]
        lines.append(f"{name} seed {r['seed']}: held-out {r['before']['mean_return']:.3f} -> "
                     f"{r['after']['mean_return']:.3f}, {r['steps']} steps, median {r['step_s']:.0f} s/step, "
                     f"zero-variance groups {np.mean(zv) if zv else float('nan'):.2f}, diagnostics {r['diagnostics']}"
                     + _drift_text(r.get("drift")))
    before = np.array([r["before"]["mean_return"] for r in results])
    after = np.array([r["after"]["mean_return"] for r in results])
    change = after - before
    spread = float(change.std(ddof=1)) if len(results) > 1 else float("nan")
    lines.append(f"{name}, {len(results)} seeds: held-out {before.mean():.3f} -> {after.mean():.3f}, "
                 f"change {change.mean():+.3f} (std over seeds {spread:.3f})")
    return lines


def _drift_text(moved: dict[str, Any] | None) -> str:
    if not moved:
        return ""
    return ", moved from the start: " + ", ".join(
        f"{agent} KL {v['kl']:.2g}/token, log-prob {v['logp_change']:+.2g}/token, weights {v['weight_change']:.2g}"
        for agent, v in moved["per_agent"].items())


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", help="the training config (not with --combine)")
    ap.add_argument("--combine", nargs="+", metavar="RESULTS_JSON",
                    help="merge the seeds of these results.json files of one config instead of training")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--eval-episodes", type=int, default=8)
    ap.add_argument("--eval-seed", type=int, default=12_345)
    ap.add_argument("--out", default="runs/heldout")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    ap.add_argument("--train-seconds", type=float, default=None,
                    help="time budget of each seed's training: no step starts that it cannot hold (then evaluate)")
    ap.add_argument("--deadline", type=float, default=None,
                    help="absolute end (seconds since the epoch) of the whole process, after-evaluation included")
    ap.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = ap.parse_args(argv)
    if (args.config is None) == (args.combine is None):
        ap.error("give either --config (train) or --combine (merge results)")
    name = Path(args.combine[0]).parent.name if args.combine else Path(args.config).stem
    out = Path(args.out) / name
    out.mkdir(parents=True, exist_ok=True)
    if args.combine:
        results = combine(args.combine)
        _save(results, out, name)
    else:
        if args.threads:
            torch.set_num_threads(args.threads)
        results: list[dict[str, Any]] = []
        budget = Budget(deadline=args.deadline, train_seconds=args.train_seconds)
        for seed in args.seeds:
            results.append(run_seed(args.config, args.overrides, seed, out, args.eval_episodes, args.eval_seed,
                                    budget, report=lambda r, done=list(results): _save([*done, r], out, name,
                                                                                        plot_it=False)))
            _save(results, out, name)
    print("\n".join(summary_lines(name, results)), flush=True)
    return results


def _save(results: list[dict[str, Any]], out: Path, name: str, plot_it: bool = True) -> None:
    """Write ``results.json`` whole (a temporary file renamed over it: a reader never sees half a file)."""
    tmp = out / "results.json.tmp"
    tmp.write_text(json.dumps(results, indent=2, default=float))
    tmp.replace(out / "results.json")
    if plot_it:
        plot(results, out / "curves.png", name)


if __name__ == "__main__":
    main()
