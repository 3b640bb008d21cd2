"""Benchmark: seconds per training step of 1 process vs N data-parallel ranks (``torchrun``).

Run: ``python -m baselines.bench.distributed [--ranks 2] [--steps 6] [--rounds 2] [key=value ...]``
or ``python -m baselines.bench.distributed --memory [--ranks 2] [--steps 3] [--sharing shared lora]``

Each round trains the same config (default: the signal game's default run, GRPO, tiny model,
``rollout.tasks_per_step=64``) for ``--steps`` steps as one plain process, then as ``--ranks``
processes launched by ``torchrun`` (gloo on CPU, loopback), then as one process again. The
figure per run is the median ``time/step_s`` logged after the first step; the ratio is the
median over rounds of 1-process time / N-rank time (the speed-up; N x is the ceiling, reached
only with N free cores and a step dominated by per-rank work). Launch and start-up time is not
counted.

``--memory``: per-rank memory of replicated vs FSDP (``distributed.fsdp``) data parallelism. Trains
a larger tiny model (default ``model.tiny_hidden_size=256 model.tiny_layers=4``, vocabulary of the
signal game's words) for ``--steps`` steps as 1 process, as ``--ranks`` replicated ranks and as
``--ranks`` FSDP ranks, once per ``model.sharing`` in ``--sharing``, and prints rank 0's
``memory/*`` metrics (MB of parameters, of AdamW state, and of parameters while generating: FSDP
gathers the whole weights for the rollout), the ratio of parameters + optimizer state FSDP /
replicated, and the median step time and FSDP's all-gather time per step. The memory figures are
tensor sizes (what the rank stores), not process RSS.
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


MEMORY_MODEL = ["model.tiny_hidden_size=256", "model.tiny_layers=4", "model.tiny_heads=4", "rollout.tasks_per_step=8"]


def run(ranks: int, steps: int, overrides: list[str], out: Path, name: str) -> float:
    """Median seconds per step (after the first) of one training run with ``ranks`` processes."""
    return statistics.median(rec["time/step_s"] for rec in train(ranks, steps, overrides, out, name)[1:])


def train(ranks: int, steps: int, overrides: list[str], out: Path, name: str) -> list[dict]:
    """The per-step metrics (logged by rank 0) of one training run with ``ranks`` processes."""
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
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    lines = [json.loads(x) for x in (out / name / "metrics.jsonl").read_text().splitlines()]
    return [rec for rec in lines if "time/step_s" in rec]


def memory(ranks: int, steps: int, sharing: list[str], overrides: list[str]) -> dict[str, float]:
    """Rank 0's memory of 1 process, ``ranks`` replicated ranks and ``ranks`` FSDP ranks, per sharing mode;
    returns sharing -> (FSDP / replicated) ratio of parameters + optimizer state."""
    ratios = {}
    print(f"{'sharing':9} {'run':18} {'params MB':>10} {'AdamW MB':>9} {'params+AdamW':>13} "
          f"{'generating MB':>14} {'s/step':>7} {'gather s':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for mode in sharing:
            rows = {}
            for label, n, fsdp in (("1 process", 1, False), (f"{ranks} ranks replicated", ranks, False),
                                   (f"{ranks} ranks FSDP", ranks, True)):
                recs = train(n, steps, [*MEMORY_MODEL, f"model.sharing={mode}", f"distributed.fsdp={fsdp}",
                                        *overrides], Path(tmp), f"{mode}-{n}-{fsdp}")
                last = recs[-1]
                rows[label] = total = last["memory/params_mb"] + last["memory/optimizer_mb"]
                gather = statistics.median(r.get("time/gather_s", 0.0) for r in recs[1:] or recs)
                print(f"{mode:9} {label:18} {last['memory/params_mb']:10.2f} {last['memory/optimizer_mb']:9.2f} "
                      f"{total:13.2f} {last['memory/generation_params_mb']:14.2f} "
                      f"{statistics.median(r['time/step_s'] for r in recs[1:] or recs):7.3f} {gather:9.4f}",
                      flush=True)
            ratios[mode] = rows[f"{ranks} ranks FSDP"] / rows[f"{ranks} ranks replicated"]
            print(f"{mode}: parameters + AdamW state per rank, FSDP / replicated: {ratios[mode]:.3f} "
                  f"(ideal 1/{ranks} = {1 / ranks:.3f})", flush=True)
    return ratios


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--memory", action="store_true", help="per-rank memory, replicated vs FSDP")
    parser.add_argument("--sharing", nargs="+", default=["shared", "separate", "lora"],
                        help="model.sharing modes measured by --memory")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = parser.parse_args(argv)
    if args.memory:
        ratios = memory(args.ranks, args.steps, args.sharing, args.overrides)
        return max(ratios.values())
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
