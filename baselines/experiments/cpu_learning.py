"""Collect the real model's CPU learning runs: the table, ``cpu_learning.json`` and per-agent curves.

    python -m baselines.experiments.cpu_learning \\
        --cell signal_code grpo runs/cpu/signal_code_smollm2 \\
        --cell signal_code at_grpo runs/cpu/signal_code_at_grpo_smollm2 \\
        --out docs/figures/cpu_learning.json
    python -m baselines.experiments.cpu_learning --curves runs/cpu/signal_code_smollm2/seed0 \\
        --png docs/img/cpu_signal_code_grpo.png --title "signal code, GRPO, seed 0"

``--cell CONFIG SCHEME FOLDER...`` names one cell of the table (a config and a scheme) and the folders
holding its ``results.json`` files (``baselines.experiments.heldout_training``, one seed per process
or several). Every seed becomes one record of ``cpu_learning.json`` (config, scheme, seed, held-out
before / after, their change, steps, median seconds per step, the training's wall time, and the mean
1-minute load average of the machine while the seed ran when a ``load.txt`` -- lines of
``/proc/loadavg`` -- lies beside the ``results.json``; a seed still training or stopped before its
after-evaluation is a ``"partial": true`` record with its before only, named in the row and left out
of its figures, so the GPU script can collect while its runs train). Printed: one markdown row per cell, with
the paired change (after - before per seed) ± its standard deviation over seeds and the verdict of
:func:`baselines.experiments.gpu_learning.verdict` (learned only where the change exceeds two
standard deviations).

``--curves RUN`` draws a run's per-agent curves from its ``metrics.jsonl``: train reward, KL to the
starting policy (``agent/<name>/kl_ref``, logged with ``log.kl_to_start``), response length and the
share of the agent's groups with no reward variance.

``--report RUN --html FILE --shots PREFIX`` writes the run's ``report.html`` with the episodes of
its first and last step (the samples ``log.save_samples`` saved; the other steps' are left out so
the page stays small) and, through headless Chromium (:mod:`baselines.report.browser`), three
screenshots: ``PREFIX_episodes.png`` (the last step's episodes: the team's messages and rewards),
``PREFIX_before.png`` and ``PREFIX_after.png`` (one episode of the first and of the last step,
the agents' turns side by side).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from baselines.experiments.gpu_learning import seeds_of, verdict
from baselines.metrics import read_jsonl

CURVES = (("reward", "train reward"), ("kl_ref", "KL to the start (per token)"),
          ("response_len", "response length (tokens)"), ("zero_var_groups", "groups without reward variance"))


def mean_load(folder: Path) -> float | None:
    """Mean of the 1-minute load averages in ``folder/load.txt`` (None when there is none)."""
    path = folder / "load.txt"
    if not path.is_file():
        return None
    values = [float(line.split()[0]) for line in path.read_text().splitlines() if line.strip()]
    return statistics.fmean(values) if values else None


def cell_records(config: str, scheme: str, folders: list[str]) -> list[dict[str, Any]]:
    """One record per seed of the cell (see the module docstring)."""
    loads = {}
    for folder in folders:
        for path in Path(folder).rglob("results.json"):
            for r in json.loads(path.read_text()):
                loads[int(r["seed"])] = mean_load(path.parent)
    out = []
    for r in seeds_of(folders):
        if "after" not in r:  # still training, or stopped before its after-evaluation: listed, not counted
            out.append({"config": config, "scheme": scheme, "seed": r["seed"], "before": r["before"]["mean_return"],
                        "steps": r.get("steps"), "partial": True})
            continue
        before, after = r["before"]["mean_return"], r["after"]["mean_return"]
        out.append({"config": config, "scheme": scheme, "seed": r["seed"], "before": before, "after": after,
                    "change": after - before, "steps": r["steps"], "seconds_per_step": r["step_s"],
                    "train_wall_s": r["train_wall_s"], "mean_load": loads.get(int(r["seed"])),
                    "eval_seconds": r["after"].get("seconds"), "zero_variance_fraction": r["zero_variance_fraction"],
                    "train_rewards": r["train_rewards"]})
    return out


def table_row(config: str, scheme: str, records: list[dict[str, Any]]) -> str:
    """The markdown row of one cell: seeds, before -> after, change ± std, verdict, step time, load."""
    partial = [r for r in records if r.get("partial")]
    records = [r for r in records if not r.get("partial")]
    v = verdict([{"before": {"mean_return": r["before"]}, "after": {"mean_return": r["after"]},
                  "steps": r["steps"]} for r in records])
    if partial:
        config = f"{config} ({len(partial)} partial)"
    if not v["seeds"]:
        return f"| {config} | {scheme} | 0 | - | - | - | - | - | - |"
    per_seed = ", ".join(f"{r['before']:.3f} → {r['after']:.3f}" for r in records)
    step_s = statistics.median(r["seconds_per_step"] for r in records)
    loads = [r["mean_load"] for r in records if r["mean_load"] is not None]
    load = f"{statistics.fmean(loads):.1f}" if loads else "-"
    return (f"| {config} | {scheme} | {v['seeds']} ({'/'.join(str(s) for s in v['steps'])} steps) | {per_seed} | "
            f"{v['before']:.3f} → {v['after']:.3f} | {v['change']:+.3f} ± {v['change_std']:.3f} | "
            f"{'**yes**' if v['learned'] else 'no'} | {step_s:.1f} | {load} |")


def plot_curves(run: Path, png: Path, title: str) -> None:
    """Per-agent curves of a training run (module docstring)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = [r for r in read_jsonl(run / "metrics.jsonl") if "reward" in r]
    agents = sorted({k.split("/")[1] for r in records for k in r if k.startswith("agent/")})
    fig, axes = plt.subplots(1, len(CURVES), figsize=(4 * len(CURVES), 3.4))
    steps = list(range(1, len(records) + 1))
    for ax, (key, label) in zip(axes, CURVES):
        for agent in agents:
            ys = [r.get(f"agent/{agent}/{key}", float("nan")) for r in records]
            ax.plot(steps, ys, "o-", ms=3, label=agent)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("optimizer step")
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=90)
    plt.close(fig)


