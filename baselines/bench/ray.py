"""Benchmark: sandbox jobs/s through Ray actors vs the local pool, and env steps/s of N Ray env workers.

Run: ``python -m baselines.bench.ray [--workers W] [--rounds R] [--env-workers 1 2] [--episodes E]``
(needs ``.[ray]`` and, for the jobs, ``.[code]``: the 164 HumanEval canonical solutions, as in
``llm_marl_envs.bench.sandbox``).

A private local Ray cluster on 127.0.0.1 is started and stopped by the run.

1. Sandbox: the same 164 jobs through ``Sandbox(workers=W).run_batch`` (local) and through
   ``RaySandbox(n_actors=1)`` whose one actor owns a ``Sandbox(workers=W)`` (same pool, plus
   Ray's serialization and scheduling). ``--rounds`` rounds of local, Ray, local; the figure is
   the median jobs/s and the ratio the median per-round ratio Ray / local (the mean of the two
   local runs of the round). Goal: ratio >= 0.8 (overhead <= 20 %).
2. Environments: ``--episodes`` episodes of the task's scripted random policy per worker, on N
   Ray env workers at once (each an actor with its own env), against the same loop run in this
   process, in ``--rounds`` rounds of local, Ray, local: total AEC steps/s (medians) and the
   median per-round ratio to the local loop (N workers can reach N x only with N idle cores).
"""

from __future__ import annotations

import argparse
import statistics
import time

import llm_marl_envs
from baselines.ray_workers import RayEnvWorkers, RaySandbox, local_cluster, play_random
from llm_marl_envs.bench.sandbox import load_problems, sandbox_jobs
from llm_marl_envs.sandbox import Job, Sandbox, SandboxConfig


def jobs_per_second(pool: Sandbox | RaySandbox, jobs: list[Job]) -> tuple[float, int]:
    start = time.perf_counter()
    results = pool.run_batch(jobs)
    seconds = time.perf_counter() - start
    return len(jobs) / seconds, sum(r.passed == r.total for r in results)


def bench_sandbox(workers: int | None, rounds: int) -> float:
    jobs = sandbox_jobs(load_problems())
    config = SandboxConfig(workers=workers)
    with Sandbox(config) as local, RaySandbox(n_actors=1, config=config, num_cpus=0) as remote:
        jobs_per_second(local, jobs), jobs_per_second(remote, jobs)  # warm-up
        local_rates, ray_rates, ratios = [], [], []
        for _ in range(rounds):
            a, ok_a = jobs_per_second(local, jobs)
            r, ok_r = jobs_per_second(remote, jobs)
            b, ok_b = jobs_per_second(local, jobs)
            if not ok_a == ok_r == ok_b == len(jobs):
                raise SystemExit(f"not every job passed: local {ok_a}/{ok_b}, ray {ok_r} of {len(jobs)}")
            local_rates += [a, b]
            ray_rates.append(r)
            ratios.append(r / ((a + b) / 2))
        print(f"sandbox ({local.size} workers, {len(jobs)} HumanEval jobs, {rounds} rounds): "
              f"local {statistics.median(local_rates):.1f} jobs/s, "
              f"Ray actor {statistics.median(ray_rates):.1f} jobs/s")
    ratio = statistics.median(ratios)
    print(f"ratio Ray / local (median per round): {ratio:.3f} (goal >= 0.8)")
    return ratio


def bench_envs(name: str, n_workers: list[int], episodes: int, rounds: int) -> None:
    spec = llm_marl_envs.spec(name)
    env, module = spec.make(), spec.load()

    def local_rate() -> float:
        played = play_random([env], module, episodes, seed=0)
        return played["steps"] / played["seconds"]

    for n in n_workers:
        workers = RayEnvWorkers(name, n_workers=n, num_cpus=0)
        workers.play_random(5)  # warm-up: the actors exist and have imported the task
        local_rates, ray_rates, ratios = [], [], []
        for _ in range(rounds):
            a = local_rate()
            played = workers.play_random(episodes)
            r = played["steps"] / played["seconds"]
            b = local_rate()
            local_rates += [a, b]
            ray_rates.append(r)
            ratios.append(r / ((a + b) / 2))
        print(f"env {name}, {n} Ray env worker(s) x {episodes} episodes, {rounds} rounds: "
              f"{statistics.median(ray_rates):.0f} steps/s; local loop (1 process) "
              f"{statistics.median(local_rates):.0f} steps/s; ratio (median per round) {statistics.median(ratios):.2f}")
        workers.close()


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=None, help="sandbox pool size (default: CPUs)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--env", default="toy/signal_game_v0")
    parser.add_argument("--env-workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--episodes", type=int, default=3000)
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs the local Ray cluster may schedule")
    args = parser.parse_args(argv)
    with local_cluster(num_cpus=args.num_cpus):
        ratio = bench_sandbox(args.workers, args.rounds)
        bench_envs(args.env, args.env_workers, args.episodes, args.rounds)
    return ratio


if __name__ == "__main__":
    main()
