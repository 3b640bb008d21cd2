"""Where a decode step's time goes: wall time, operators and kernels per generated token step.

    python -m baselines.bench.decode_profile                      # tiny LoRA team, CPU
    python -m baselines.bench.decode_profile --model smollm2-135m-instruct --random-weights --tasks 2 --group 4 --steps 16
    python -m baselines.bench.decode_profile --model smollm2-135m-instruct --random-weights \\
        --device cuda --dtype bf16 --tasks 16 --group 8 --json $OUT/profile.json

A LoRA team (one adapter per agent, both adapters drawn non-zero so they differ) samples the
rollout benchmark's workload (``--tasks`` prompts x ``--group`` copies, from the signal game's
real observations, both agents in the batch) with three engines:

1. ``plain generate``: one bare ``model.generate`` through peft with a single adapter set (no
   log-probs, no mixed adapters) -- the reference of the rollout benchmark;
2. ``backend generate``: :class:`TransformersBackend` with ``decode="generate"`` (one mixed-adapter
   ``generate`` call for the team: peft splits every LoRA layer's input into per-adapter sub-batches,
   the log-prob recorder runs over the full vocabulary each step);
3. ``backend fast``: ``decode="fast"``, the lean loop with its device defaults: the team decoder (all
   agents' rows in one forward, each with its own adapter; on CUDA a CUDA graph per step, also shown
   without graphs), and the same loop through the model's own forward with peft's per-row adapters.

Each engine runs ``--steps`` and ``--steps // 2`` new tokens; the per-step figures are the
difference divided by the extra steps, so the prompt prefill drops out. That needs rows that do not
stop early: with a real model use ``--random-weights`` (same shapes, rows run to the cap). ``torch.profiler``
counts the ATen operators dispatched from the host (all of them, and the top-level ones the Python
code calls) and, on CUDA, the kernels launched; the wall time comes from an unprofiled run. On a CPU
the operator count is a device-independent measure of host overhead: each operator costs
microseconds of dispatch however small its tensors; on a GPU a step's time is bounded below by
its kernel launches when the host is the bottleneck.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch.autograd import DeviceType

from baselines.bench.rollout import BenchConfig, build_model, env_requests, grouped
from baselines.generation import GenerationConfig, TransformersBackend
from baselines.policies import Team, TeamConfig
from baselines.policies.corpus import signal_game_texts


@dataclass
class StepFigures:
    """Per decode step of one engine (marginal: the difference of two lengths over the extra steps)."""

    engine: str
    ms_per_step: float
    ops_per_step: float
    top_level_ops_per_step: float
    kernels_per_step: float


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _count(fn: Callable[[], object], device: str) -> tuple[int, int, int]:
    """(ATen ops, top-level ATen ops, CUDA kernels) of one call of ``fn``."""
    acts = [torch.profiler.ProfilerActivity.CPU]
    if device.startswith("cuda"):
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=acts) as prof:
        fn()
        _sync(device)
    events = prof.events()
    ops = [e for e in events if e.name.startswith("aten::")]
    top = [e for e in ops if e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")]
    kernels = sum(1 for e in events if e.device_type == DeviceType.CUDA)
    return len(ops), len(top), kernels


def _seconds(fn: Callable[[], object], device: str, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - start)
    return best


def measure(engine: str, run: Callable[[int], object], steps: int, device: str, repeats: int) -> StepFigures:
    """Per-step figures of ``run(n_new_tokens)`` from ``steps`` and ``steps // 2`` tokens."""
    half = steps // 2
    run(steps)  # warm-up (first-call allocations, graph capture)
    t_long, t_short = _seconds(lambda: run(steps), device, repeats), _seconds(lambda: run(half), device, repeats)
    c_long, c_short = _count(lambda: run(steps), device), _count(lambda: run(half), device)
    extra = steps - half
    return StepFigures(engine, 1000 * (t_long - t_short) / extra, (c_long[0] - c_short[0]) / extra,
                       (c_long[1] - c_short[1]) / extra, (c_long[2] - c_short[2]) / extra)  # fmt: skip


