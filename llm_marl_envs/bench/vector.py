"""Benchmark: env steps/s of the subprocess vector env against N sequential envs, on a code task.

Run: ``python -m llm_marl_envs.bench.vector [--envs 2] [--steps 40] [--nodes 4]``

Both sides step the same N ``code/tree_search_v0`` envs over HumanEval (``validate_public``
off, so every step is one node), with the same actions: each answer defines the asked-for
function with a wrong body, so every step really runs the problem's public tests in the
sandbox, and every ``--nodes``-th step adds the hidden-test run of the episode's end.
Reference, measured in the same run: :class:`~llm_marl_envs.core.vector.SyncTextVectorEnv`
-- the N envs stepped one after the other in this process, i.e. N sequential envs.
Measured: :class:`~llm_marl_envs.core.vector.SubprocTextVectorEnv`, one process per env.
Both are warmed up (sandbox workers started, first episode drawn) before timing, and they
are timed alternately over ``--rounds`` rounds (sequential, then subprocess, in each) so that
the load of a shared machine hits both alike. Figures: env steps/s of each per round, and
the median over rounds of the ratio subprocess / sequential (goal >= 1.6 with 2 envs on 2
cores).
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from functools import partial
from typing import Any

_ENTRY = re.compile(r"Write the Python function `(\w+)`")


def answer(observation: str) -> str:
    """A wrong but valid solution for the problem in ``observation`` (runs the public tests)."""
    match = _ENTRY.findall(observation)
    name = match[-1] if match else "solution"
    return f"```python\ndef {name}(*args, **kwargs):\n    return sum(i * i for i in range(20000)) and None\n```"


def make_env(nodes: int) -> Any:
    import llm_marl_envs

    return llm_marl_envs.make("code/tree_search_v0", dataset="humaneval", max_nodes=nodes, validate_public=False)


def rate(vec: Any, steps: int, warmup: int = 3) -> float:
    """Env steps per second over ``steps`` vector steps after ``warmup`` untimed ones."""
    out = vec.reset(seed=0)
    for _ in range(warmup):
        out = vec.step([answer(o) for o in out.observations])
    start = time.perf_counter()
    for _ in range(steps):
        out = vec.step([answer(o) for o in out.observations])
    return steps * vec.num_envs / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=40, help="timed vector steps")
    parser.add_argument("--nodes", type=int, default=4, help="node budget per episode")
    parser.add_argument("--rounds", type=int, default=3, help="alternating timing rounds")
    args = parser.parse_args(argv)

    from llm_marl_envs.core.vector import SubprocTextVectorEnv, SyncTextVectorEnv

    fns = [partial(make_env, args.nodes) for _ in range(args.envs)]
    sync, sub = SyncTextVectorEnv(fns), SubprocTextVectorEnv(fns)
    print(f"tree_search_v0 (HumanEval, {args.nodes} nodes/episode), {args.envs} envs, {args.steps} timed steps")
    ratios = []
    try:
        for r in range(args.rounds):
            sequential, parallel = rate(sync, args.steps), rate(sub, args.steps)
            ratios.append(parallel / sequential)
            print(f"round {r}: {args.envs} sequential envs (reference) {sequential:6.1f} env steps/s, "
                  f"subprocess vector env {parallel:6.1f} env steps/s, ratio {ratios[-1]:.2f}")  # fmt: skip
    finally:
        sync.close()
        sub.close()
    ratio = statistics.median(ratios)
    print(f"median ratio subprocess / sequential: {ratio:.2f} (goal >= 1.6 with 2 envs on 2 cores)")
    return ratio


if __name__ == "__main__":
    main()
