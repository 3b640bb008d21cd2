"""Rollout throughput: the trainer's batched generation vs plain ``generate`` and vs one sequence at a time.

    python -m baselines.bench.rollout                       # tiny model, CPU
    python -m baselines.bench.rollout --device cuda --shape qwen2.5-0.5b --dtype bf16
    python -m baselines.bench.rollout --model smollm2-135m-instruct --env code/helper_main_v0 \\
        --tasks 2 --group 4 --max-new-tokens 128
    python -m baselines.bench.rollout --model <folder with SmolLM2's config + tokenizer> --random-weights \\
        --device cuda --dtype bf16 --env code/helper_main_v0

The workload is what the trainer samples in a step: ``--tasks`` T distinct prompts, each asked
``--group`` G times in a row (a GRPO group), ``--max-new-tokens`` per completion. The prompts are
the chat observations agents actually get in ``toy/signal_game_v0`` (turns of seeded episodes
with random play; ``--env`` adds or replaces tasks, cycled episode by episode). The same team and
sampling settings generate, after a short warm-up:

1. with :class:`TransformersBackend`, as the trainer calls it (one left-padded ``generate`` per
   policy, prefix sharing of the G copies, bucketed prefill, segmented decoding, log-probs);
2. with ONE plain ``model.generate`` over the same left-padded batch, seeded like the backend's
   call (no log-probs, no sharing): both draw the same tokens until the backend drops a stopped
   row between decoding segments, the same distribution after -- the figure the backend must
   keep up with (goal >= 0.9x);
3. one request at a time, each alone through plain ``model.generate`` with the same settings
   (how a per-prompt trainer such as the MAGRPO authors' code samples; ``--sequential-requests``
   N evenly spread requests; goal >= 3x on a CPU with a real model, >= 10x with the tiny one).

Figures are generated tokens per second (up to and including EOS). ``--rounds R`` repeats the
three measurements R times, interleaved, so a load change on a shared machine hits all three;
the ratios are printed per round and as medians; ``--warmup-rounds`` runs untimed full-length
rounds first (a GPU's first calls of a shape are slow). ``--decode-segment`` sets the backend's
segment length (0: one ``generate`` call per batch). ``--model`` (a preset such as
``smollm2-135m-instruct``, a local folder or hub id) runs a real pretrained model instead of a
built one; with ``--random-weights`` it keeps that model's config, tokenizer and chat template
and draws new weights (for a GPU where the real weights cannot travel: same speed per token, but
every row runs to ``--max-new-tokens``). ``--no-share-prompts`` turns the backend's prefix
sharing off (to measure what it buys). ``--decode`` picks the backend's decoding: ``generate``
(``model.generate``), ``fast`` (the lean loop: :mod:`baselines.generation.fast_decode`) or ``both``
(the two timed back to back in every round, each seeded alike; the ratio fast / generate is the
before/after of the fast path in one run); ``--static-cache`` / ``--no-cuda-graphs`` override the
fast path's CUDA defaults.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from baselines.generation import GenerationConfig, GenRequest, TransformersBackend
from baselines.policies import Team, TeamConfig, build_random_copy, build_tiny_model
from baselines.policies.corpus import signal_game_texts
from baselines.policies.tiny import build_shape_model, qwen25_05b_shape_config
from llm_marl_envs import registry


@dataclass
class BenchConfig:
    tasks: int = 8
    group: int = 8
    max_new_tokens: int = 128
    temperature: float = 1.0
    device: str = "cpu"
    dtype: str = "float32"
    shape: str = "tiny"
    mode: str = "shared"
    envs: tuple[str, ...] = ("toy/signal_game_v0",)
    sequential_requests: int | None = 16
    seed: int = 0
    threads: int | None = 1
    max_padding: float | None = None
    share_prompts: bool = True
    rounds: int = 1
    model: str | None = None
    #: keep ``model``'s config and tokenizer, draw random weights (speed only; see build_random_copy)
    random_weights: bool = False
    #: the backend's decode_segment (None: one generate call up to max_new_tokens)
    decode_segment: int | None = 32
    #: untimed rounds of the backend and plain generate at full length before the timed ones
    warmup_rounds: int = 0
    #: the backend's decoding: "generate", "fast" or "both" (both timed, ratio fast / generate)
    decode: str = "generate"
    #: fast path: the team decoder and CUDA graphs (None: the backend's defaults)
    team_decoder: bool | None = None
    cuda_graphs: bool | None = None


@dataclass
class Figures:
    """Generated tokens and seconds of one engine in one round."""

    tokens: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.tokens / max(self.seconds, 1e-9)


def env_requests(env_names: tuple[str, ...], n: int, seed: int) -> tuple[list[GenRequest], list[str]]:
    """``n`` generation requests from real observations of the named tasks (random play between turns)."""
    requests: list[GenRequest] = []
    rng = np.random.default_rng(seed)
    episode = 0
    while len(requests) < n:
        name = env_names[episode % len(env_names)]
        spec = registry.spec(name)
        module = spec.load()
        env = spec.make(**dict(spec.test_kwargs))
        env.reset(seed=seed + episode)
        for agent in env.agent_iter():
            _, _, term, trunc, _ = env.last()
            if term or trunc:
                env.step(None)
                continue
            if len(requests) < n:
                requests.append(GenRequest(f"{name}:{agent}", env.unwrapped.observe_chat(agent)))
            env.step(module.random_policy(env, agent, rng))
        env.close()
        episode += 1
    return requests, list(dict.fromkeys(r.agent for r in requests))


def grouped(requests: list[GenRequest], group: int) -> list[GenRequest]:
    """Each request ``group`` times in a row: the trainer's batch of T tasks x G samples."""
    return [r for r in requests for _ in range(group)]


