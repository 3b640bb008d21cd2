"""The GPU speed check of the trainer's generation: before/after in one sitting, the bound, fidelity, the step share.

    python -m baselines.bench.gpu_generation --model smollm2-135m-instruct --device cuda --dtype bf16 \\
        --out $OUT/gpu_generation.json
    python -m baselines.bench.gpu_generation --tiny --device cpu --dtype fp32 --out /tmp/gpu_generation.json

One LoRA team (one adapter per agent, every adapter drawn non-zero and different: fresh adapters are
the base model and would hide a wrong one) samples ``--tasks`` x ``--group`` rows (128 by default:
16 helper/main observations x G=8, both agents) with ``--max-new-tokens`` (192) new tokens each:

* **before**: the transformers backend as the trainer built it until #27 (``decode="generate"``: one
  mixed-adapter ``model.generate`` call, segmented decoding, streaming log-probs), one timed call
  after a 2-token warm-up;
* **after**: ``decode="fast"`` (the team decoder: every agent's rows in one forward per token; on CUDA
  the step captured as a CUDA graph), one untimed full-length call (captures the graphs), then
  ``--repeats`` timed calls (their median). ``cuda_graphs`` records the captures, the replays and
  why graphs are off if they are.

Figures are generated tokens (up to and including EOS) per second. The **bound**: a decode step
reads every weight once and every row's keys and values so far, so ``rows / ((weight bytes + KV
bytes) / bandwidth)`` tokens/s at the average cache length, with the bandwidth measured here (a
large device-to-device copy). **Fidelity** (:mod:`baselines.bench.fidelity`): recorded log-probs
against the training model's recompute, a wrong-adapter control, an update followed by the sampler,
graphs against the same step run eagerly -- each with its threshold; ``passed`` says whether all
held. Then ``--share-steps`` steps of the real trainer (helper/main GRPO, the SmolLM2 config) give
the generation share of a training step (median of the steps after the first).

The JSON is rewritten after every phase (``"partial": true`` until the last), so a run cut short keeps
what it measured: ``{"device", "model", "rows", "new_tokens", "before_tokens_per_s",
"after_tokens_per_s", "speedup", "bound_tokens_per_s", "cuda_graphs", "fidelity",
"generation_share_after", ...}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
import transformers

from baselines.bench.fidelity import check as fidelity_check
from baselines.bench.fidelity import randomize_adapters
from baselines.bench.rollout import BenchConfig, Figures, build_model, env_requests, grouped, timed_backend
from baselines.config import load_config
from baselines.generation import GenerationConfig, TransformersBackend
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


def _write(path: str, result: dict, partial: bool = True) -> None:
    """Rewrite the JSON whole (renamed into place: a reader never sees half a file)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result | {"partial": partial}, indent=2, default=float))
    tmp.replace(out)


def kv_bytes_per_row_token(team: Team, agent: str) -> int:
    """Bytes of keys and values one cached token costs per row (every layer)."""
    cfg = team.model(agent).config.get_text_config(decoder=True)
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    size = next(team.model(agent).parameters()).element_size()
    return 2 * cfg.num_hidden_layers * heads * dim * size


