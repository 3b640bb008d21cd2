"""Where one training step of a real model goes on the CPU, and what sharing the scoring forward saves.

    python -m baselines.bench.cpu_step --config baselines/configs/signal_code_smollm2.yaml --threads 2
    python -m baselines.bench.cpu_step --config baselines/configs/plan_path_smollm2.yaml --json step.json

Builds the trainer of ``--config`` (``key=value`` overrides after it), runs ``--warmup`` steps that
are not measured, then one measured step:

* **rollout**: the wall time of every forward pass of the model, timed by hooks on the model itself
  (the generation code runs unchanged), split into *prefill* (passes over several new positions
  per row: the prompts) and *decode* (one new position per row); the rest of the rollout is the
  environments, the chat templates and the sampler's bookkeeping;
* **update**: its forward passes (the scoring of the step's rows), and the rest (backward passes,
  loss, optimizer);
* **scoring** (the update's work, done twice on the step's own rows, interleaved ``--repeats``
  times): forward + backward of every agent's rows with the sharing of
  :func:`baselines.policies.logprobs.completion_logprobs` (a context several rows share, and a
  prefix every row shares, run once) against every row run in full (``share=False``, the reference
  measured in the same run): median seconds, the ratio, and how far apart their log-probs and
  gradients are (they must agree to float rounding).

The machine's load average is printed before and after: on a shared machine the seconds are only
comparable within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines.advantages import compute_advantages
from baselines.config import load_config
from baselines.generation.team_decoder import TeamDecoder
from baselines.trainer import Trainer


class ForwardClock:
    """Sums the wall time of a model's forward passes by phase and kind (prefill / decode).

    The team decoder of the fast path (:mod:`baselines.generation.team_decoder`) runs the layers without
    the model's forward, so its ``prefill`` and ``step`` are timed too, for as long as the clock runs
    (:meth:`remove` puts them back)."""

    def __init__(self, models: list[torch.nn.Module]) -> None:
        self.phase = "idle"
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._start: list[float] = []
        self._handles = []
        for m in models:
            self._handles.append(m.register_forward_pre_hook(self._pre, with_kwargs=True))
            self._handles.append(m.register_forward_hook(self._post, with_kwargs=True))
        self._originals = {name: getattr(TeamDecoder, name) for name in ("prefill", "step")}
        for name, kind in (("prefill", "prefill"), ("step", "decode")):
            setattr(TeamDecoder, name, self._timed(kind, self._originals[name]))

    def _timed(self, kind: str, method):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds[f"{self.phase}/{kind}"] += time.perf_counter() - start
                self.calls[f"{self.phase}/{kind}"] += 1

        return timed

    def _pre(self, module, args, kwargs) -> None:
        self._start.append(time.perf_counter())

    def _post(self, module, args, kwargs, output) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        kind = "decode" if ids is not None and ids.shape[-1] == 1 else "prefill"
        key = f"{self.phase}/{kind}"
        self.seconds[key] += time.perf_counter() - self._start.pop()
        self.calls[key] += 1

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        for name, method in self._originals.items():
            setattr(TeamDecoder, name, method)


def inner_models(trainer: Trainer) -> list[torch.nn.Module]:
    """The transformers models under the team (below peft), each once."""
    out: dict[int, torch.nn.Module] = {}
    for key in trainer.team.policy_keys():
        model = trainer.team.base_model(key)
        model = model.get_base_model() if hasattr(model, "get_base_model") else model
        out[id(model)] = model
    return list(out.values())


def scoring_pass(trainer: Trainer, table: Any, share: bool) -> tuple[float, dict[str, list[torch.Tensor]], list]:
    """Forward + backward of every agent's rows (the sum of their log-probs); (seconds, log-probs, grads)."""
    params = [p for s in trainer.param_sets for p in s.params]
    temp = trainer.gen_config.scoring_temperature
    start = time.perf_counter()
    logps: dict[str, list[torch.Tensor]] = {}
    total = 0.0
    for agent in trainer.agents:
        rows = [i for i in range(len(table)) if table.agent[i] == agent and table.completion_lengths[i] > 0]
        if not rows:
            continue
        lp, _ = trainer.team.sequence_logprobs(agent, [table.prompt_ids[i] for i in rows],
                                               [table.completion_ids[i] for i in rows], with_entropy=True,
                                               entropy_grad=False, temperature=temp, share=share)
        total = total + sum(x.sum() for x in lp)
        logps[agent] = [x.detach() for x in lp]
    grads = torch.autograd.grad(total, params, allow_unused=True)
    return time.perf_counter() - start, logps, [g for g in grads if g is not None]


