"""Benchmark: AEC steps per second of ``signal_game_v0`` next to a PettingZoo classic env.

Run: ``python -m llm_marl_envs.bench.envs [--steps N] [--repeats R]``

Both environments are played in the same process, alternately, with a scripted policy
(the signal game's optimal policy, rock-paper-scissors' "always rock"), resetting at the
end of every episode. The figure is the best of ``--repeats`` timed runs of ``--steps``
AEC steps each; the ratio (ours / reference) is printed last. Goal: >= 0.5.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any


def steps_per_second(env: Any, policy: Callable[[Any, str], Any], steps: int) -> float:
    env.reset(seed=0)
    done_steps = 0
    start = time.perf_counter()
    while done_steps < steps:
        for agent in env.agent_iter():
            _, _, term, trunc, _ = env.last()
            env.step(None if term or trunc else policy(env, agent))
            done_steps += 1
        env.reset()
    return done_steps / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    from pettingzoo.classic import rps_v2

    from llm_marl_envs.toy import signal_game_v0

    ours_env = signal_game_v0.env()
    ref_env = rps_v2.env()
    ours, ref = [], []
    for _ in range(args.repeats):
        ours.append(steps_per_second(ours_env, signal_game_v0.best_policy, args.steps))
        ref.append(steps_per_second(ref_env, lambda e, a: 0, args.steps))
    best_ours, best_ref = max(ours), max(ref)
    print(f"signal_game_v0 (scripted optimal policy): {best_ours:,.0f} AEC steps/s")
    print(f"pettingzoo rps_v2 (always rock):          {best_ref:,.0f} AEC steps/s")
    ratio = best_ours / best_ref
    print(f"ratio signal_game_v0 / rps_v2: {ratio:.2f} (goal >= 0.5)")
    return ratio


if __name__ == "__main__":
    main()