def build_model(cfg: BenchConfig, directory: Path, texts: list[str]) -> str:
    if cfg.model is not None:
        if not cfg.random_weights:
            return cfg.model
        return str(build_random_copy(cfg.model, directory, seed=cfg.seed))
    if cfg.random_weights:
        raise ValueError("--random-weights needs --model (whose config and tokenizer to keep)")
    if cfg.shape == "tiny":
        return str(build_tiny_model(directory, texts=texts, seed=cfg.seed))
    if cfg.shape == "qwen2.5-0.5b":
        return str(build_shape_model(directory, qwen25_05b_shape_config(), texts=texts, seed=cfg.seed))
    raise ValueError(f"unknown shape {cfg.shape!r}; expected 'tiny' or 'qwen2.5-0.5b'")


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed_backend(backend: TransformersBackend, requests: list[GenRequest], device: str) -> Figures:
    """The trainer's way: one ``backend.generate`` call for the whole batch."""
    _sync(device)
    start = time.perf_counter()
    outputs = backend.generate(requests)
    _sync(device)
    return Figures(sum(len(o.completion_ids) for o in outputs), time.perf_counter() - start)


def plain_generate(
    team: Team, prompts: list[list[int]], agent: str, gen: GenerationConfig, seed: int, device: str
) -> Figures:
    """One bare ``model.generate`` over the left-padded ``prompts`` with the backend's sampling settings
    (no log-probs, no prefix sharing), seeded with ``seed``; tokens counted up to and including EOS."""
    tok = team.tokenizer(agent)
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p)
        mask[i, width - len(p) :] = 1
    eos = team.eos_token_ids(agent)
    sampling = (
        {"do_sample": False}
        if gen.greedy
        else {"do_sample": True, "temperature": gen.temperature, "top_k": gen.top_k, "top_p": gen.top_p}
    )
    with torch.no_grad(), torch.random.fork_rng(devices=[]), team.generating(agent) as model:
        torch.manual_seed(seed)
        _sync(device)
        start = time.perf_counter()
        out = model.generate(
            input_ids=ids.to(device), attention_mask=mask.to(device), max_new_tokens=gen.max_new_tokens,
            pad_token_id=tok.pad_token_id, eos_token_id=eos, **sampling,
        )  # fmt: skip
        _sync(device)
        seconds = time.perf_counter() - start
    tokens = 0
    for row in out[:, width:].tolist():
        stop = next((j for j, t in enumerate(row) if t in eos), None)
        tokens += len(row) if stop is None else stop + 1
    return Figures(tokens, seconds)


def one_at_a_time(
    team: Team, prompts: list[list[int]], agents: list[str], gen: GenerationConfig, seed: int, device: str
) -> Figures:
    """Each request alone through plain ``model.generate`` (no batching, no padding, no sharing)."""
    total = Figures(0, 0.0)
    for i, (p, a) in enumerate(zip(prompts, agents)):
        f = plain_generate(team, [p], a, gen, seed + i, device)
        total = Figures(total.tokens + f.tokens, total.seconds + f.seconds)
    return total


