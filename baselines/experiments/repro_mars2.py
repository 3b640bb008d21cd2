"""MARS2 (arXiv 2602.07848) at small scale: tree-wide vs per-agent grouping on tree search.

    python -m baselines.experiments.repro_mars2 --plot docs/img/repro_mars2.png
    python -m baselines.experiments.repro_mars2 --configs per_agent --save p.json   # then --load t.json p.json ...

Setting: ``code/tree_search_v0`` (HumanEval problems, 2 agents, ``--nodes`` nodes per tree,
the environment's Thompson sampling decides who writes which node, every program scored
by the real sandbox on the public tests; the episode's reward is the hidden-test pass ratio
of the best node), MARS2's env-tree rollout (``--trees`` trees per problem) and MARS2's
tree-consistent shaping (gamma = lambda = 0.5). The policy is the deliberately tiny menu
policy of :mod:`baselines.experiments.repro_menu` (one softmax per agent and node kind, draft or
refinement): the reference solution, a half-wrong variant, an always-wrong program, prose.
A heterogeneous team: agent_0 starts strong (P(reference) 0.3), agent_1 weak (0.05).

Configurations, on the same shaped node rewards:
- ``tree_wide`` -- MARS2: one group per tree, every agent's nodes together;
- ``per_agent`` -- one group per (tree, agent): each agent's nodes normalized on their own.
Printed over seeds: the team reward (hidden pass ratio of the best node, last 5 steps), each
agent's final P(reference) and P(half-wrong) when drafting (a node's reward is its *public*
test score, and the half-wrong variant often passes the few public examples: then it ties
with the reference for the advantage, while the hidden tests tell them apart), and the
fraction of nodes that got no signal (their group had one node or one value) and each agent's
mean |advantage|. MARS2's choice holds here if tree-wide grouping
learns at least as fast and as far, in particular for the weak agent.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

import llm_marl_envs
from baselines.advantages import (
    AdvantageConfig,
    AdvantageResult,
    compute_advantages,
    group_index,
    tree_shaping,
)
from baselines.advantages.normalize import normalize_with_config
from baselines.experiments.common import (
    Run,
    config_parser,
    markdown_table,
    parse_runs,
    plot_panels,
    spread,
    train_configs,
)
from baselines.experiments.repro_magrpo import first_step_at
from baselines.experiments.repro_menu import (
    MenuBackend,
    MenuPolicy,
    always_wrong_program,
    fenced,
    half_wrong_program,
)
from baselines.rollout import EnvPool, Task, sample
from baselines.samples import SampleTable

AGENTS = ("agent_0", "agent_1")
OPTIONS = {a: ("reference", "half_wrong", "always_wrong", "prose") for a in AGENTS}
#: P(reference) 0.3 for agent_0 and 0.05 for agent_1 (the other three entries equal)
INIT = {"agent_0": (float(np.log(0.3 / 0.7 * 3)), 0.0, 0.0, 0.0),
        "agent_1": (float(np.log(0.05 / 0.95 * 3)), 0.0, 0.0, 0.0)}
CONFIGS = ("tree_wide", "per_agent")
SHAPING = AdvantageConfig(shaping=True)


def menu(problem: Any) -> dict[str, list[str]]:
    texts = [fenced(problem.reference), fenced(half_wrong_program(problem.reference, problem.entry_point)),
             fenced(always_wrong_program(problem.entry_point)), "I am not sure how to solve this."]
    return {a: texts for a in AGENTS}


def env_kwargs(nodes: int, problem_ids: list[str] | None = None) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"dataset": "humaneval", "n_agents": len(AGENTS), "max_nodes": nodes}
    if problem_ids is not None:
        kwargs["problem_ids"] = problem_ids
    return kwargs


def one_node(env: Any, index: int, text: str) -> float:
    """The hidden-test reward of a one-node tree whose only program is ``text``."""
    env.reset(seed=0, options={"problem": index})
    env.step(text)
    return float(env.unwrapped.record.total_reward)


def choose_problems(n: int) -> list[str]:
    """The first ``n`` function problems whose reference scores 1, half-wrong in (0, 1) and always-wrong 0."""
    env = llm_marl_envs.make("code/tree_search_v0", **{**env_kwargs(1), "n_agents": 1})
    chosen = []
    for i, p in enumerate(env.unwrapped.problems):
        if p.kind != "function" or not p.reference:
            continue
        texts = menu(p)["agent_0"]
        if (one_node(env, i, texts[0]) == 1.0 and 0.0 < one_node(env, i, texts[1]) < 1.0
                and one_node(env, i, texts[2]) == 0.0):
            chosen.append(p.task_id)
            if len(chosen) == n:
                return chosen
    raise RuntimeError(f"only {len(chosen)} problems have well-behaved menus")


def node_state(messages: Any) -> str:
    """The policy state: ``refine`` when the prompt shows a previous candidate, else ``draft``."""
    return "refine" if any("A previous candidate" in m["content"] for m in messages if m["role"] == "user") else "draft"


def per_agent(table: SampleTable, config: AdvantageConfig) -> AdvantageResult:
    """MARS2's shaped values, normalized per (tree, agent) instead of per tree."""
    values = tree_shaping(table, config.shaping_gamma, config.shaping_lambda)
    groups, _ = group_index(table.task, table.episode, table.agent)
    return normalize_with_config(values, groups, config, scale_default=True)


def advantages(table: SampleTable, label: str) -> AdvantageResult:
    return compute_advantages(table, "mars2", SHAPING) if label == "tree_wide" else per_agent(table, SHAPING)


