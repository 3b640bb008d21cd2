"""The GPU speed check of the trainer's generation: before/after in one sitting, the bound, the step share.

    python -m baselines.bench.gpu_generation --model smollm2-135m-instruct --device cuda --dtype bf16 \\
        --out $OUT/gpu_generation.json
    python -m baselines.bench.gpu_generation --tiny --out /tmp/gpu_generation.json   # CPU try-out

One LoRA team (one adapter per agent, as the trainer builds it) samples ``--tasks`` x ``--group``
rows (128 by default: 16 helper/main observations x G=8, both agents) with ``--max-new-tokens``
(192) new tokens each, seeded alike, with

* **before**: the transformers backend as the trainer built it until now (``decode="generate"``:
  one mixed-adapter ``model.generate`` call, segmented decoding, streaming log-probs), one timed
  call after a 2-token warm-up;
* **after**: ``decode="fast"`` (merged adapters, lean loop; on CUDA the static cache and CUDA
  graphs), one untimed full-length call (captures the graphs), then ``--repeats`` timed calls
  (their median).

Figures are generated tokens (up to and including EOS) per second. The **bound** beside them: a
decode step reads every weight once per policy call, so ``rows / (calls x weight bytes /
bandwidth)`` tokens/s, with the bandwidth measured here (a large device-to-device copy: read +
write bytes / time). Then ``--share-steps`` steps of the real trainer (helper/main GRPO, the SmolLM2
config with ``rollout.tasks_per_step=8 rollout.group_size=8 optim.micro_batch_rows=32``, the fast
path) give the generation share of a training step (median of the steps after the first) --
``time/generation_share`` of the trainer's own metrics. Writes ``{"device", "model", "rows",
"new_tokens", "before_tokens_per_s", "after_tokens_per_s", "generation_share_after", ...}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from baselines.bench.rollout import BenchConfig, Figures, build_model, env_requests, grouped, timed_backend
from baselines.config import load_config
from baselines.generation import GenerationConfig, GenRequest, TransformersBackend
from baselines.metrics import read_jsonl
from baselines.policies import Team, TeamConfig
from baselines.policies.corpus import signal_game_texts
from baselines.trainer import Trainer

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "helper_main_grpo_smollm2.yaml"


def bandwidth(device: str, megabytes: int = 1024) -> float:
    """Bytes per second of a device-to-device copy (read + write), best of 5."""
    src = torch.empty(megabytes * 2**20, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(5):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        dst.copy_(src)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return 2 * src.numel() / best


def fidelity(team: Team, fast: TransformersBackend, before: TransformersBackend, requests: list[GenRequest]) -> dict:
    """Is the fast path (merged weights, CUDA graphs) the policy it claims to be? Checked, not assumed.

    * ``logprob_abs_diff_{mean,max}``: the sampled tokens' recorded log-probs against a teacher-forced
      recompute of the same tokens through the training model (peft, unmerged), per token;
    * ``greedy_rows_identical``: the share of rows whose greedy completion equals the ``generate`` path's.
      In bf16, merged weights round differently from adapter-on-the-side, so a few rows may part ways
      after a near-tie; a graph that replayed stale buffers would fail both figures wholesale.
    """
    outputs = fast.generate(requests)
    diffs: list[float] = []
    with torch.no_grad():
        for agent in sorted({o.agent for o in outputs}):
            mine = [o for o in outputs if o.agent == agent and o.completion_ids]
            logps, _ = team.sequence_logprobs(agent, [o.prompt_ids for o in mine], [o.completion_ids for o in mine],
                                              batch_size=16)  # fmt: skip
            for o, lp in zip(mine, logps):
                diffs += (lp.float().cpu() - torch.tensor(o.logprobs)).abs().tolist()
    greedy = GenerationConfig(max_new_tokens=fast.config.max_new_tokens, temperature=0)
    same = [a.completion_ids == b.completion_ids
            for a, b in zip(fast.generate(requests, greedy), before.generate(requests, greedy))]  # fmt: skip
    return {"logprob_abs_diff_mean": statistics.fmean(diffs) if diffs else 0.0,
            "logprob_abs_diff_max": max(diffs, default=0.0), "greedy_rows_identical": sum(same) / len(same)}  # fmt: skip


def share_of_step(model_path: str, args: argparse.Namespace, run_dir: Path) -> dict[str, float]:
    """Median generation share, generated tokens/s and step seconds of the trainer's steps after the first."""
    overrides = [f"device={args.device}", f"model.dtype={args.dtype}", f"model.path={model_path}",
                 f"rollout.tasks_per_step={args.share_tasks}", f"rollout.group_size={args.share_group}",
                 f"optim.micro_batch_rows={args.share_micro_batch}", f"steps={args.share_steps}",
                 f"generation.max_new_tokens={args.max_new_tokens}", "log.progress=false"]  # fmt: skip
    trainer = Trainer(load_config(str(CONFIG), overrides), run_dir)
    trainer.fit(eval_episodes=0)
    records = [r for r in read_jsonl(trainer.run_dir / "metrics.jsonl") if "time/generation_share" in r]
    later = records[1:] or records
    return {key: statistics.median(r[name] for r in later) for key, name in
            (("generation_share", "time/generation_share"), ("generated_tokens_per_s", "tokens_per_s/generated"),
             ("step_s", "time/step_s"))}  # fmt: skip


