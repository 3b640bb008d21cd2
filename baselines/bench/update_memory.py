"""Benchmark: peak memory and time of one policy update, in micro-batches against one pass.

    python -m baselines.bench.update_memory --config baselines/configs/helper_main_grpo_smollm2.yaml \\
        --completion-tokens 192 --threads 1 --micro 0 4 2 [-- key=value ...]

The rows of the update come from the config's own rollout (``generation.max_new_tokens`` cut to
4 so that it is quick), with every completion then padded to ``--completion-tokens`` tokens of
random ids and every reward drawn at random, so that every group has an advantage: the update
does the work of a real step of that length (the forward and backward passes do not care who
wrote the tokens). Each ``optim.micro_batch_rows`` value runs in a fresh process on the same
rows, from the same start; the figure is the growth of the process's peak resident memory
during ``Trainer.update`` (``VmHWM`` after resetting it), and the ratio is against one pass
(``0``) measured in the same run.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import pickle
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines.advantages import compute_advantages
from baselines.config import load_config
from baselines.trainer import Trainer


def _vm(field: str) -> int:
    """A ``/proc/self/status`` memory figure, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def make_rows(config_path: str, overrides: list[str], completion_tokens: int, seed: int, out: Path) -> None:
    """Roll out the config's first step (4 new tokens), stretch it to ``completion_tokens``, pickle it."""
    cfg = load_config(config_path, [*overrides, "generation.max_new_tokens=4"])
    cfg.log.tensorboard = cfg.log.progress = cfg.log.plot = False
    with tempfile.TemporaryDirectory() as scratch:
        trainer = Trainer(cfg, scratch)
        table = trainer.collect(trainer.next_tasks()).table
    rng = np.random.default_rng(seed)
    vocab = min(len(trainer.team.tokenizer(a)) for a in trainer.team.agents)
    completions = [list(c) + rng.integers(0, vocab, completion_tokens - len(c)).tolist() for c in table.completion_ids]
    logprobs = [list(lp) + [-3.0] * (completion_tokens - len(lp)) for lp in table.old_logprobs]
    table = table.replace(completion_ids=completions, old_logprobs=logprobs,
                          reward=rng.random(len(table)).round(2))
    out.write_bytes(pickle.dumps(table))


def measure(config_path: str, overrides: list[str], rows: Path, micro: int, threads: int, queue: Any) -> None:
    """In a fresh process: one ``Trainer.update`` on ``rows`` with ``optim.micro_batch_rows=micro``."""
    if threads:
        torch.set_num_threads(threads)
    cfg = load_config(config_path, [*overrides, f"optim.micro_batch_rows={micro}"])
    cfg.log.tensorboard = cfg.log.progress = cfg.log.plot = False
    table = pickle.loads(rows.read_bytes())
    with tempfile.TemporaryDirectory() as scratch:
        trainer = Trainer(cfg, scratch)
        adv = compute_advantages(table, cfg.scheme, cfg.advantage)
        Path("/proc/self/clear_refs").write_text("5")  # peak resident memory := current
        base = _vm("VmRSS")
        start = time.perf_counter()
        update = trainer.update(table, adv)
        seconds = time.perf_counter() - start
        queue.put({"micro": micro, "peak_growth": _vm("VmHWM") - base, "seconds": seconds,
                   "tokens": update["train_tokens"], "rows": update["rows"]})


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="baselines/configs/signal_game.yaml")
    ap.add_argument("--completion-tokens", type=int, default=64)
    ap.add_argument("--micro", type=int, nargs="+", default=[0, 4, 2], help="optim.micro_batch_rows values (0 first)")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = ap.parse_args(argv)
    if args.micro[0] != 0:
        ap.error("the first --micro value is the reference and must be 0 (one pass)")
    ctx = mp.get_context("spawn")
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        rows = Path(scratch) / "rows.pkl"
        maker = ctx.Process(target=make_rows, args=(args.config, args.overrides, args.completion_tokens, args.seed, rows))
        maker.start()
        maker.join()
        if maker.exitcode:
            raise SystemExit(f"building the rows failed (exit code {maker.exitcode})")
        for micro in args.micro:
            queue = ctx.Queue()
            proc = ctx.Process(target=measure, args=(args.config, args.overrides, rows, micro, args.threads, queue))
            proc.start()
            proc.join()
            if proc.exitcode:
                raise SystemExit(f"the update with micro_batch_rows={micro} failed (exit code {proc.exitcode})")
            results.append(queue.get())
    ref = results[0]
    print(f"one update of {ref['rows']} rows, {ref['tokens']} tokens ({Path(args.config).name}, "
          f"completions of {args.completion_tokens} tokens)")
    print("| micro_batch_rows | peak memory growth | ratio to one pass | update time | ratio |")
    print("| --- | --- | --- | --- | --- |")
    for r in results:
        print(f"| {r['micro'] or 'one pass'} | {r['peak_growth'] / 2**20:,.0f} MiB | "
              f"{r['peak_growth'] / ref['peak_growth']:.2f}x | {r['seconds']:.1f} s | {r['seconds'] / ref['seconds']:.2f}x |")
    return results


if __name__ == "__main__":
    main()
