"""Rollout throughput: batched generation vs one sequence at a time, on real environment prompts.

    python -m baselines.bench.rollout                       # tiny model, CPU
    python -m baselines.bench.rollout --device cuda --shape qwen2.5-0.5b --dtype bf16
    python -m baselines.bench.rollout --model smollm2-135m-instruct --env code/helper_main_v0 --requests 8

Prompts are the chat observations agents actually get in ``toy/signal_game_v0`` (speaker and
listener turns of seeded episodes; ``--env`` adds other registered tasks). The same team and
sampling settings generate completions twice: once with :class:`TransformersBackend`
(one left-padded ``generate`` per policy, here one call for all requests) and once in a loop
of one request per ``generate`` call, which is how a per-prompt trainer (e.g. the MAGRPO
authors' code) samples. Both are timed after a warm-up; the figure is generated tokens per
second, and the last line is the ratio batched / one-at-a-time (goal >= 10x).

``--model`` (a preset such as ``smollm2-135m-instruct``, a local folder or hub id) runs a real
pretrained model instead of a built one, and adds a third reference: plain ``model.generate`` on
the same left-padded batch with the same sampling settings (the trainer's backend adds
log-probs and bookkeeping on top; goal >= 0.9x of plain).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from baselines.generation import GenerationConfig, GenRequest, TransformersBackend
from baselines.policies import Team, TeamConfig, build_tiny_model
from baselines.policies.corpus import signal_game_texts
from baselines.policies.tiny import build_shape_model, qwen25_05b_shape_config
from llm_marl_envs import registry


@dataclass
class BenchConfig:
    n_requests: int = 64
    max_new_tokens: int = 32
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
    model: str | None = None


def env_requests(env_names: tuple[str, ...], n: int, seed: int) -> tuple[list[GenRequest], list[str]]:
    """``n`` generation requests from real observations of the named tasks (random play between turns)."""
    requests: list[GenRequest] = []
    agents: list[str] = []
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
    for r in requests:
        agents.append(r.agent)
    return requests, list(dict.fromkeys(agents))


def build_model(cfg: BenchConfig, directory: Path, texts: list[str]) -> str:
    if cfg.shape == "tiny":
        return str(build_tiny_model(directory, texts=texts, seed=cfg.seed))
    if cfg.shape == "qwen2.5-0.5b":
        return str(build_shape_model(directory, qwen25_05b_shape_config(), texts=texts, seed=cfg.seed))
    raise ValueError(f"unknown shape {cfg.shape!r}; expected 'tiny' or 'qwen2.5-0.5b'")


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(backend: TransformersBackend, batches: list[list[GenRequest]], device: str) -> tuple[int, float]:
    """Generated tokens and seconds for generating ``batches`` one after the other."""
    _sync(device)
    start = time.perf_counter()
    tokens = 0
    for batch in batches:
        tokens += sum(len(o.completion_ids) for o in backend.generate(batch))
    _sync(device)
    return tokens, time.perf_counter() - start


def run(cfg: BenchConfig) -> float:
    if cfg.threads and cfg.device == "cpu":
        torch.set_num_threads(cfg.threads)  # shared CPUs: oversubscribed threads make timings noise
    requests, agents = env_requests(cfg.envs, cfg.n_requests, cfg.seed)
    texts = signal_game_texts() + [m["content"] for r in requests for m in r.messages]
    with tempfile.TemporaryDirectory() as tmp:
        path = cfg.model or build_model(cfg, Path(tmp) / "model", texts)
        team = Team.from_config(
            TeamConfig(mode=cfg.mode, model=path, dtype=cfg.dtype, device=cfg.device), agents
        )
    gen = GenerationConfig(max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, seed=cfg.seed)
    backend = TransformersBackend(team, gen, max_padding=cfg.max_padding)
    prompt_lens = [len(backend.prompt_ids(r)) for r in requests]
    n_params = sum(p.numel() for p in team.model(agents[0]).parameters())
    print(
        f"model: {cfg.model or cfg.shape} ({n_params / 1e6:.1f}M params, {cfg.dtype}, {cfg.device}), team mode {cfg.mode}"
    )
    print(
        f"prompts: {len(requests)} from {', '.join(cfg.envs)}; {len(agents)} agents; "
        f"prompt tokens mean {np.mean(prompt_lens):.0f} max {max(prompt_lens)}; max_new_tokens {cfg.max_new_tokens}"
    )
    timed(backend, [requests[:4]], cfg.device)  # warm-up
    timed(backend, [requests[:1]], cfg.device)
    b_tokens, b_time = timed(backend, [requests], cfg.device)
    every = -(-len(requests) // cfg.sequential_requests) if cfg.sequential_requests else 1
    seq = requests[::every]  # evenly spread, so prompt lengths are representative
    s_tokens, s_time = timed(backend, [[r] for r in seq], cfg.device)
    batched, sequential = b_tokens / b_time, s_tokens / s_time
    print(f"batched (one generate per policy): {b_tokens} tokens in {b_time:.2f} s = {batched:.0f} tokens/s")
    print(
        f"one sequence at a time ({len(seq)} calls): {s_tokens} tokens in {s_time:.2f} s = {sequential:.0f} tokens/s"
    )
    ratio = batched / sequential
    if cfg.model:
        p_tokens, p_time = plain_generate(team, backend, requests, gen, cfg.device)
        plain = p_tokens / p_time
        print(f"plain model.generate, same batch and seed: {p_tokens} tokens in {p_time:.2f} s = {plain:.0f} tokens/s")
        print(f"trainer backend / plain generate: {batched / plain:.2f}x")
    print(f"speedup batched / one-at-a-time: {ratio:.1f}x")
    return ratio


def plain_generate(
    team: Team, backend: TransformersBackend, requests: list[GenRequest], gen: GenerationConfig, device: str
) -> tuple[int, float]:
    """The reference: one bare ``model.generate`` over the left-padded batch with the backend's sampling
    settings (no log-probs), tokens counted up to and including EOS, so the figure is per generated token."""
    agent = requests[0].agent
    tok = team.tokenizer(agent)
    prompts = [backend.prompt_ids(r) for r in requests]
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p)
        mask[i, width - len(p) :] = 1
    eos = team.eos_token_ids(agent)
    model = team.model(agent)
    torch.manual_seed(gen.seed or 0)
    _sync(device)
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), do_sample=True,
                             temperature=gen.temperature, top_k=0, top_p=1.0, max_new_tokens=gen.max_new_tokens,
                             pad_token_id=tok.pad_token_id, eos_token_id=eos)
    _sync(device)
    seconds = time.perf_counter() - start
    tokens = 0
    for row in out[:, width:].tolist():
        stop = next((j for j, t in enumerate(row) if t in eos), None)
        tokens += len(row) if stop is None else stop + 1
    return tokens, seconds


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--requests", type=int, default=64, help="number of prompts (batch size of the batched run)"
    )
    p.add_argument("--max-new-tokens", type=int, default=32)
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
        help="time the one-at-a-time loop on N evenly spread prompts only (0: all; tokens/s is per token)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-padding", type=float, default=None, help="bucket prompts by length (e.g. 1.5)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch default)")
    p.add_argument("--model", help="real model: preset (smollm2-135m-instruct), local folder or hub id")
    a = p.parse_args(argv)
    run(BenchConfig(
        n_requests=a.requests, max_new_tokens=a.max_new_tokens, temperature=a.temperature, device=a.device,
        dtype=a.dtype, shape=a.shape, mode=a.mode, envs=tuple(a.env or ("toy/signal_game_v0",)),
        sequential_requests=a.sequential_requests, seed=a.seed, threads=a.threads, max_padding=a.max_padding,
        model=a.model,
    ))  # fmt: skip


if __name__ == "__main__":
    main()