def run(args: argparse.Namespace, tmp: Path) -> dict:
    if args.device == "cpu" and args.threads:
        torch.set_num_threads(args.threads)
    distinct, agents = env_requests((args.env,), args.tasks, args.seed)
    requests = grouped(distinct, args.group)
    texts = signal_game_texts() + [m["content"] for r in distinct for m in r.messages]
    bench = BenchConfig(model=None if args.tiny else args.model, random_weights=args.random_weights, seed=args.seed)
    path = build_model(bench, tmp / "model", texts)
    team = Team.from_config(TeamConfig(mode="lora", model=path, dtype=args.dtype, device=args.device), agents)
    gen = GenerationConfig(max_new_tokens=args.max_new_tokens, temperature=1.0, seed=args.seed)
    rows = len(requests)
    print(f"model {args.model if not args.tiny else 'tiny'}{' (random weights)' if args.random_weights else ''}, "
          f"{args.dtype}, {args.device}; {rows} rows x {args.max_new_tokens} new tokens, {len(agents)} adapters")  # fmt: skip
    before_backend = TransformersBackend(team, gen)  # the trainer's backend until now
    before_backend.generate(requests, GenerationConfig(max_new_tokens=2, seed=args.seed))
    before = timed_backend(before_backend, requests, args.device)
    print(f"before (decode=generate): {before.tokens} tokens in {before.seconds:.2f} s = {before.rate:,.0f} tokens/s")
    after_backend = TransformersBackend(team, gen, decode="fast")
    after_backend.generate(requests)  # full length: captures the CUDA graphs
    runs: list[Figures] = [timed_backend(after_backend, requests, args.device) for _ in range(args.repeats)]
    after = sorted(runs, key=lambda f: f.rate)[len(runs) // 2]
    graphs = after_backend._graphs
    print(f"after (decode=fast): {after.tokens} tokens in {after.seconds:.2f} s = {after.rate:,.0f} tokens/s "
          f"= {after.rate / before.rate:.1f}x before; CUDA graphs: "
          f"{'off' if graphs is None else (graphs.failure or f'{graphs.captures} captured')}")  # fmt: skip
    weight_bytes = sum(p.numel() * p.element_size() for p in team.model(agents[0]).parameters())
    bw = bandwidth(args.device)
    calls = len({team.policy_key(r.agent) for r in requests})
    bound = rows / (calls * weight_bytes / bw)
    print(f"weights {weight_bytes / 1e6:.0f} MB, measured copy bandwidth {bw / 1e9:,.0f} GB/s, {calls} policy "
          f"call(s) per step: bound {bound:,.0f} tokens/s (one read of the weights per call per step)")  # fmt: skip
    result = {"device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
              "model": ("tiny" if args.tiny else args.model) + (" (random weights)" if args.random_weights else ""),
              "rows": rows, "new_tokens": args.max_new_tokens, "dtype": args.dtype,
              "before_tokens_per_s": before.rate, "after_tokens_per_s": after.rate,
              "speedup": after.rate / before.rate, "weight_bytes": weight_bytes, "bandwidth_bytes_per_s": bw,
              "bound_tokens_per_s": bound, "cuda_graphs": None if graphs is None else (graphs.failure or "on")}  # fmt: skip
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))  # the speed figures first: a later failure keeps them
    check = fidelity(team, after_backend, before_backend, requests)
    print(f"fidelity of the fast path: recorded vs recomputed log-probs |diff| mean {check['logprob_abs_diff_mean']:.2e}, "
          f"max {check['logprob_abs_diff_max']:.2e}; greedy rows identical to generate: "
          f"{check['greedy_rows_identical']:.0%}")  # fmt: skip
    result["fidelity"] = check
    Path(args.out).write_text(json.dumps(result, indent=2))
    if args.share_steps:
        share = share_of_step(path, args, tmp / "train")
        print(f"training step (fast path): generation share {share['generation_share']:.2f}, "
              f"{share['generated_tokens_per_s']:,.0f} generated tokens/s, {share['step_s']:.1f} s/step")  # fmt: skip
        result |= {"generation_share_after": share["generation_share"], "train_step": share}
        Path(args.out).write_text(json.dumps(result, indent=2))
    return result


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m-instruct", help="preset, folder or hub id")
    p.add_argument("--random-weights", action="store_true", help="keep --model's config and tokenizer only")
    p.add_argument("--tiny", action="store_true", help="the locally built tiny model (a CPU try-out)")
    p.add_argument("--env", default="code/helper_main_v0", help="task whose observations are the prompts")
    p.add_argument("--tasks", type=int, default=16)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=192)
    p.add_argument("--repeats", type=int, default=3, help="timed calls of the fast path (median)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--share-steps", type=int, default=3, help="trainer steps for the generation share (0: skip)")
    p.add_argument("--share-tasks", type=int, default=8)
    p.add_argument("--share-group", type=int, default=8)
    p.add_argument("--share-micro-batch", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True, help="the JSON file to write")
    with tempfile.TemporaryDirectory() as tmp:
        run(p.parse_args(argv), Path(tmp))


if __name__ == "__main__":
    main()
