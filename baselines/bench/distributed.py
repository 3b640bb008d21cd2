"""Benchmark: seconds per training step of 1 process vs N data-parallel ranks (``torchrun``).

Run: ``python -m baselines.bench.distributed [--ranks 2] [--steps 6] [--rounds 2] [key=value ...]``

Each round trains the same config (default: the signal game's default run, GRPO, tiny model,
``rollout.tasks_per_step=64``) for ``--steps`` steps as one plain process, then as ``--ranks``
processes launched by ``torchrun`` (gloo on CPU, loopback), then as one process again. The
figure per run is the median ``time/step_s`` logged after the first step; the ratio is the
median over rounds of 1-process time / N-rank time (the speed-up; N x is the ceiling, reached
only with N free cores and a step dominated by per-rank work). Launch and start-up time is not
counted.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULTS = ["rollout.tasks_per_step=64", "log.tensorboard=false", "log.plot=false", "log.progress=false",
            "log.log_every=0"]


def run(ranks: int, steps: int, overrides: list[str], out: Path, name: str) -> float:
    """Median seconds per step (after the first) of one training run with ``ranks`` processes."""
    args = ["-m", "baselines.train", "--out", str(out), "--name", name, "--steps", str(steps),
            "--no-eval", *DEFAULTS, *overrides]
    if ranks > 1:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(ranks),
               "--master_addr", "127.0.0.1", "--master_port", str(port), *args]
    else:
        cmd = [sys.executable, *args]
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    subprocess.run(cmd, check=True, env=env, capture_output=True)
    lines = [json.loads(x) for x in (out / name / "metrics.jsonl").read_text().splitlines()]
    times = [rec["time/step_s"] for rec in lines if "time/step_s" in rec][1:]
    return statistics.median(times)


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = parser.parse_args(argv)
    ratios, one, many = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            a = run(1, args.steps, args.overrides, Path(tmp), f"one_a{r}")
            n = run(args.ranks, args.steps, args.overrides, Path(tmp), f"many{r}")
            b = run(1, args.steps, args.overrides, Path(tmp), f"one_b{r}")
            one += [a, b]
            many.append(n)
            ratios.append((a + b) / 2 / n)
    print(f"1 process: {statistics.median(one):.3f} s/step; {args.ranks} ranks (torchrun, gloo): "
          f"{statistics.median(many):.3f} s/step  [{args.steps} steps, {args.rounds} rounds, "
          f"overrides {DEFAULTS + args.overrides}]")
    ratio = statistics.median(ratios)
    print(f"speed-up 1 process / {args.ranks} ranks (median per round): {ratio:.2f}")
    return ratio


if __name__ == "__main__":
    main()