def run(args: argparse.Namespace) -> list[StepFigures]:
    if args.device == "cpu" and args.threads:
        torch.set_num_threads(args.threads)
    distinct, agents = env_requests(("toy/signal_game_v0",), args.tasks, args.seed)
    requests = grouped(distinct, args.group)
    texts = signal_game_texts() + [m["content"] for r in distinct for m in r.messages]
    bench = BenchConfig(model=args.model, random_weights=args.random_weights, seed=args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = build_model(bench, Path(tmp) / "model", texts)
        team = Team.from_config(TeamConfig(mode="lora", model=path, dtype=args.dtype, device=args.device), agents)
    gen = torch.Generator().manual_seed(args.seed)
    with torch.no_grad():  # two different non-zero adapters
        for n, p in team.trainable_parameters().items():
            p.copy_(torch.randn(p.shape, generator=gen) * (0.02 if "lora_B" in n else 0.1))
    print(f"model: {args.model or 'tiny'} ({args.dtype}, {args.device}), LoRA team of {len(agents)} agents; "
          f"{len(requests)} rows ({args.tasks} prompts x {args.group}); {args.steps} vs {args.steps // 2} new tokens")  # fmt: skip

    def backend_run(**kw) -> Callable[[int], object]:
        backend = TransformersBackend(team, decode_segment=None, **kw)
        return lambda n: backend.generate(requests, GenerationConfig(max_new_tokens=n, seed=args.seed))

    prompts = [team.encode_prompt(r.agent, r.messages) for r in requests]
    tok = team.tokenizer(agents[0])
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[tok.pad_token_id] * (width - len(p)) + p for p in prompts], device=args.device)
    mask = (torch.arange(width) >= torch.tensor([width - len(p) for p in prompts])[:, None]).long().to(args.device)

    def plain(n: int) -> object:
        with torch.no_grad(), team.generating(agents[0]) as model:
            torch.manual_seed(args.seed)
            return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n, do_sample=True, top_k=0,
                                  pad_token_id=tok.pad_token_id, eos_token_id=team.eos_token_ids(agents[0]))  # fmt: skip

    # the fast path first: a window cut short by its time limit still has the figure that matters most
    engines: list[tuple[str, Callable[[int], object]]] = [("backend fast", backend_run(decode="fast"))]
    if args.device.startswith("cuda"):
        engines.append(("backend fast, no CUDA graphs", backend_run(decode="fast", cuda_graphs=False)))
    engines += [("backend fast, model forward (peft per-row adapters)", backend_run(decode="fast", team_decoder=False)),
                ("plain generate (one adapter)", plain),
                ("backend generate (mixed adapters)", backend_run(decode="generate"))]
    results = []
    for name, fn in engines:
        try:
            fig = measure(name, fn, args.steps, args.device, args.repeats)
        except Exception as err:  # noqa: BLE001 -- a failing engine is reported, the others still run
            print(f"{name}: failed: {type(err).__name__}: {err}")
            continue
        results.append(fig)
        if args.json:  # after every engine: a run cut short keeps what it measured
            Path(args.json).write_text(json.dumps({"device": args.device, "model": args.model or "tiny",
                                                   "rows": len(requests), "engines": [asdict(r) for r in results],
                                                   "partial": len(results) < len(engines)}, indent=2))  # fmt: skip
        print(f"{name:52s} {fig.ms_per_step:8.2f} ms/step  {fig.ops_per_step:7.0f} ops/step "
              f"({fig.top_level_ops_per_step:5.0f} top-level)  {fig.kernels_per_step:6.0f} kernels/step")  # fmt: skip
    return results


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=4)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--steps", type=int, default=32, help="new tokens of the long run (the short one: half)")
    p.add_argument("--repeats", type=int, default=2, help="timed runs per length (the fastest counts)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--model", help="preset, folder or hub id (default: the tiny model)")
    p.add_argument("--random-weights", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", help="write the figures to this file")
    run(p.parse_args(argv))


if __name__ == "__main__":
    main()