def no_signal_fraction(result: AdvantageResult) -> float:
    """Fraction of rows whose group had one row or one value (advantage 0 by construction)."""
    flat = [len(set(np.round(result.values[result.groups == g], 12))) == 1 for g in result.groups]
    return float(np.mean(flat)) if flat else float("nan")


def train(label: str, problem_ids: list[str], seed: int, steps: int, tasks: int, trees: int, nodes: int,
          lr: float) -> Run:
    """One run: ``steps`` batches of ``tasks`` problems x ``trees`` trees."""
    rng = np.random.default_rng(seed)
    kwargs = env_kwargs(nodes, problem_ids)
    probe = llm_marl_envs.make("code/tree_search_v0", **kwargs)
    backend = MenuBackend(MenuPolicy(OPTIONS, INIT), {p.task_id: menu(p) for p in probe.unwrapped.problems},
                          node_state, rng)
    pool = EnvPool(lambda: llm_marl_envs.make("code/tree_search_v0", **kwargs))
    start, metrics = time.perf_counter(), []
    for _ in range(steps):
        batch = [Task(int(s)) for s in rng.integers(0, 2**31 - 1, size=tasks)]
        result = sample("env_tree", pool, batch, backend, group_size=trees)
        table = result.table
        adv = advantages(table, label)
        m = {"team_reward": float(np.mean(result.returns)), "no_signal": no_signal_fraction(adv)}
        for a in AGENTS:
            m[f"p_reference/{a}"], m[f"p_half_wrong/{a}"] = (float(x) for x in backend.policy.probs(a, "draft")[:2])
            m[f"nodes/{a}"] = float(np.sum(table.agent == a)) / max(len(result.returns), 1)
            m[f"adv_abs/{a}"] = float(np.mean(np.abs(adv.advantages[table.agent == a]))) if np.any(
                table.agent == a) else float("nan")
        backend.update(table, adv.advantages, lr)
        metrics.append(m)
    final = float(np.mean([x["team_reward"] for x in metrics[-5:]]))
    return Run(label, seed, metrics, final, time.perf_counter() - start,
               extra={k: metrics[-1][k] for a in AGENTS for k in (f"p_reference/{a}", f"p_half_wrong/{a}")})


def main(argv: list[str] | None = None) -> list[Run]:
    ap = config_parser(__doc__, CONFIGS)
    ap.add_argument("--tasks", type=int, default=4, help="problems per step")
    ap.add_argument("--trees", type=int, default=2, help="trees per problem")
    ap.add_argument("--nodes", type=int, default=4, help="nodes per tree")
    ap.add_argument("--problems", type=int, default=8, help="HumanEval problems in the pool")
    ap.add_argument("--lr", type=float, default=3.0, help="logit step size")
    args, runs = parse_runs(ap, argv)
    if not args.load:
        problem_ids = choose_problems(args.problems)
        print("problems: " + ", ".join(problem_ids), flush=True)
        train_configs(
            args, runs,
            lambda label, seed: train(label, problem_ids, seed, args.steps, args.tasks, args.trees, args.nodes,
                                      args.lr),
            lambda run: f"team reward (last 5) {run.final_eval:.3f}, P(reference) "
                        + ", ".join(f"{a} {run.extra[f'p_reference/{a}']:.2f}" for a in AGENTS)
                        + f", {run.seconds:.0f}s")
    rows = []
    for label in args.configs:
        mine = [r for r in runs if r.label == label]
        reach = [first_step_at(r.series("p_reference/agent_1"), 0.9, window=1) for r in mine]
        rows.append([label, spread([r.final_eval for r in mine]),
                     *(spread([r.extra[f"p_{k}/{a}"] for r in mine], ".2f")
                       for a in AGENTS for k in ("reference", "half_wrong")),
                     " / ".join("never" if x == float("inf") else f"{x:.0f}" for x in reach),
                     *(spread([np.mean(r.series(f"nodes/{a}")) for r in mine], ".1f") for a in AGENTS),
                     spread([np.mean(r.series("no_signal")) for r in mine], ".2f"),
                     *(spread([np.nanmean(r.series(f"adv_abs/{a}")) for r in mine], ".2f") for a in AGENTS),
                     spread([r.seconds for r in mine], ".0f")])
    print(f"tree search, 2 agents (agent_0 strong, agent_1 weak), {args.nodes} nodes per tree, {args.trees} trees x "
          f"{args.tasks} problems per step, {len(args.seeds)} seeds x {args.steps} steps")
    print(markdown_table(["grouping", "team reward (last 5 steps)", "final P(reference) agent_0",
                          "final P(half-wrong) agent_0", "final P(reference) agent_1", "final P(half-wrong) agent_1",
                          "step agent_1 reaches P 0.9 (per seed)",
                          "nodes per tree agent_0", "nodes per tree agent_1",
                          "nodes with no signal", "mean |A| agent_0", "mean |A| agent_1", "seconds"], rows))
    if args.plot:
        panels = [("team_reward", "team reward (hidden pass, best node)"),
                  ("p_reference/agent_0", "agent_0 (strong) P(reference)"),
                  ("p_reference/agent_1", "agent_1 (weak) P(reference)"),
                  ("p_half_wrong/agent_1", "agent_1 (weak) P(half-wrong)")]
        print(f"plot: {plot_panels(runs, panels, args.plot, smooth=3, title='MARS2 grouping, tree search')}")
    return runs


if __name__ == "__main__":
    main()
