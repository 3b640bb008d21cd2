"""AT-GRPO (arXiv 2510.11062) at small scale: the alpha mix r = alpha r_team + r_local on coder/tester.

    python -m baselines.experiments.repro_at_grpo_alpha --plot docs/img/repro_at_grpo_alpha.png
    python -m baselines.experiments.repro_at_grpo_alpha --configs team_only --save t.json   # then --load ...

Setting: ``code/coder_tester_v0`` (HumanEval problems, 2 turns, every program and test run in
the real sandbox), AT-GRPO's branching rollout (K candidates per agent-turn from one cloned
state, scored on their own copies, continuing from the best) and AT-GRPO's advantage
function. The task declares the local rewards: coder ``coder_golden_pass``, tester
``tester_valid + tester_agreement``; the team reward is the change of the golden pass ratio.
The policy is the deliberately tiny menu policy of :mod:`baselines.experiments.repro_menu` (one
softmax per agent and turn): the coder picks the reference solution, a half-wrong variant,
an always-wrong program or prose; the tester the golden asserts, their first assert only,
the golden asserts negated, or prose. Problems: the first ``--problems`` HumanEval problems
whose menus behave as labelled (checked in the sandbox at start-up).

Configurations: alpha in {0, 0.5, 1} with the declared local reward, and "team_only"
(alpha 1, r_local = 0). Printed over seeds: the team return of the greedy branches (final
golden pass ratio), the coder's P(reference) at the end, the tester's P(valid suite) (golden
or one-assert: both valid, and they tie whenever the coder is right) and local reward, and
-- on every step's real table -- the fraction of AT-GRPO groups whose advantages change
when alpha changes: where it is 0 the mix is an affine map of one value within every group
and the normalization cancels it.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

import llm_marl_envs
from baselines.advantages import AdvantageConfig, compute_advantages
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
    check_source,
    fenced,
    half_wrong_program,
    negated,
)
from baselines.rollout import EnvPool, Task, sample
from baselines.samples import SampleTable
from llm_marl_envs.code.coder_tester_problems import CoderTesterProblem, from_code_problem
from llm_marl_envs.code.coder_tester_scoring import coder_program, parse_tester_tests, score_turn
from llm_marl_envs.data.humaneval import load_humaneval
from llm_marl_envs.sandbox import default_sandbox

OPTIONS = {"coder": ("reference", "half_wrong", "always_wrong", "prose"),
           "tester": ("golden", "one_assert", "negated", "prose")}
#: start: every agent picks its best entry with probability ~0.11
INIT = {a: (-1.0, 0.0, 0.0, 0.0) for a in OPTIONS}
CONFIGS = {"alpha=0": (0.0, True), "alpha=0.5": (0.5, True), "alpha=1": (1.0, True), "team_only": (1.0, False)}
MAX_TESTS = 10


def menu(p: CoderTesterProblem) -> dict[str, list[str]]:
    """The answer texts of both agents for one problem, in :data:`OPTIONS` order."""
    asserts = [t.code for t in p.golden_tests]
    return {"coder": [fenced(p.reference or ""), fenced(half_wrong_program(p.reference or "", p.entry_point)),
                      fenced(always_wrong_program(p.entry_point)), "I am not sure how to solve this."],
            "tester": [fenced(check_source(asserts[:MAX_TESTS])), fenced(check_source(asserts[:1])),
                       fenced(check_source([negated(a) for a in asserts[:MAX_TESTS]])),
                       "I would test the edge cases."]}


def menu_behaves(p: CoderTesterProblem, texts: dict[str, list[str]], sandbox: Any) -> bool:
    """The labels hold in the sandbox: golden and one-assert suites valid, negated invalid, half-wrong in (0, 1)."""
    ref = coder_program(p, texts["coder"][0])
    valid = [score_turn(sandbox, p, ref, parse_tester_tests(p, t, MAX_TESTS), 2.0).tester_components
             .get("tester_valid", 0.0) for t in texts["tester"][:3]]
    half = score_turn(sandbox, p, coder_program(p, texts["coder"][1]), parse_tester_tests(p, "", MAX_TESTS), 2.0)
    return valid == [1.0, 1.0, 0.0] and 0.0 < half.golden_pass < 1.0


def choose_problems(n: int) -> list[Any]:
    """The first ``n`` HumanEval problems whose menus behave as labelled."""
    sandbox, chosen = default_sandbox(), []
    for raw in load_humaneval():
        p = from_code_problem(raw)
        if p.kind == "function" and p.reference and len(p.golden_tests) >= 3 and menu_behaves(p, menu(p), sandbox):
            chosen.append(raw)
            if len(chosen) == n:
                return chosen
    raise RuntimeError(f"only {len(chosen)} HumanEval problems have well-behaved menus")


def turn_state(messages: Any) -> str:
    """The policy state: the turn (0 = the problem only; 1 = after the first turn's feedback)."""
    return f"turn{sum(1 for m in messages if m['role'] == 'user' and m['content'].startswith('Turn '))}"


def config_advantages(table: SampleTable, alpha: float, local: bool, k: int) -> np.ndarray:
    t = table if local else table.replace(local_reward=np.zeros(len(table)))
    return compute_advantages(t, "at_grpo", AdvantageConfig(alpha=alpha, expected_group_size=k)).advantages


def alpha_informative(table: SampleTable, k: int) -> dict[str, float]:
    """Per configuration: fraction of groups whose advantages differ from alpha = 1's by more than 1e-4.

    (Scaling a group's values by c changes its advantages only through the eps of (std + eps),
    by ~1e-6: not a difference.)
    """
    groups = compute_advantages(table, "at_grpo", AdvantageConfig(expected_group_size=k)).groups
    ref = config_advantages(table, 1.0, True, k)
    out = {}
    for name, (alpha, local) in CONFIGS.items():
        diff = np.abs(config_advantages(table, alpha, local, k) - ref) > 1e-4
        out[f"informative/{name}"] = float(np.mean([diff[groups == g].any() for g in np.unique(groups)]))
    return out


def train(label: str, problems: list[Any], seed: int, steps: int, tasks: int, k: int, lr: float) -> Run:
    """One run: ``steps`` AT-GRPO batches of ``tasks`` problems, K candidates per agent-turn."""
    alpha, local = CONFIGS[label]
    texts = {p.task_id: menu(from_code_problem(p)) for p in problems}
    rng = np.random.default_rng(seed)
    backend = MenuBackend(MenuPolicy(OPTIONS, INIT), texts, turn_state, rng)
    pool = EnvPool(lambda: llm_marl_envs.make("code/coder_tester_v0", problems=problems, max_turns=2,
                                              max_tests=MAX_TESTS))
    start, metrics = time.perf_counter(), []
    for _ in range(steps):
        batch = [Task(int(s)) for s in rng.integers(0, 2**31 - 1, size=tasks)]
        result = sample("branching", pool, batch, backend, group_size=k)
        table = result.table
        adv = config_advantages(table, alpha, local, k)
        tester = table.agent == "tester"
        m = {"team_return": float(result.info["greedy_return_mean"]),
             "candidate_reward": float(np.mean(result.returns)),
             "tester_local": float(np.mean(table.local_reward[tester])),
             "coder_p_reference": float(backend.policy.probs("coder", "turn0")[0]),
             "tester_p_golden": float(backend.policy.probs("tester", "turn0")[0]),
             "tester_p_valid": float(backend.policy.probs("tester", "turn0")[:2].sum()),
             "tester_adv_abs": float(np.mean(np.abs(adv[tester]))),
             **alpha_informative(table, k)}
        backend.update(table, adv, lr)
        metrics.append(m)
    final = float(np.mean([x["team_return"] for x in metrics[-5:]]))
    return Run(label, seed, metrics, final, time.perf_counter() - start,
               extra={k: metrics[-1][k] for k in ("coder_p_reference", "tester_p_golden", "tester_p_valid")})


def main(argv: list[str] | None = None) -> list[Run]:
    ap = config_parser(__doc__, CONFIGS)
    ap.add_argument("--tasks", type=int, default=6, help="problems per step")
    ap.add_argument("--k", type=int, default=4, help="candidates per agent-turn")
    ap.add_argument("--problems", type=int, default=8, help="HumanEval problems in the pool")
    ap.add_argument("--lr", type=float, default=3.0, help="logit step size")
    args, runs = parse_runs(ap, argv)
    if not args.load:
        problems = choose_problems(args.problems)
        print("problems: " + ", ".join(p.task_id for p in problems), flush=True)
        train_configs(
            args, runs, lambda label, seed: train(label, problems, seed, args.steps, args.tasks, args.k, args.lr),
            lambda run: f"team return (last 5) {run.final_eval:.3f}, P(reference) "
                        f"{run.extra['coder_p_reference']:.2f}, P(valid suite) {run.extra['tester_p_valid']:.2f}, "
                        f"{run.seconds:.0f}s")
    rows = []
    for label in args.configs:
        mine = [r for r in runs if r.label == label]
        reach = [first_step_at(r.series("team_return"), 0.9) for r in mine]
        rows.append([label, spread([r.final_eval for r in mine]),
                     " / ".join("never" if x == float("inf") else f"{x:.0f}" for x in reach),
                     spread([r.extra["coder_p_reference"] for r in mine], ".2f"),
                     spread([r.extra["tester_p_valid"] for r in mine], ".2f"),
                     spread([np.mean(r.series("tester_local")[-5:]) for r in mine], ".2f"),
                     spread([np.mean(r.series(f"informative/{label}")) for r in mine], ".2f"),
                     spread([r.seconds for r in mine], ".0f")])
    print(f"coder/tester, AT-GRPO branching K={args.k}, {args.tasks} problems per step, "
          f"{len(args.seeds)} seeds x {args.steps} steps")
    print(markdown_table(["config", "team return (last 5 steps)", "step reaching 0.9 (per seed)",
                          "final P(reference) coder",
                          "final P(valid suite) tester", "tester local reward (last 5)",
                          "groups where alpha changes A (vs alpha=1)", "seconds"], rows))
    if args.plot:
        panels = [("team_return", "team return (golden pass)"), ("coder_p_reference", "coder P(reference)"),
                  ("tester_p_valid", "tester P(valid suite)"), ("tester_local", "tester local reward")]
        print(f"plot: {plot_panels(runs, panels, args.plot, title='AT-GRPO alpha mix, coder/tester')}")
    return runs


if __name__ == "__main__":
    main()
