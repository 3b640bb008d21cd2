"""SHARP (arXiv 2602.08335) at small scale: does Shapley credit carry information, and does it help?

    python -m baselines.experiments.repro_sharp                       # all three parts, seeds 0 1 2
    python -m baselines.experiments.repro_sharp --plot docs/img/repro_sharp.png

Per-agent normalization cancels credit that is an affine function of the joint reward within
a (task, agent) group; then SHARP is Dr. MAS. Three parts, all on the real environments:

1. **Informativeness per task** -- each agent plays the task's scripted ``best_policy`` or its
   ``random_policy`` (a fair coin per agent and episode), G episodes per task, exact Shapley
   phi_k from the env's ``coalition_value``; printed: the fraction of (task, agent) groups in
   which the credit changes SHARP's advantages (:func:`~baselines.advantages.credit_informativeness`).
2. **planner/worker, one useful and one useless worker** (the issue's design) and **two
   redundant workers**: the planner (scripted, gold decomposition) dispatches every hop to
   every worker and takes the first informative report; a worker is *useful* (really
   searches BM25 and reads the answer off, the env's ``best_policy``) or *useless* (reports
   "unknown" without searching, the env's ``no_search_policy``), drawn per episode with its
   own probability. Printed per worker: mean phi_k (the ranking), and the advantage gap
   mean A(useful episodes) - mean A(useless episodes) under GRPO, Dr. MAS and SHARP.
3. **Learning with that credit** (redundant workers): each worker's only decision is
   useful-or-useless, a Bernoulli policy (one logit per worker, start P(useful) = 0.2)
   trained by the score-function gradient mean(A * (a - p)) with each scheme's advantages
   on the real tables -- a deliberately tiny policy class that isolates credit assignment
   (LLM workers on this task need the real small model: not run here). Curves: P(useful)
   per worker and team reward.
SHARP runs with lambda_s = 1 and lambda_p = 0 (no tool-validity term), so any difference
from Dr. MAS is the credit's.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import llm_marl_envs
from baselines.advantages import AdvantageConfig, compute_advantages, credit_informativeness
from baselines.experiments.common import Run, markdown_table, plot_panels, spread
from baselines.rollout.episodes import episode_credit
from baselines.samples import Row, SampleTable
from llm_marl_envs.search import planner_worker_v0 as pw

SHARP = AdvantageConfig(lambda_s=1.0, lambda_p=0.0)
PW_KWARGS = {"n_workers": 2, "min_hops": 2, "max_hops": 3, "n_entities": 120, "n_questions": 60, "cache_dir": False}
Policy = Callable[[Any, str], str]


# ------------------------------------------------------------------------- part 1
def play(env: Any, seed: int, policy: Policy, options: dict | None = None) -> None:
    env.reset(seed=seed, options=options or {})
    for agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else policy(env, agent))


def episode_rows(env: Any, task: str, episode: int, extra: dict[str, Any] | None = None) -> list[Row]:
    """One row per agent of a finished episode: the joint return and the exact Shapley phi_k."""
    inner = env.unwrapped
    phi = episode_credit(env, "shapley", "rescore")
    total = float(inner.record.total_reward)
    return [Row(task, episode, agent, total, credit=phi[agent], branch=episode,
                reward_components=dict(extra or {}).get(agent, {}))
            for agent in inner.possible_agents]


def informativeness(name: str, kwargs: dict, n_tasks: int, group: int, seed: int) -> dict[str, float]:
    """Part 1 for one task: best-or-random per agent and episode."""
    spec = llm_marl_envs.spec(name)
    env, module = spec.make(**kwargs), spec.load()
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_tasks):
        for g in range(group):
            best = {a: bool(rng.random() < 0.5) for a in env.unwrapped.possible_agents}

            def policy(e: Any, a: str, best: dict[str, bool] = best) -> str:
                return module.best_policy(e, a) if best[a] else module.random_policy(e, a, rng)

            play(env, 1000 * seed + t, policy)
            rows += episode_rows(env, f"t{t}", g)
    table = SampleTable.from_rows(rows)
    stats = credit_informativeness(table, SHARP)
    stats["return_mean"] = float(np.mean(table.reward))
    return stats


# ------------------------------------------------------------------------- part 2
def redundant_planner(env: Any) -> str:
    """Gold decomposition; every hop goes to every worker; the first report other than "unknown" is used."""
    inner = env.unwrapped
    steps = inner.example.decomposition
    known = [steps[0].answer]  # hop 1 comes with the topic passage (read from the hidden state, as best_policy)
    for msg in inner.observe_chat("planner"):
        if msg["role"] == "user" and msg["content"].startswith("Reports:"):
            said = [r.strip() for r in re.findall(r"^worker_\d+ reported: (.*)$", msg["content"], re.MULTILINE)]
            known.append(next((r for r in said if r and r.lower() != "unknown"), "unknown"))
    if len(known) < len(steps):
        q = steps[len(known)].question
        for k in range(len(known), 0, -1):
            q = q.replace(f"#{k}", known[k - 1])
        return " ".join(f'<dispatch worker="{i}">{q}</dispatch>' for i in range(len(inner.workers)))
    return f"<answer>{known[-1]}</answer>"


def worker_team(useful: dict[str, bool]) -> Policy:
    def policy(env: Any, agent: str) -> str:
        if agent == "planner":
            return redundant_planner(env)
        return pw.best_policy(env, agent) if useful[agent] else pw.no_search_policy(env, agent)

    return policy


def sample_workers(env: Any, p_useful: dict[str, float], n_tasks: int, group: int, rng: np.random.Generator,
                   question_offset: int = 0) -> SampleTable:
    """``n_tasks`` questions x ``group`` episodes; each worker useful with its own probability."""
    rows = []
    n_q = len(env.unwrapped.examples)
    for t in range(n_tasks):
        qi = int(rng.integers(n_q)) if question_offset < 0 else (question_offset + t) % n_q
        for g in range(group):
            useful = {w: bool(rng.random() < p) for w, p in p_useful.items()}
            play(env, 0, worker_team(useful), {"question_index": qi})
            rows += episode_rows(env, f"q{qi}", g, {w: {"useful": float(u)} for w, u in useful.items()})
    return SampleTable.from_rows(rows)


def advantage_gap(table: SampleTable, scheme: str, agent: str) -> float:
    """mean A of ``agent`` on episodes where it was useful minus where it was not (NaN if one side is empty)."""
    adv = compute_advantages(table, scheme, SHARP).advantages
    rows = np.flatnonzero(table.agent == agent)
    useful = np.array([table.reward_components[i].get("useful", 0.0) > 0 for i in rows])
    if useful.all() or not useful.any():
        return float("nan")
    return float(adv[rows][useful].mean() - adv[rows][~useful].mean())


def credit_table(env: Any, label: str, p_useful: dict[str, float], seeds: list[int], n_tasks: int,
                 group: int) -> list[list[str]]:
    """Part 2 rows: per worker, phi ranking and the advantage gaps per scheme, over seeds."""
    per_seed = []
    for seed in seeds:
        table = sample_workers(env, p_useful, n_tasks, group, np.random.default_rng(seed), question_offset=0)
        per_seed.append(table)
    out = []
    for w in p_useful:
        phi = [float(t.credit[t.agent == w].mean()) for t in per_seed]
        info = [credit_informativeness(t.select(np.flatnonzero(t.agent == w)), SHARP)["credit_informative_frac"]
                for t in per_seed]
        gaps = {s: [advantage_gap(t, s, w) for t in per_seed] for s in ("grpo", "dr_mas", "sharp")}
        out.append([label, f"{w} (P useful {p_useful[w]:g})", spread(phi), spread(info, ".2f"),
                    *(spread(gaps[s]) for s in ("grpo", "dr_mas", "sharp"))])
    return out


# ------------------------------------------------------------------------- part 3
def train_bernoulli(env: Any, scheme: str, seed: int, steps: int, n_tasks: int, group: int, lr: float) -> Run:
    """Part 3: one logit per worker trained with ``scheme``'s advantages on the real tables."""
    rng = np.random.default_rng(seed)
    workers = list(env.unwrapped.workers)
    logit = {w: float(np.log(0.2 / 0.8)) for w in workers}
    metrics = []
    for _ in range(steps):
        p = {w: float(1 / (1 + np.exp(-logit[w]))) for w in workers}
        table = sample_workers(env, p, n_tasks, group, rng, question_offset=-1)
        adv = compute_advantages(table, scheme, SHARP).advantages
        m = {"reward": float(table.reward[table.agent == "planner"].mean())}
        for w in workers:
            rows = np.flatnonzero(table.agent == w)
            a = np.array([table.reward_components[i]["useful"] for i in rows])
            logit[w] += lr * float(np.mean(adv[rows] * (a - p[w])))
            m[f"p_useful/{w}"] = p[w]
        m["p_useful/min"] = min(p.values())
        metrics.append(m)
    final = {f"p_useful/{w}": float(1 / (1 + np.exp(-logit[w]))) for w in workers}
    return Run(scheme, seed, metrics, final_eval=float(np.mean([x["reward"] for x in metrics[-5:]])),
               seconds=0.0, extra=final)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--tasks", type=int, default=8, help="questions per table / step")
    ap.add_argument("--group", type=int, default=8, help="episodes per question")
    ap.add_argument("--steps", type=int, default=40, help="part 3 steps")
    ap.add_argument("--lr", type=float, default=2.0, help="part 3 logit step size")
    ap.add_argument("--parts", nargs="+", type=int, default=[1, 2, 3])
    ap.add_argument("--plot", type=Path, default=None)
    args = ap.parse_args(argv)
    out: dict[str, Any] = {}
    if 1 in args.parts:
        tasks = [("toy/signal_game_v0", {"n_rounds": 2}), ("search/planner_worker_v0", PW_KWARGS),
                 ("code/helper_main_v0", {})]
        rows = []
        for name, kwargs in tasks:
            stats = [informativeness(name, kwargs, args.tasks, args.group, s) for s in args.seeds]
            rows.append([name, spread([s["credit_informative_frac"] for s in stats], ".2f"),
                         f"{stats[0]['credit_groups']:.0f}", spread([s["return_mean"] for s in stats])])
        print("part 1: fraction of (task, agent) groups where SHARP's credit changes the advantages "
              "(best-or-random per agent and episode)")
        print(markdown_table(["task", "informative fraction", "groups per seed", "mean return"], rows))
        out["part1"] = rows
    env = pw.env(**PW_KWARGS)
    if 2 in args.parts:
        rows = credit_table(env, "one useless", {"worker_0": 0.7, "worker_1": 0.0}, args.seeds, args.tasks,
                            args.group)
        rows += credit_table(env, "redundant", {"worker_0": 0.5, "worker_1": 0.5}, args.seeds, args.tasks,
                             args.group)
        print("part 2: planner/worker, phi_k and the advantage gap A(useful) - A(useless) per scheme")
        print(markdown_table(["team", "worker", "mean phi_k", "informative fraction", "gap GRPO", "gap Dr. MAS",
                              "gap SHARP"], rows))
        out["part2"] = rows
    if 3 in args.parts:
        runs = [train_bernoulli(env, s, seed, args.steps, args.tasks, args.group, args.lr)
                for s in ("grpo", "dr_mas", "sharp") for seed in args.seeds]
        rows = []
        for s in ("grpo", "dr_mas", "sharp"):
            mine = [r for r in runs if r.label == s]
            rows.append([s, spread([r.final_eval for r in mine]),
                         *(spread([r.extra[f"p_useful/{w}"] for r in mine], ".2f") for w in env.unwrapped.workers)])
        print(f"part 3: Bernoulli workers, redundant team, {args.steps} steps x {args.tasks} questions x "
              f"{args.group} episodes, start P(useful) 0.2")
        print(markdown_table(["scheme", "team reward (last 5 steps)",
                              *(f"final P(useful) {w}" for w in env.unwrapped.workers)], rows))
        out["part3"] = rows
        if args.plot:
            panels = [("p_useful/worker_0", "P(useful) worker_0"), ("p_useful/worker_1", "P(useful) worker_1"),
                      ("reward", "team reward")]
            print(f"plot: {plot_panels(runs, panels, args.plot, title='SHARP credit, redundant workers')}")
    return out


if __name__ == "__main__":
    main()