def run(args: argparse.Namespace, tmp: Path) -> dict:
    if args.device == "cpu" and args.threads:
        torch.set_num_threads(args.threads)
    distinct, agents = env_requests((args.env,), args.tasks, args.seed)
    requests = grouped(distinct, args.group)
    texts = signal_game_texts() + [m["content"] for r in distinct for m in r.messages]
    bench = BenchConfig(model=None if args.tiny else args.model, random_weights=args.random_weights, seed=args.seed)
    path = build_model(bench, tmp / "model", texts)
    team = Team.from_config(TeamConfig(mode="lora", model=path, dtype=args.dtype, device=args.device), agents)
    randomize_adapters(team, seed=args.seed)
    gen = GenerationConfig(max_new_tokens=args.max_new_tokens, temperature=1.0, seed=args.seed)
    rows = len(requests)
    print(f"model {args.model if not args.tiny else 'tiny'}{' (random weights)' if args.random_weights else ''}, "
          f"{args.dtype}, {args.device}; {rows} rows x {args.max_new_tokens} new tokens, {len(agents)} adapters "
          f"(random, non-zero)", flush=True)  # fmt: skip
    result: dict = {"device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
                    "model": ("tiny" if args.tiny else args.model) + (" (random weights)" if args.random_weights else ""),
                    "rows": rows, "new_tokens": args.max_new_tokens, "dtype": args.dtype,
                    "versions": {"torch": torch.__version__, "transformers": transformers.__version__}}  # fmt: skip
    before_backend = TransformersBackend(team, gen)  # the trainer's backend before #27
    before_backend.generate(requests, GenerationConfig(max_new_tokens=2, seed=args.seed))
    before = timed_backend(before_backend, requests, args.device)
    print(f"before (decode=generate): {before.tokens} tokens in {before.seconds:.2f} s = {before.rate:,.0f} tokens/s",
          flush=True)  # fmt: skip
    result |= {"before_tokens_per_s": before.rate, "before_tokens": before.tokens, "before_seconds": before.seconds}
    _write(args.out, result)
    after_backend = TransformersBackend(team, gen, decode="fast")
    warm = timed_backend(after_backend, requests, args.device)  # full length: captures the CUDA graphs
    print(f"after, first call (captures): {warm.seconds:.2f} s", flush=True)
    runs: list[Figures] = []
    for _ in range(args.repeats):
        runs.append(timed_backend(after_backend, requests, args.device))
        after = sorted(runs, key=lambda f: f.rate)[len(runs) // 2]
        graphs = after_backend.graphs.summary() if after_backend.graphs is not None else {"mode": "off: not on CUDA"}
        result |= {"after_tokens_per_s": after.rate, "after_tokens": after.tokens, "after_seconds": after.seconds,
                   "after_runs_tokens_per_s": [f.rate for f in runs], "first_call_seconds": warm.seconds,
                   "speedup": after.rate / before.rate, "cuda_graphs": graphs}  # fmt: skip
        _write(args.out, result)
    print(f"after (decode=fast): {after.tokens} tokens in {after.seconds:.2f} s = {after.rate:,.0f} tokens/s "
          f"= {after.rate / before.rate:.1f}x before; CUDA graphs: {result['cuda_graphs']}", flush=True)  # fmt: skip
    weight_bytes = sum(p.numel() * p.element_size() for p in team.model(agents[0]).parameters())
    bw = bandwidth(args.device)
    prompt = statistics.fmean(len(team.encode_prompt(r.agent, r.messages)) for r in requests)
    kv_bytes = rows * (prompt + args.max_new_tokens / 2) * kv_bytes_per_row_token(team, agents[0])
    bound = rows / ((weight_bytes + kv_bytes) / bw)
    print(f"weights {weight_bytes / 1e6:.0f} MB + KV cache {kv_bytes / 1e6:.0f} MB per step (mean prompt {prompt:.0f} "
          f"tokens), copy bandwidth {bw / 1e9:,.0f} GB/s: bound {bound:,.0f} tokens/s", flush=True)  # fmt: skip
    result |= {"weight_bytes": weight_bytes, "kv_bytes_per_step": kv_bytes, "bandwidth_bytes_per_s": bw,
               "bound_tokens_per_s": bound, "after_share_of_bound": after.rate / bound}  # fmt: skip
    _write(args.out, result)
    check = fidelity_check(team, after_backend, requests, dtype=str(team.model(agents[0]).dtype).removeprefix("torch."),
                           max_new_tokens=args.fidelity_tokens, seed=args.seed)  # fmt: skip
    print(f"fidelity: {'passed' if check['passed'] else 'FAILED ' + str(check['failures'])}; "
          + ", ".join(f"{k} {v:.3g}" for k, v in check.items() if isinstance(v, float)), flush=True)  # fmt: skip
    result["fidelity"] = check
    _write(args.out, result, partial=bool(args.share_steps))
    if args.share_steps:
        share = share_of_step(path, args, tmp / "train")
        print(f"training step (fast path): generation share {share['generation_share']:.2f}, "
              f"{share['generated_tokens_per_s']:,.0f} generated tokens/s, {share['step_s']:.1f} s/step", flush=True)  # fmt: skip
        result |= {"generation_share_after": share["generation_share"], "train_step": share}
        _write(args.out, result, partial=False)
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
    p.add_argument("--fidelity-tokens", type=int, default=64, help="new tokens per row in the fidelity check")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True, help="the JSON file to write")
    with tempfile.TemporaryDirectory() as tmp:
        run(p.parse_args(argv), Path(tmp))


if __name__ == "__main__":
    main()
