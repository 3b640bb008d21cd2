"""MAGRPO (arXiv 2508.04652) return-to-go on multi-turn helper/main with feedback: gamma 0 vs 0.9.

    python -m baselines.experiments.repro_magrpo_code --plot docs/img/repro_magrpo_code.png
    python -m baselines.experiments.repro_magrpo_code --variants setup --gammas 0 --save s0.json   # then --load ...

Setting: ``code/helper_main_v0`` (HumanEval, ``max_turns=2``, ``feedback="full"``, per-turn
reward ``score_t - score_{t-1}``, the episode ends as soon as every test passes; every
program runs in the real sandbox), MAGRPO's joint tree (G joint actions per node on both
turns, ``tree_depth=2``) and MAGRPO's advantage ``A = R - mean(R of the G siblings)`` with the
return-to-go ``R_t = r_t + gamma mean(R of the children)``. One knob, ``gamma``
(``advantage.gamma``): the sampler fills the return-to-go with it and the scheme uses it.

The policy is the deliberately tiny menu policy of :mod:`baselines.experiments.repro_menu` (tiny
models cannot write programs): per agent and *state* a softmax over three real answers. The
state is the turn and, on turn 2, what the real feedback the agent received shows:
"informed" if it holds at least one failing-test block (input / expected / got), else
"uninformed" (the tests did not run: a definition was missing or the program did not parse).

==========  ===================  ==========================================================
agent       state                menu
==========  ===================  ==========================================================
helper      turn 1               draft ``aux`` | stub ``aux`` (``return None``) | prose
helper      turn 2, informed     repair (the oracle ``aux``) | the draft again | prose
helper      turn 2, uninformed   draft | stub | prose (no failing test to learn from)
main        every state          coop (calls ``aux``, uses its result) | solo (the
                                 reference alone, ``aux`` unused) | prose
==========  ===================  ==========================================================

The draft is what separates the two variants:

- ``setup``: the draft returns a wrong value on **every** input. Turn 1 (draft, coop) scores
  1.5 (structure + syntax, no test passes, so no cooperation points) but its feedback shows
  the failing tests, so turn 2 can reach (repair, coop) = 4.0. Turn 1 (anything, solo)
  passes every test and **ends the episode at 2.5** (no cooperation points). The turn-1
  reward ranks solo above the set-up; only the return-to-go sees the 4.0 behind it.
- ``partial``: the draft is the oracle ``aux`` wrong on about half the inputs (the half-wrong
  variant of ``repro_menu``): turn 1 (draft, coop) already scores 3.0 + the pass fraction
  (> 2.5), so the turn-1 reward alone ranks the set-up first -- the control where gamma
  should not matter.

Printed per variant and gamma over seeds: the team return (the expected final score of the
sampled policy, estimated on each step's tree: a turn-1 node's final score if it ended the
episode, else the mean final score of its children; max 4.0) over the last 5 steps, the
first step from which 3 consecutive steps reach 90% (3.6), the final menu probabilities per
agent and state, and -- on every step's real tree -- the fraction of turn-1 groups whose
joint actions the return-to-go with gamma 0 and with gamma 0.9 rank differently, and whose
best joint actions differ (gamma only changes the turn-1 rows: a turn-2 group's advantages
are ``s_2 - mean(s_2)`` for every gamma).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import llm_marl_envs
from baselines.advantages import AdvantageConfig, compute_advantages, magrpo_returns
from baselines.advantages.normalize import group_index
from baselines.advantages.tree import sibling_key
from baselines.experiments.common import (
    Run,
    add_run_io_args,
    markdown_table,
    plot_panels,
    runs_to_report,
    save_runs,
    spread,
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
from llm_marl_envs.code.feedback import parse_failures
from llm_marl_envs.code.helper_main_policies import main_only_answers, oracle_answers, reference_body
from llm_marl_envs.data.humaneval import CodeProblem, load_humaneval

HELPERS = {"helper": "aux"}
OPTIONS = {"helper": ("draft|repair", "stub|draft", "prose"), "main": ("coop", "solo", "prose")}
STATES = ("turn1", "turn2/informed", "turn2/uninformed")
VARIANTS = ("setup", "partial")
PROSE = "I am not sure how to write this."
STUB = fenced("def aux(*args, **kwargs):\n    return None")
MAX_SCORE = 4.0


def draft_aux(problem: CodeProblem, variant: str) -> str:
    """The helper's turn-1 draft of ``aux`` (module docstring): wrong everywhere, or on about half the inputs."""
    if variant == "setup":
        return fenced(always_wrong_program("aux"))
    params, body, _ = reference_body(problem)
    return fenced(half_wrong_program(f"def aux({params}):\n{body}", "aux"))


def menus(problem: CodeProblem, variant: str) -> dict[str, dict[str, list[str]]]:
    """``agent -> state -> answer texts`` in :data:`OPTIONS` order, for one problem."""
    oracle = oracle_answers(problem, HELPERS)
    solo = main_only_answers(problem, HELPERS)["main"]
    draft = draft_aux(problem, variant)
    helper = {"turn1": [draft, STUB, PROSE], "turn2/informed": [oracle["helper"], draft, PROSE],
              "turn2/uninformed": [draft, STUB, PROSE]}
    return {"helper": helper, "main": {s: [oracle["main"], solo, PROSE] for s in STATES}}


