"""Benchmark of one training step: training tokens/s per optimizer step, and where the time goes.

    python -m baselines.bench.train                                # tiny model, CPU, signal game
    python -m baselines.bench.train --steps 5 --scheme dr_mas
    python -m baselines.bench.train --device cuda --shape qwen2.5-0.5b --max-new-tokens 32

Runs ``--warmup`` + ``--steps`` real optimizer steps of :class:`baselines.trainer.Trainer` and
prints, per measured step, the training tokens/s (prompt + completion tokens through the
forward and backward passes of the update / update wall time), the generation tokens/s and
the share of the step spent generating. The reference, measured in the same run on the same
rows, is a bare forward + backward of the whole batch through ``Team.sequence_logprobs``
(no loss bookkeeping, no per-agent passes): the printed ratio is trainer / bare throughput.
``--shape qwen2.5-0.5b`` uses a random-weight model of Qwen2.5-0.5B's shape with the local
tokenizer (no download), for GPU users. ``--model smollm2-135m-instruct`` (a preset, local folder
or hub id) trains a real pretrained model instead (add ``model.sharing=lora`` for adapters);
``--random-weights`` keeps its config and tokenizer and draws new weights (a GPU where the real
weights cannot travel; add ``model.dtype=bf16``).
The last line also gives the process's peak resident memory (includes loading the model).

    python -m baselines.bench.train --model smollm2-135m-instruct --env code/helper_main_v0 \
        --tasks 2 --group 2 --max-new-tokens 32 --steps 2 model.sharing=lora
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

import torch

from baselines.config import load_config
from baselines.policies import build_random_copy
from baselines.trainer import Trainer


def build_model(shape: str, workdir: Path, texts_from: Trainer | None = None) -> str | None:
    """None for the tiny default; a saved random-weight Qwen2.5-0.5B-shaped model otherwise."""
    if shape == "tiny":
        return None
    if shape != "qwen2.5-0.5b":
        raise ValueError(f"unknown shape {shape!r}; expected 'tiny' or 'qwen2.5-0.5b'")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from baselines.policies import qwen25_05b_shape_config

    tiny = workdir / "tiny_model"
    tok = AutoTokenizer.from_pretrained(tiny)
    cfg = qwen25_05b_shape_config(vocab_size=len(tok))
    cfg.eos_token_id, cfg.pad_token_id, cfg.bos_token_id = (
        tok.eos_token_id,
        tok.pad_token_id,
        tok.bos_token_id,
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    out = workdir / "qwen2.5-0.5b-shape"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return str(out)


def bare_throughput(trainer: Trainer, table) -> float:
    """Tokens/s of one plain forward + backward over every row, per agent (the reference)."""
    tokens, seconds = 0, 0.0
    for agent in trainer.agents:
        idx = [i for i in range(len(table)) if table.agent[i] == agent and table.completion_ids[i]]
        if not idx:
            continue
        prompts = [table.prompt_ids[i] for i in idx]
        comps = [table.completion_ids[i] for i in idx]
        _sync(trainer.config.device)
        start = time.perf_counter()
        logps, _ = trainer.team.sequence_logprobs(agent, prompts, comps)
        torch.cat(logps).sum().backward()
        _sync(trainer.config.device)
        seconds += time.perf_counter() - start
        tokens += sum(len(p) + len(c) for p, c in zip(prompts, comps))
    for s in trainer.param_sets:
        for p in s.params:
            p.grad = None
    return tokens / max(seconds, 1e-9)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--shape", default="tiny", choices=["tiny", "qwen2.5-0.5b"])
    ap.add_argument("--model", help="real model: preset (smollm2-135m-instruct), local folder or hub id")
    ap.add_argument(
        "--random-weights",
        action="store_true",
        help="keep --model's config and tokenizer (a folder without weights will do), draw random weights",
    )
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    ap.add_argument("--scheme", default="grpo")
    ap.add_argument("--env", default="toy/signal_game_v0")
    ap.add_argument("--tasks", type=int, default=32, help="tasks per step")
    ap.add_argument("--group", type=int, default=8, help="G / K")
    ap.add_argument("--max-new-tokens", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("overrides", nargs="*", help="extra key=value config overrides")
    args = ap.parse_args(argv)
    if args.random_weights and not args.model:
        ap.error("--random-weights needs --model (whose config and tokenizer to keep)")
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        model = args.model
        if args.random_weights:
            model = str(build_random_copy(args.model, workdir / "random_weights"))
        overrides = [
            f"scheme={args.scheme}",
            f"device={args.device}",
            f"rollout.tasks_per_step={args.tasks}",
            f"rollout.group_size={args.group}",
            f"generation.max_new_tokens={args.max_new_tokens}",
            f"model.tiny_dir={workdir / 'tiny_model'}",
            *([f"model.path={model}"] if model else []),
            *args.overrides,
        ]
        base = {"env": {"name": args.env}} if args.env != "toy/signal_game_v0" else {}
        config = load_config(overrides=overrides, base=base)
        trainer = Trainer(config, workdir / "run")
        path = None if args.model else build_model(args.shape, workdir)
        if path is not None:
            config.model.path = path
            trainer = Trainer(config, workdir / "run")
        print(
            f"bench: {args.model or args.shape}{' (random weights)' if args.random_weights else ''} "
            f"on {args.device}, {args.env}, {args.scheme}, "
            f"{args.tasks} tasks x {args.group} per step, max_new_tokens {args.max_new_tokens}"
        )
        train_tps, gen_tps, share, ratios = [], [], [], []
        for i in range(args.warmup + args.steps):
            m = trainer.train_step()
            if i < args.warmup:
                continue
            table = trainer.collect(trainer.next_tasks()).table
            bare = bare_throughput(trainer, table)
            train_tps.append(m["tokens_per_s/train"])
            gen_tps.append(m["tokens_per_s/generation"])
            share.append(m["time/generation_share"])
            ratios.append(m["tokens_per_s/train"] / bare)
            print(
                f"step {trainer.step}: train {m['tokens_per_s/train']:,.0f} tok/s (bare fwd+bwd {bare:,.0f} tok/s, "
                f"ratio {ratios[-1]:.2f}), generation {m['tokens_per_s/generation']:,.0f} tok/s, "
                f"generating {100 * m['time/generation_share']:.0f}% of a {m['time/step_s']:.2f}s step "
                f"({int(m['n_trained_rows'])} rows)"
            )
        print(
            f"median: train {statistics.median(train_tps):,.0f} tok/s per optimizer step, ratio vs bare "
            f"{statistics.median(ratios):.2f}, generation {statistics.median(gen_tps):,.0f} tok/s, "
            f"generation share {100 * statistics.median(share):.0f}%, "
            f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB"
            + (
                f", peak GPU memory allocated {torch.cuda.max_memory_allocated() / 2**20:,.0f} MiB"
                if args.device.startswith("cuda")
                else ""
            )
        )


if __name__ == "__main__":
    main()
