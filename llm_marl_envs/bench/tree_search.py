"""Benchmark: search-tree nodes per second of ``code/tree_search_v0`` over HumanEval.

Run: ``python -m llm_marl_envs.bench.tree_search [--problems N] [--nodes K] [--dataset humaneval]``

Plays one episode per problem (``max_nodes = K``, no early stop) with the oracle
(``best_policy``: the canonical solution at every node) and with the buggy-then-fixed
policy (a wrong program, repaired only once the feedback shows a failing public input).
The public-test validation (the canonical solution run once per problem, see
``validate_public``) happens before the timed runs. A node costs one sandbox run of its
program on the public tests; the last turn adds one
hidden-test run of the best node. Figures: nodes/s for each policy, the mean final reward
(hidden pass rate of the best node), and for the buggy policy the share of problems it
repaired. Reference measured in the same run: the raw sandbox -- ``sandbox.run`` of the
canonical program on the same public tests, once per problem, called directly -- so the
ratio ``env nodes/s / raw sandbox runs/s`` is the environment's overhead (goal >= 0.5;
a node also includes extraction, feedback rendering and the selection draws, and every
K-th node pays a hidden-test run).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any


def play(env: Any, policy: Callable[[Any, str], str], n_problems: int) -> tuple[float, float, float]:
    """(nodes/s, mean final reward, share of episodes whose best node passes all public tests)."""
    nodes, rewards, solved = 0, [], 0
    start = time.perf_counter()
    for i in range(n_problems):
        env.reset(seed=i, options={"problem": i})
        for agent in env.agent_iter():
            _, _, term, trunc, _ = env.last()
            env.step(None if term or trunc else policy(env, agent))
        raw = env.unwrapped
        nodes += len(raw.tree)
        rewards.append(raw.record.total_reward)
        best = raw.tree.best()
        solved += bool(best and best.total and best.passed == best.total)
    elapsed = time.perf_counter() - start
    return nodes / elapsed, sum(rewards) / len(rewards), solved / n_problems


def raw_sandbox_rate(env: Any, n_problems: int) -> float:
    """Direct ``sandbox.run`` calls per second: the canonical program on the public tests."""
    raw = env.unwrapped
    start = time.perf_counter()
    for problem in raw.problems[:n_problems]:
        raw.sandbox.run(problem.program(problem.reference), problem.public_tests, setup=problem.public_setup, timeout_s=raw.timeout_s)
    return n_problems / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="humaneval")
    parser.add_argument("--problems", type=int, default=None, help="first N problems (default: all)")
    parser.add_argument("--nodes", type=int, default=4, help="node budget per episode")
    args = parser.parse_args(argv)

    from llm_marl_envs.code import tree_search_v0 as ts

    env = ts.env(dataset=args.dataset, n_problems=args.problems, max_nodes=args.nodes)
    n = len(env.unwrapped.problems)
    start = time.perf_counter()
    dropped = env.unwrapped.validate_problems()  # once per env, not part of the node rate
    validation_s = time.perf_counter() - start
    ref = raw_sandbox_rate(env, n)
    oracle_rate, oracle_reward, oracle_solved = play(env, ts.best_policy, n)
    buggy_rate, buggy_reward, buggy_solved = play(env, ts.buggy_then_fixed_policy, n)
    print(f"tree_search_v0 on {args.dataset}: {n} problems, {args.nodes} nodes per episode")
    print(f"oracle:            {oracle_rate:7.1f} nodes/s  mean final reward {oracle_reward:.3f}  "
          f"best node passes public tests in {oracle_solved:.1%}")  # fmt: skip
    print(f"buggy-then-fixed:  {buggy_rate:7.1f} nodes/s  mean final reward {buggy_reward:.3f}  "
          f"repaired in {buggy_solved:.1%}")  # fmt: skip
    print(f"raw sandbox (reference): {ref:7.1f} runs/s")
    print(f"public-test validation (once, before timing): {validation_s:.1f} s, {dropped} problems had "
          "contradicted examples dropped")  # fmt: skip
    ratio = min(oracle_rate, buggy_rate) / ref
    print(f"ratio env nodes/s (slower policy) / raw sandbox runs/s: {ratio:.2f} (goal >= 0.5)")
    return ratio


if __name__ == "__main__":
    main()