def run(cfg: BenchConfig) -> dict[str, float]:
    """Run the benchmark; returns the median ratios ``vs_plain`` and ``vs_sequential`` (and with
    ``decode="both"`` ``fast_vs_generate`` and both tokens/s)."""
    if cfg.threads and cfg.device == "cpu":
        torch.set_num_threads(cfg.threads)  # shared CPUs: oversubscribed threads make timings noise
    distinct, agents = env_requests(cfg.envs, cfg.tasks, cfg.seed)
    requests = grouped(distinct, cfg.group)
    texts = signal_game_texts() + [m["content"] for r in distinct for m in r.messages]
    with tempfile.TemporaryDirectory() as tmp:
        path = build_model(cfg, Path(tmp) / "model", texts)
        team = Team.from_config(
            TeamConfig(mode=cfg.mode, model=path, dtype=cfg.dtype, device=cfg.device), agents
        )
    gen = GenerationConfig(max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, seed=cfg.seed)
    if cfg.decode not in ("generate", "fast", "both"):
        raise ValueError(f"decode must be 'generate', 'fast' or 'both', got {cfg.decode!r}")

    def make(decode: str) -> TransformersBackend:
        return TransformersBackend(team, gen, max_padding=cfg.max_padding, share_prompts=cfg.share_prompts,
                                   decode_segment=cfg.decode_segment, decode=decode,
                                   team_decoder=cfg.team_decoder, cuda_graphs=cfg.cuda_graphs)  # fmt: skip

    backend = make("fast" if cfg.decode == "fast" else "generate")
    fast = make("fast") if cfg.decode == "both" else None
    prompts = [backend.prompt_ids(r) for r in requests]
    lens = [len(backend.prompt_ids(r)) for r in distinct]
    n_params = sum(p.numel() for p in team.model(agents[0]).parameters())
    print(
        f"model: {cfg.model or cfg.shape}{' (random weights)' if cfg.random_weights else ''} "
        f"({n_params / 1e6:.1f}M params, {cfg.dtype}, {cfg.device}), "
        f"team mode {cfg.mode}, {torch.get_num_threads()} torch thread(s)"
    )
    print(
        f"workload: {cfg.tasks} tasks x {cfg.group} samples = {len(requests)} requests from {', '.join(cfg.envs)}; "
        f"{len(agents)} agents; max_new_tokens {cfg.max_new_tokens}, temperature {cfg.temperature}"
    )
    print(
        f"prompt tokens (distinct prompts): mean {np.mean(lens):.0f}, min {min(lens)}, max {max(lens)}; "
        f"padded batch {len(requests)} x {max(lens)} = {sum(len(p) for p in prompts) / (len(prompts) * max(lens)):.0%} "
        f"real tokens; prefix sharing {'on' if cfg.share_prompts else 'off'}; "
        f"decode segments of {cfg.decode_segment or 'all'} tokens"
    )
    # warm-up on the whole batch (a few tokens): the first large call also grows the allocator's pools
    backend.generate(requests, GenerationConfig(max_new_tokens=2, seed=cfg.seed))
    if fast is not None:
        fast.generate(requests, GenerationConfig(max_new_tokens=2, seed=cfg.seed))

    def backend_then_plain() -> tuple[Figures, Figures]:
        call = backend._calls  # plain generate draws with the seed of the backend's call: the same tokens
        b = timed_backend(backend, requests, cfg.device)
        if fast is not None:
            fast_figures.append(timed_backend(fast, requests, cfg.device))
        return b, plain_generate(team, prompts, requests[0].agent, gen, cfg.seed + call, cfg.device)

    fast_figures: list[Figures] = []
    backend_rates: list[float] = []
    for _ in range(cfg.warmup_rounds):  # a GPU's first full-length calls pick kernels and grow the pools
        backend_then_plain()
    every = -(-len(requests) // cfg.sequential_requests) if cfg.sequential_requests else 1
    seq = list(range(0, len(requests), every))  # evenly spread, so prompt lengths are representative
    vs_plain, vs_seq, vs_generate = [], [], []
    for rnd in range(cfg.rounds):
        b, p = backend_then_plain()
        backend_rates.append(b.rate)
        s = one_at_a_time(team, [prompts[i] for i in seq], [requests[i].agent for i in seq], gen,
                          cfg.seed + 1000 * (rnd + 1), cfg.device)  # fmt: skip
        vs_plain.append(b.rate / p.rate)
        vs_seq.append(b.rate / s.rate)
        print(f"round {rnd + 1}:")
        print(
            f"  trainer backend (decode={backend.decode}): {b.tokens} tokens in {b.seconds:.2f} s = {b.rate:,.1f} tokens/s"
        )
        if fast is not None:
            f = fast_figures[-1]
            vs_generate.append(f.rate / b.rate)
            print(f"  trainer backend (decode=fast): {f.tokens} tokens in {f.seconds:.2f} s = {f.rate:,.1f} tokens/s"
                  f" = {vs_generate[-1]:.2f}x decode=generate")  # fmt: skip
        print(
            f"  plain model.generate, same batch:    {p.tokens} tokens in {p.seconds:.2f} s = {p.rate:,.1f} tokens/s"
        )
        print(
            f"  one request at a time ({len(seq)} calls):  {s.tokens} tokens in {s.seconds:.2f} s = {s.rate:,.1f} tokens/s"
        )
        print(f"  backend / plain {vs_plain[-1]:.2f}x; backend / one-at-a-time {vs_seq[-1]:.2f}x")
    result = {"vs_plain": statistics.median(vs_plain), "vs_sequential": statistics.median(vs_seq)}
    if vs_generate:
        result["fast_vs_generate"] = statistics.median(vs_generate)
        result["fast_tokens_per_s"] = statistics.median(f.rate for f in fast_figures[-cfg.rounds :])
        result["generate_tokens_per_s"] = rates[len(rates) // 2] if (rates := sorted(backend_rates)) else 0.0
        print(f"fast / generate decoding: {result['fast_vs_generate']:.2f}x (median of {cfg.rounds} round(s))")
    print(f"trainer backend / plain generate: {result['vs_plain']:.2f}x (median of {cfg.rounds} round(s))")
    print(
        f"speedup batched / one-at-a-time: {result['vs_sequential']:.2f}x (median of {cfg.rounds} round(s))"
    )
    return result


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=8, help="distinct prompts (T)")
    p.add_argument("--group", type=int, default=8, help="samples per prompt (G); the batch is T x G")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "fp16"])
    p.add_argument("--shape", default="tiny", choices=["tiny", "qwen2.5-0.5b"])
    p.add_argument("--mode", default="shared", choices=["shared", "lora"])
    p.add_argument("--env", action="append", help="registered task to draw prompts from (repeatable)")
    p.add_argument(
        "--sequential-requests",
        type=int,
        default=16,
        help="time the one-at-a-time loop on N evenly spread requests only (0: all; tokens/s is per token)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-padding", type=float, default=None, help="bucket prompts by length (e.g. 1.5)")
    p.add_argument("--no-share-prompts", action="store_true", help="turn the backend's prefix sharing off")
    p.add_argument("--rounds", type=int, default=1, help="repeat the three measurements, interleaved")
    p.add_argument("--warmup-rounds", type=int, default=0, help="untimed full-length rounds first (GPU)")
    p.add_argument("--decode-segment", type=int, default=32, help="the backend's decode_segment (0: one call)")
    p.add_argument("--decode", default="generate", choices=["generate", "fast", "both"],
                   help="the backend's decoding; both: generate and fast timed back to back each round")
    p.add_argument("--no-team-decoder", action="store_true", help="fast path: the model's own forward (peft adapters)")
    p.add_argument("--no-cuda-graphs", action="store_true", help="fast path: no CUDA graph capture on CUDA")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch default)")
    p.add_argument("--model", help="real model: preset (smollm2-135m-instruct), local folder or hub id")
    p.add_argument(
        "--random-weights",
        action="store_true",
        help="keep --model's config and tokenizer (a folder without weights will do), draw random weights",
    )
    a = p.parse_args(argv)
    run(BenchConfig(
        tasks=a.tasks, group=a.group, max_new_tokens=a.max_new_tokens, temperature=a.temperature,
        device=a.device, dtype=a.dtype, shape=a.shape, mode=a.mode, envs=tuple(a.env or ("toy/signal_game_v0",)),
        sequential_requests=a.sequential_requests, seed=a.seed, threads=a.threads, max_padding=a.max_padding,
        share_prompts=not a.no_share_prompts, rounds=a.rounds, model=a.model,
        random_weights=a.random_weights, decode_segment=a.decode_segment or None, warmup_rounds=a.warmup_rounds,
        decode=a.decode, team_decoder=False if a.no_team_decoder else None, cuda_graphs=False if a.no_cuda_graphs else None,
    ))  # fmt: skip


if __name__ == "__main__":
    main()