def feedback_state(messages: Sequence[Mapping[str, str]]) -> str:
    """The policy state: turn 1, or turn 2 informed / uninformed by the real feedback (module docstring)."""
    feedback = [m["content"] for m in messages if m["role"] == "user" and m["content"].startswith("Turn ")]
    if not feedback:
        return "turn1"
    return "turn2/informed" if parse_failures(feedback[-1]) else "turn2/uninformed"


def turn1_score(env: Any, answers: Mapping[str, str], task_id: str) -> tuple[float, int, int, bool]:
    """(score, tests passed, tests, episode ended) of one turn-1 joint answer in the real env."""
    env.reset(seed=0, options={"task_id": task_id})
    for agent in env.agent_iter():
        env.step(answers[agent])
        if env.unwrapped.turn >= 1 or not env.agents:
            break
    score = env.unwrapped.history[-1].score
    return score.total, score.passed, score.n_tests, not env.agents or all(env.terminations.values())


def menu_behaves(env: Any, problem: CodeProblem, variant: str) -> bool:
    """The labels hold in the sandbox: oracle 4.0 and solo 2.5 end the episode; the draft and the stub
    with coop run the (>= 3) tests and fail every one (setup) / some (partial) of them."""
    m = menus(problem, variant)
    h, main = m["helper"], m["main"]["turn1"]
    oracle = turn1_score(env, {"helper": h["turn2/informed"][0], "main": main[0]}, problem.task_id)
    solo = turn1_score(env, {"helper": h["turn1"][0], "main": main[1]}, problem.task_id)
    draft = turn1_score(env, {"helper": h["turn1"][0], "main": main[0]}, problem.task_id)
    stub = turn1_score(env, {"helper": h["turn1"][1], "main": main[0]}, problem.task_id)
    draft_ok = draft[1] == 0 if variant == "setup" else 0 < draft[1] < draft[2]
    return (draft[2] >= 3 and oracle[0] == MAX_SCORE and oracle[3] and solo[0] == 2.5 and solo[3] and draft_ok and not draft[3]
            and stub[1] == 0 and not stub[3])


def choose_problems(n: int) -> list[CodeProblem]:
    """The first ``n`` HumanEval problems whose menus behave as labelled in both variants."""
    chosen: list[CodeProblem] = []
    for p in load_humaneval():
        if not p.reference_program:
            continue
        env = llm_marl_envs.make("code/helper_main_v0", problems=[p], max_turns=2, feedback="full")
        if all(menu_behaves(env, p, v) for v in VARIANTS):
            chosen.append(p)
            if len(chosen) == n:
                return chosen
    raise RuntimeError(f"only {len(chosen)} HumanEval problems have well-behaved menus")


def turn1_view(table: SampleTable, gamma_a: float, gamma_b: float) -> dict[str, float]:
    """On the turn-1 rows of one real tree table: the team return and how much gamma changes the signal.

    ``team_return``: mean over turn-1 joint actions of the return-to-go with gamma 1 (with the
    per-turn delta reward: the final score of a node that ended the episode, else the mean final
    score of its children) -- the expected final score of the sampled policy.
    ``rank_flip``: fraction of turn-1 groups in which two joint actions are ranked in opposite
    orders by the return-to-go with ``gamma_a`` and with ``gamma_b`` (the two agents' groups of
    one node hold the same values, so main's are counted); ``best_flip``: fraction in which no
    joint action is a best one under both. ``ended_turn1``: fraction of turn-1 joint actions
    that ended the episode.
    """
    rows = np.flatnonzero((table.depth == 0) & (table.agent == "main"))
    r_a, r_b, r_1 = (magrpo_returns(table, g)[rows] for g in (gamma_a, gamma_b, 1.0))
    groups, n = group_index(table.task[rows], sibling_key(table)[rows])
    flips, best = [], []
    for g in range(n):
        a, b = r_a[groups == g], r_b[groups == g]
        da, db = a[:, None] - a[None, :], b[:, None] - b[None, :]
        flips.append(bool(np.any(da * db < -1e-9)))
        best.append(not np.any((a >= a.max() - 1e-9) & (b >= b.max() - 1e-9)))
    children = {(t, e, p) for t, e, p in zip(table.task, table.episode, table.parent) if p >= 0}
    ended = [(t, e, nd) not in children for t, e, nd in zip(table.task[rows], table.episode[rows], table.node[rows])]
    return {"team_return": float(np.mean(r_1)), "rank_flip": float(np.mean(flips)),
            "best_flip": float(np.mean(best)), "ended_turn1": float(np.mean(ended))}


def probabilities(policy: MenuPolicy) -> dict[str, float]:
    """``p/<agent>/<state>/<entry>`` for every agent, state and menu entry."""
    return {f"p/{agent}/{state}/{name}": float(p)
            for agent, names in OPTIONS.items() for state in STATES
            for name, p in zip(names, policy.probs(agent, state))}