def measure(config_path: str, overrides: list[str], warmup: int, repeats: int) -> dict[str, Any]:
    config = load_config(config_path, ["log.progress=false", "log.tensorboard=false", "log.plot=false", *overrides])
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(config, Path(tmp) / "run")
        for _ in range(warmup):
            trainer.train_step()
        clock = ForwardClock(inner_models(trainer))
        try:
            clock.phase = "rollout"
            t0 = time.perf_counter()
            result = trainer.collect(trainer.next_tasks())
            t1 = time.perf_counter()
            table = result.table
            adv = compute_advantages(table, config.scheme, config.advantage)
            clock.phase = "update"
            trainer.update(table, adv)
            t2 = time.perf_counter()
            clock.phase = "scoring"
            shared, full = [], []
            for _ in range(repeats):
                s, lp_s, g_s = scoring_pass(trainer, table, share=True)
                f, lp_f, g_f = scoring_pass(trainer, table, share=False)
                shared.append(s)
                full.append(f)
        finally:
            clock.remove()  # the team decoder's own methods back
    lp_diff = max(float((a - b).abs().max()) for agent in lp_s for a, b in zip(lp_s[agent], lp_f[agent]) if len(a))
    grad_diff = max(float((a - b).norm() / b.norm().clamp(min=1e-12)) for a, b in zip(g_s, g_f))
    rollout_s, update_s = t1 - t0, t2 - t1
    sec = clock.seconds
    lengths = np.asarray(table.completion_lengths)
    return {
        "config": config_path, "overrides": overrides, "rows": len(table),
        "prompt_tokens_mean": float(np.mean([len(p) for p in table.prompt_ids])),
        "completion_tokens_mean": float(lengths.mean()),
        "step_s": rollout_s + update_s, "rollout_s": rollout_s,
        "prefill_s": sec["rollout/prefill"], "decode_s": sec["rollout/decode"],
        "decode_steps": clock.calls["rollout/decode"],
        "rollout_other_s": rollout_s - sec["rollout/prefill"] - sec["rollout/decode"],
        "update_s": update_s, "update_forward_s": sec["update/prefill"] + sec["update/decode"],
        "update_backward_optimizer_s": update_s - sec["update/prefill"] - sec["update/decode"],
        "scoring_shared_s": statistics.median(shared), "scoring_full_s": statistics.median(full),
        "scoring_speedup": statistics.median(full) / statistics.median(shared),
        "max_logprob_diff": lp_diff, "max_rel_grad_diff": grad_diff,
        "load_before": load_before, "load_after": os.getloadavg()[0], "threads": torch.get_num_threads(),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured steps first")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved scoring passes of each kind")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    ap.add_argument("--json", default=None, help="also write the figures here")
    ap.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    fig = measure(args.config, args.overrides, args.warmup, args.repeats)
    print(f"{fig['config']}: {fig['rows']} rows, prompts {fig['prompt_tokens_mean']:.0f} tokens, answers "
          f"{fig['completion_tokens_mean']:.1f} tokens; load {fig['load_before']:.1f} -> {fig['load_after']:.1f}, "
          f"{fig['threads']} threads")
    print(f"step {fig['step_s']:.1f} s = rollout {fig['rollout_s']:.1f} s (prefill {fig['prefill_s']:.1f}, decode "
          f"{fig['decode_s']:.1f} in {fig['decode_steps']} passes, other {fig['rollout_other_s']:.1f}) + update "
          f"{fig['update_s']:.1f} s (forward {fig['update_forward_s']:.1f}, backward + optimizer "
          f"{fig['update_backward_optimizer_s']:.1f})")
    print(f"scoring forward+backward: shared {fig['scoring_shared_s']:.2f} s, every row in full "
          f"{fig['scoring_full_s']:.2f} s: {fig['scoring_speedup']:.2f}x; max |log-prob diff| "
          f"{fig['max_logprob_diff']:.1e}, max relative gradient diff {fig['max_rel_grad_diff']:.1e}")
    if args.json:
        Path(args.json).write_text(json.dumps(fig, indent=2))
    return fig


if __name__ == "__main__":
    main()
