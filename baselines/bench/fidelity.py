"""Is the fast decode path the policy the trainer trains? A check with thresholds, that can fail.

    from baselines.bench.fidelity import check
    verdict = check(team, backend, requests, dtype="bfloat16")   # verdict["passed"], verdict["failures"]

The trainer's importance ratios assume the log-probs recorded while sampling are those of the policy
it differentiates (π_old). :func:`check` measures that on a LoRA team whose every adapter is drawn
non-zero and different (:func:`randomize_adapters`; fresh adapters are the base model, which would
hide a wrong adapter, a stale copy or a broken merge), with four parts, each against a threshold
(:data:`THRESHOLDS`, per dtype):

1. **recorded = recomputed**: the sampled tokens' recorded log-probs against a teacher-forced recompute
   through the training model (peft, adapters unmerged): mean |diff| per token. The **control**
   recomputes the same tokens through another agent's adapter; it must be far above the threshold
   (``control_factor`` x), or the check could not tell adapters apart.
2. **an update reaches the sampler**: one small gradient step on every adapter (sized to raise the
   trainer's log-probs of sampled answers by ``update_target`` nats per token, to first order); on those
   same tokens -- the sampler's recorded log-probs before, its teacher-forced pass after
   (:meth:`~baselines.generation.TransformersBackend.sampler_logprobs`) -- the sampler's mean change of
   log-prob per token must equal the trainer's within ``update_rel`` of it. (A mean over tokens: the per-token rounding noise of
   bf16, the same size as the change, averages out; an update that does not reach the sampler -- a
   stale copy, a delta rounded away in bf16 weights -- does not.) Part 1 is then repeated after the step.
3. **graphs on = graphs off** (CUDA): the greedy answers of the captured graphs and of the same step run
   eagerly (same kernels) are identical, their log-probs within ``graphs_logprob``.

The adapters' original weights are restored at the end. ``tests/baselines/test_fidelity.py`` breaks the
path on purpose (a stale adapter copy, a wrong row -> adapter routing) and sees this check fail.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import Any

import torch

from baselines.generation import GenerationConfig, GenOutput, GenRequest, TransformersBackend
from baselines.policies import Team


@dataclass(frozen=True)
class Thresholds:
    """Bounds of :func:`check` (see the module docstring)."""

    logprob_mean: float  #: recorded vs recomputed, mean |diff| per token
    control_factor: float = 5.0  #: the wrong-adapter control must exceed this many times ``logprob_mean``
    update_target: float = 0.01  #: the test step's first-order change of the trainer's log-probs, nats/token
    update_rel: float = 0.25  #: |mean Δ_sampler - mean Δ_trainer| / |mean Δ_trainer| at most
    graphs_logprob: float = 1e-3  #: graphs vs eager: max |diff| of the greedy log-probs


#: float32 decodes the same arithmetic as the recompute up to summation order; bfloat16 rounds every
#: activation to 8 bits of mantissa, and a decode step rounds differently from a full-sequence forward:
#: on SmolLM2-135M (CPU, 4 helper/main rows x 24 tokens, random adapters) transformers' own decode
#: paths -- ``generate`` and the model's forward step by step -- differ from the recompute by 0.062
#: nats/token on average, the team decoder by 0.059; the bound leaves room above both
#: (bf16's per-token noise is as large as a small update's change, so its test step is larger: the mean
#: over a batch's tokens then stands clear of the noise; on SmolLM2 the measured noise of that mean is ~0.005)
THRESHOLDS = {"float32": Thresholds(logprob_mean=1e-4),
              "bfloat16": Thresholds(logprob_mean=0.1, update_target=0.1),
              "float16": Thresholds(logprob_mean=0.03, update_target=0.03)}  # fmt: skip


def randomize_adapters(team: Team, seed: int = 0, std_a: float = 0.05, std_b: float = 0.1) -> None:
    """Draw every agent's LoRA A and B from N(0, std) (a different adapter per agent, deterministic)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for agent in team.agents:
            for name, p in team.trainable_parameters(agent).items():
                std = std_b if "lora_B" in name else std_a
                p.copy_(torch.randn(p.shape, generator=gen) * std)


def _recomputed(team: Team, agent: str, outs: list[GenOutput]) -> list[torch.Tensor]:
    logps, _ = team.sequence_logprobs(agent, [o.prompt_ids for o in outs], [o.completion_ids for o in outs],
                                      batch_size=16)  # fmt: skip
    return [lp.detach().float().cpu() for lp in logps]


def _by_agent(outs: list[GenOutput]) -> dict[str, list[GenOutput]]:
    groups: dict[str, list[GenOutput]] = {}
    for o in outs:
        if o.completion_ids:
            groups.setdefault(o.agent, []).append(o)
    return groups


def logprob_diffs(team: Team, outs: list[GenOutput], as_agent: dict[str, str] | None = None) -> list[float]:
    """|recorded - recomputed| per token, each agent's tokens recomputed as ``as_agent[agent]`` (default: itself)."""
    diffs: list[float] = []
    with torch.no_grad():
        for agent, mine in _by_agent(outs).items():
            for o, lp in zip(mine, _recomputed(team, (as_agent or {}).get(agent, agent), mine)):
                diffs += (lp - torch.tensor(o.logprobs)).abs().tolist()
    return diffs


