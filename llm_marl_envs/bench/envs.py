"""Benchmark: AEC steps per second of ``signal_game_v0`` next to a PettingZoo classic env.

Run: ``python -m llm_marl_envs.bench.envs [--steps N] [--repeats R] [--task-steps M]``

Both environments are played in the same process, alternately, with a scripted policy
(the signal game's optimal policy, rock-paper-scissors' "always rock"), resetting at the
end of every episode. The figure is the best of ``--repeats`` timed runs of ``--steps``
AEC steps each; the ratio (ours / reference) is printed last. Goal: >= 0.5.

Before it, the solver/verifier, grid and coder/tester tasks are timed the same way over
``--task-steps`` steps with their scripted best policies (:data:`TASKS`; their steps run
math-verify and sandboxed programs, so they are orders of magnitude slower than the toy
game and have no reference to compare with).
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


#: (label, task name, kwargs) of the collaboration tasks timed next to the signal game
TASKS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("solver_verifier_v0", "math/solver_verifier_v0", {}),
    ("solver_verifier_v0 + tool", "math/solver_verifier_v0", {"tool": True}),
    ("grid_v0 plan_path 10x10", "planning/grid_v0", {"tool": False}),
    ("grid_v0 plan_path 10x10 + tool", "planning/grid_v0", {}),
    ("grid_v0 sokoban 6x6 + tool", "planning/grid_v0", {"puzzle": "sokoban"}),
    ("grid_v0 sudoku 4x4 + tool", "planning/grid_v0", {"puzzle": "sudoku"}),
    ("coder_tester_v0 humaneval", "code/coder_tester_v0", {}),
)


def task_steps_per_second(steps: int) -> dict[str, float]:
    """Steps/s of each of :data:`TASKS` with its scripted best policy (one warm-up episode first)."""
    import llm_marl_envs

    out = {}
    for label, name, kwargs in TASKS:
        module = llm_marl_envs.spec(name).load()
        env = module.env(**kwargs)
        steps_per_second(env, module.best_policy, 1)  # warm-up: sandbox pool, imports, caches
        out[label] = steps_per_second(env, module.best_policy, steps)
    return out


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--task-steps", type=int, default=200, help="steps per collaboration task (0 = skip)")
    args = parser.parse_args(argv)

    if args.task_steps > 0:
        for label, rate in task_steps_per_second(args.task_steps).items():
            print(f"{label + ' (scripted best):':<50}{rate:>10,.1f} AEC steps/s")

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