def train(variant: str, gamma: float, problems: list[CodeProblem], seed: int, steps: int, tasks: int, k: int,
          lr: float) -> Run:
    """One run: ``steps`` MAGRPO trees (``tasks`` problems each, G = ``k`` joint actions per node, 2 turns)."""
    texts = {p.task_id: menus(p, variant) for p in problems}
    rng = np.random.default_rng(seed)
    backend = MenuBackend(MenuPolicy(OPTIONS), texts, feedback_state, rng)
    pool = EnvPool(lambda: llm_marl_envs.make("code/helper_main_v0", problems=problems, max_turns=2,
                                              feedback="full"))
    start, metrics = time.perf_counter(), []
    for _ in range(steps):
        batch = [Task(int(s)) for s in rng.integers(0, 2**31 - 1, size=tasks)]
        table = sample("joint_tree", pool, batch, backend, group_size=k, tree_depth=2, gamma=gamma).table
        adv = compute_advantages(table, "magrpo", AdvantageConfig(gamma=gamma, expected_group_size=k)).advantages
        metrics.append({**turn1_view(table, 0.0, 0.9), **probabilities(backend.policy), "rows": float(len(table))})
        backend.update(table, adv, lr)
    final = float(np.mean([m["team_return"] for m in metrics[-5:]]))
    return Run(f"{variant} gamma {gamma:g}", seed, metrics, final, time.perf_counter() - start,
               extra=probabilities(backend.policy))


def report(runs: list[Run], labels: list[str]) -> str:
    """The markdown table of the module docstring, one row per (variant, gamma)."""
    rows = []
    for label in labels:
        mine = [r for r in runs if r.label == label]
        reach = [first_step_at(r.series("team_return"), 0.9 * MAX_SCORE) for r in mine]

        def p(key: str, mine: list[Run] = mine) -> str:
            return spread([r.extra[f"p/{key}"] for r in mine], ".2f")

        rows.append([label, spread([r.final_eval for r in mine]),
                     " / ".join("never" if x == float("inf") else f"{x:.0f}" for x in reach),
                     p("main/turn1/coop"), p("main/turn1/solo"), p("helper/turn1/draft|repair"),
                     p("helper/turn2/informed/draft|repair"), p("main/turn2/informed/coop"),
                     spread([np.mean(r.series("ended_turn1")[-5:]) for r in mine], ".2f"),
                     spread([np.mean(r.series("rank_flip")) for r in mine], ".2f"),
                     spread([np.mean(r.series("best_flip")) for r in mine], ".2f"),
                     spread([r.seconds for r in mine], ".0f")])
    return markdown_table(["variant, gamma", "team return (last 5 steps, max 4)", "step reaching 3.6 (per seed)",
                           "main P(coop) turn 1", "main P(solo) turn 1", "helper P(draft) turn 1",
                           "helper P(repair) turn 2 informed", "main P(coop) turn 2 informed",
                           "turn-1 nodes ending the episode (last 5)",
                           "turn-1 groups ranked differently by gamma 0 / 0.9",
                           "turn-1 groups whose best joint action differs", "seconds"], rows)


def main(argv: list[str] | None = None) -> list[Run]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    ap.add_argument("--gammas", nargs="+", type=float, default=[0.0, 0.9])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--tasks", type=int, default=3, help="problems (trees) per step")
    ap.add_argument("--k", type=int, default=4, help="G: joint actions per node")
    ap.add_argument("--problems", type=int, default=8, help="HumanEval problems in the pool")
    ap.add_argument("--lr", type=float, default=6.0, help="logit step size")
    ap.add_argument("--plot", type=Path, default=None)
    add_run_io_args(ap)
    args = ap.parse_args(argv)
    runs, labels = runs_to_report(args)
    if not args.load:
        problems = choose_problems(args.problems)
        print("problems: " + ", ".join(p.task_id for p in problems), flush=True)
        for variant in args.variants:
            for gamma in args.gammas:
                for seed in args.seeds:
                    run = train(variant, gamma, problems, seed, args.steps, args.tasks, args.k, args.lr)
                    runs.append(run)
                    if args.save:
                        save_runs(runs, args.save)
                    print(f"{run.label} seed {seed}: team return (last 5) {run.final_eval:.3f}, "
                          f"P(coop) turn 1 {run.extra['p/main/turn1/coop']:.2f}, {run.seconds:.0f}s", flush=True)
        labels = list(dict.fromkeys(r.label for r in runs))
    print(f"helper/main, 2 turns with full feedback, MAGRPO joint tree G={args.k}, {args.tasks} problems per step, "
          f"{len(args.seeds)} seeds x {args.steps} steps")
    print(report(runs, labels))
    if args.plot:
        panels = [("team_return", "team return (expected final score)"), ("p/main/turn1/coop", "main P(coop), turn 1"),
                  ("p/helper/turn2/informed/draft|repair", "helper P(repair), turn 2 informed"),
                  ("ended_turn1", "turn-1 nodes ending the episode")]
        print(f"plot: {plot_panels(runs, panels, args.plot, title='MAGRPO return-to-go, helper/main with feedback')}")
    return runs


if __name__ == "__main__":
    main()