def _small_step(team: Team, outs: list[GenOutput], target: float) -> None:
    """One gradient step on every agent's adapter raising the log-probs of its rows of ``outs`` by about
    ``target`` nats per token (to first order)."""
    for agent, mine in _by_agent(outs).items():
        params = list(team.trainable_parameters(agent).values())
        logps, _ = team.sequence_logprobs(agent, [o.prompt_ids for o in mine], [o.completion_ids for o in mine])
        grads = torch.autograd.grad(sum(lp.sum() for lp in logps), params)
        tokens = sum(len(o.completion_ids) for o in mine)
        rate = target * tokens / max(sum(float((g.float() ** 2).sum()) for g in grads), 1e-30)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p.add_(g, alpha=rate)


def _update_followed(team: Team, backend: TransformersBackend, requests: list[GenRequest],
                     sampled: GenerationConfig, target: float) -> tuple[list[float], list[float]]:  # fmt: skip
    """(Δ trainer, Δ sampler) per token over a small step, on the same sampled tokens: the trainer's recompute
    before and after; the sampler's recorded log-probs before, its teacher-forced pass after."""
    first = [o for o in backend.generate(requests, sampled) if o.completion_ids]
    with torch.no_grad():
        before = {a: _recomputed(team, a, mine) for a, mine in _by_agent(first).items()}
    _small_step(team, first, target)
    forced = backend.sampler_logprobs(first)
    position = {id(o): i for i, o in enumerate(first)}
    d_trainer: list[float] = []
    d_sampler: list[float] = []
    with torch.no_grad():
        for agent, mine in _by_agent(first).items():
            for o, was, now in zip(mine, before[agent], _recomputed(team, agent, mine)):
                d_trainer += (now - was).tolist()
                d_sampler += (torch.tensor(forced[position[id(o)]]) - torch.tensor(o.logprobs)).tolist()
    return d_trainer, d_sampler


def check(team: Team, backend: TransformersBackend, requests: list[GenRequest], dtype: str = "float32",
          max_new_tokens: int | None = None, seed: int = 0, limits: Thresholds | None = None) -> dict[str, Any]:  # fmt: skip
    """Run the check (see the module docstring) with ``backend`` (the fast path) on ``requests``; ``limits``
    default to ``THRESHOLDS[dtype]``."""
    limits = limits or THRESHOLDS[dtype]
    n = max_new_tokens or backend.config.max_new_tokens
    sampled = GenerationConfig(max_new_tokens=n, temperature=1.0, seed=seed)
    greedy = GenerationConfig(max_new_tokens=n, temperature=0)
    saved = {k: p.detach().clone() for k, p in team.trainable_parameters().items()}
    others = {a: team.agents[(i + 1) % len(team.agents)] for i, a in enumerate(team.agents)}
    result: dict[str, Any] = {"dtype": dtype, "thresholds": dataclasses.asdict(limits)}
    failures: list[str] = []
    try:
        diffs = logprob_diffs(team, backend.generate(requests, sampled))
        control = logprob_diffs(team, backend.generate(requests, sampled), as_agent=others)
        result |= {"logprob_abs_diff_mean": statistics.fmean(diffs), "logprob_abs_diff_max": max(diffs),
                   "control_wrong_adapter_diff_mean": statistics.fmean(control)}  # fmt: skip
        if result["logprob_abs_diff_mean"] > limits.logprob_mean:
            failures.append("recorded log-probs differ from the recompute")
        if len(team.agents) > 1 and result["control_wrong_adapter_diff_mean"] < limits.control_factor * limits.logprob_mean:
            failures.append("the wrong-adapter control is within reach of the threshold: adapters indistinguishable")
        if backend.graphs is not None:
            eager = TransformersBackend(team, backend.config, decode="fast", cuda_graphs=False)
            a, b = backend.generate(requests, greedy), eager.generate(requests, greedy)
            same = [x.completion_ids == y.completion_ids for x, y in zip(a, b)]
            gaps = [abs(p - q) for x, y in zip(a, b) if x.completion_ids == y.completion_ids
                    for p, q in zip(x.logprobs, y.logprobs)]  # fmt: skip
            result |= {"graphs_vs_eager_rows_identical": sum(same) / len(same),
                       "graphs_vs_eager_logprob_max_diff": max(gaps, default=0.0)}  # fmt: skip
            if not all(same) or result["graphs_vs_eager_logprob_max_diff"] > limits.graphs_logprob:
                failures.append("graph replays differ from the same step run eagerly")
        d_trainer, d_sampler = _update_followed(team, backend, requests, sampled, limits.update_target)
        moved = statistics.fmean(d_trainer) if d_trainer else 0.0
        followed = statistics.fmean(d_sampler) if d_sampler else 0.0
        after = logprob_diffs(team, backend.generate(requests, sampled))
        result |= {"update_trainer_change_mean": moved, "update_sampler_change_mean": followed,
                   "update_token_gap_abs_mean": statistics.fmean(abs(s - t) for s, t in zip(d_sampler, d_trainer))
                   if d_trainer else float("nan"), "update_tokens_compared": len(d_trainer),
                   "after_update_logprob_abs_diff_mean": statistics.fmean(after)}  # fmt: skip
        if not d_trainer or moved <= 0 or abs(followed - moved) > limits.update_rel * moved:
            failures.append("the sampler's log-probs do not follow an update as the trainer's do")
        if result["after_update_logprob_abs_diff_mean"] > limits.logprob_mean:
            failures.append("after an update, recorded log-probs differ from the recompute")
    finally:
        with torch.no_grad():
            for k, p in team.trainable_parameters().items():
                p.copy_(saved[k])
    core = {"recorded log-probs differ from the recompute", "after an update, recorded log-probs differ from the recompute",
            "graph replays differ from the same step run eagerly"}  # fmt: skip
    #: the recorded log-probs are the sampled policy's own: what a training run needs of its sampler
    result |= {"passed": not failures, "failures": failures, "sampling_faithful": not core & set(failures)}
    return result