def report_before_after(run: Path, html: Path, shots: str | None) -> Path:
    """The run's report with its first and last step's episodes, and the screenshots (module docstring)."""
    from baselines.report import write_report

    steps = sorted(int(p.name.split("_")[1].split(".")[0]) for p in (run / "samples").glob("step_*.text.jsonl"))
    if not steps:
        raise FileNotFoundError(f"{run}/samples holds no step_<k>.text.jsonl: train with log.save_samples=true")
    keep = {steps[0], steps[-1]}
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / run.name
        (copy / "samples").mkdir(parents=True)
        for name in ("config.yaml", "metrics.jsonl"):
            if (run / name).is_file():
                shutil.copy(run / name, copy / name)
        for k in keep:
            for suffix in (".jsonl", ".text.jsonl"):
                if (run / "samples" / f"step_{k}{suffix}").is_file():
                    shutil.copy(run / "samples" / f"step_{k}{suffix}", copy / "samples" / f"step_{k}{suffix}")
        html.parent.mkdir(parents=True, exist_ok=True)
        write_report(copy, html)
    if shots:
        screenshots(html, shots, steps[0], steps[-1])
    return html


def screenshots(html: Path, prefix: str, first: int, last: int) -> None:
    """The last step's episode list and one episode of the first and of the last step, as PNGs."""
    from baselines.report.browser import Browser, find_chromium
    from baselines.report.render import extract

    binary = find_chromium()
    if binary is None:
        raise RuntimeError("no chromium found for the screenshots (apt-get install chromium)")
    episodes = extract(html.read_text(encoding="utf-8"))["episodes"]
    pick = {step: next(i for i, e in enumerate(episodes) if e["s"] == step) for step in (first, last)}
    with Browser(binary, width=1280, height=760) as b:
        b.open(html)
        b.wait_for("document.body.dataset.ready")
        b.js("document.querySelector('#tabs button[data-id=episodes]').click()")
        b.js(f"(() => {{ const s = document.querySelector('#episodes select'); s.value = '{last}'; "
             "s.dispatchEvent(new Event('change')); })()")
        b.screenshot(f"{prefix}_episodes.png")
        for name, step in (("before", first), ("after", last)):
            b.js(f"location.hash = 'ep={pick[step]}'")
            b.wait_for("document.querySelectorAll('#episode .turn').length")
            b.screenshot(f"{prefix}_{name}.png")


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cell", nargs="+", action="append", metavar=("CONFIG", "SCHEME"),
                    help="a cell's config name, scheme and the folders of its results.json files (repeatable)")
    ap.add_argument("--out", help="cpu_learning.json to write (with --cell)")
    ap.add_argument("--curves", help="a run folder (metrics.jsonl) to draw per-agent curves of")
    ap.add_argument("--png", help="where --curves writes its figure")
    ap.add_argument("--title", default="")
    ap.add_argument("--report", help="a run folder saved with log.save_samples=true: its before/after report")
    ap.add_argument("--html", help="where --report writes report.html")
    ap.add_argument("--shots", help="--report: also write PREFIX_episodes.png, PREFIX_before.png, PREFIX_after.png")
    args = ap.parse_args(argv)
    if args.report:
        print(f"report: {report_before_after(Path(args.report), Path(args.html or Path(args.report) / 'report.html'), args.shots)}")
    if args.curves:
        if not args.png:
            ap.error("--curves needs --png")
        plot_curves(Path(args.curves), Path(args.png), args.title or Path(args.curves).name)
    records: list[dict[str, Any]] = []
    if args.cell:
        print("| config | scheme | seeds | held-out per seed | mean before → after | change ± std | learned "
              "(> 2 std) | s/step | load |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for config, scheme, *folders in args.cell:
            if not folders:
                ap.error(f"--cell {config} {scheme}: give at least one folder")
            cell = cell_records(config, scheme, folders)
            records.extend(cell)
            print(table_row(config, scheme, cell))
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(records, indent=2, default=float))
    return records


if __name__ == "__main__":
    main()
