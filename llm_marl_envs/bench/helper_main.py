"""Benchmark: ``code/helper_main_v0`` episodes per second with the oracle team, all 164 problems.

Run: ``python -m llm_marl_envs.bench.helper_main [--repeats R] [--problems N]``

Three figures, measured in the same process on the same problems:

1. **env**: one AEC episode per HumanEval problem (``options={"task_id": ...}``), the
   oracle policy for every agent, through the wrapped environment -- episodes/s, and the
   share of that wall time spent inside the sandbox (``run``/``run_batch`` calls, timed by
   a proxy around the real sandbox);
2. **batched scoring**: the same joint answers scored with
   ``HelperMainScorer.score_many`` (one ``run_batch`` call) -- programs/s, the path a
   trainer scoring a whole group should use;
3. **reference**: the sandbox alone running each problem's reference program (prompt +
   canonical solution) against the same tests, one ``run`` call each -- runs/s.

The ratio printed last is env episodes/s over reference runs/s: how much the environment
(extraction, assembly, AST checks, feedback, bookkeeping) costs on top of running the
tests. Each figure is the best of ``--repeats`` runs.
"""

from __future__ import annotations

import argparse
import time
from typing import Any


class TimedSandbox:
    """A proxy around a real sandbox that adds up the wall time of its calls."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0

    def run(self, *args: Any, **kwargs: Any):
        start = time.perf_counter()
        try:
            return self.inner.run(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start

    def run_batch(self, *args: Any, **kwargs: Any):
        start = time.perf_counter()
        try:
            return self.inner.run_batch(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--problems", type=int, default=164, help="first N HumanEval problems")
    args = parser.parse_args(argv)

    from llm_marl_envs.code import helper_main_v0 as task
    from llm_marl_envs.code.helper_main_policies import oracle_answers
    from llm_marl_envs.code.helper_main_scoring import HelperMainScorer, Submission
    from llm_marl_envs.data import load_humaneval
    from llm_marl_envs.sandbox import default_sandbox

    problems = load_humaneval()[: args.problems]
    sandbox = TimedSandbox(default_sandbox())
    env = task.env(problems=problems, sandbox=sandbox)
    scorer = HelperMainScorer({"helper": "aux"}, sandbox=sandbox)
    subs = [Submission(p, oracle_answers(p, {"helper": "aux"})) for p in problems]
    for p in problems:  # parse every check once, outside the timings
        scorer.tests_for(p)
        env.unwrapped.scorer.tests_for(p)

    env_rates, shares, batch_rates, ref_rates = [], [], [], []
    for _ in range(args.repeats):
        sandbox.seconds = 0.0
        start = time.perf_counter()
        total = 0.0
        for p in problems:
            env.reset(seed=0, options={"task_id": p.task_id})
            for agent in env.agent_iter():
                _, _, term, trunc, _ = env.last()
                env.step(None if term or trunc else task.best_policy(env, agent))
            total += env.unwrapped.record.total_reward
        wall = time.perf_counter() - start
        if abs(total - 4.0 * len(problems)) > 1e-6:
            raise RuntimeError(f"oracle did not reach the maximum on every problem (total {total})")
        env_rates.append(len(problems) / wall)
        shares.append(sandbox.seconds / wall)

        start = time.perf_counter()
        scored = scorer.score_many(subs)
        batch_rates.append(len(subs) / (time.perf_counter() - start))
        assert all(s.score.total == 4.0 for s in scored)

        start = time.perf_counter()
        for p in problems:
            setup, tests = scorer.tests_for(p)
            sandbox.inner.run(p.reference_program, tests, setup=setup)
        ref_rates.append(len(problems) / (time.perf_counter() - start))

    best = max(range(args.repeats), key=lambda i: env_rates[i])
    print(f"problems: {len(problems)} HumanEval, oracle team, 1 turn each (all reach 4.0)")
    print(f"env episodes/s (AEC, sequential):       {env_rates[best]:.1f}")
    print(f"  share of env time inside the sandbox: {shares[best]:.0%}")
    print(f"batched scoring (score_many/run_batch): {max(batch_rates):.1f} programs/s")
    print(f"reference: sandbox.run of the reference program: {max(ref_rates):.1f} runs/s")
    ratio = env_rates[best] / max(ref_rates)
    print(f"ratio env episodes/s / reference runs/s: {ratio:.2f}")
    return ratio


if __name__ == "__main__":
    main()
