"""Command line: ``python -m baselines.evaluate`` -- score a team of LLMs on a task, held out.

    python -m baselines.evaluate --env code/helper_main_v0 --model smollm2-135m-instruct --episodes 20 --samples 4
    python -m baselines.evaluate --env all --model smollm2-135m-instruct --episodes 5 --out evals/zero_shot
    python -m baselines.evaluate --env search/planner_worker_v0 --model smollm2-135m-instruct \\
        --agent-model planner=runs/<run>/export/planner --kw n_workers=2
    python -m baselines.evaluate --env code/helper_main_v0 --team runs/<run>/team    # a trained team

Prints a markdown table (mean joint return with a 95% interval over tasks, avg@k and pass@k,
the scripted oracle's return on the same tasks, per-agent format-error rates, reward
components) and, with ``--out DIR``, writes ``DIR/<env>.transcripts.jsonl`` (one episode per
line: every prompt, action, format issue and reward) and ``DIR/<env>.summary.json``; ``--report`` adds
``DIR/report.html`` (:mod:`baselines.report`).
Held-out by default: held-out task seeds, and a task's ``split="eval"`` problems when it has a
split (``--split train`` or ``--split all`` evaluates on training problems, on request only).
See :mod:`baselines.evaluate_core` for the exact definitions.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

import llm_marl_envs


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m baselines.evaluate", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", required=True, help="registered task name, or 'all' for every registered task")
    p.add_argument("--model", help="model preset (e.g. smollm2-135m-instruct), local folder or hub id")
    p.add_argument("--agent-model", action="append", default=[], metavar="AGENT=MODEL",
                   help="a different model for one agent (repeatable; the team becomes one model per agent)")
    p.add_argument("--team", help="folder of a trained team saved by the trainer (runs/<run>/team)")
    p.add_argument("--episodes", type=int, default=20, help="held-out task instances")
    p.add_argument("--samples", type=int, default=1, help="k sampled episodes per task (avg@k, pass@k)")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=0.7, help="0 = greedy")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=12_345, help="seed of the held-out task draw and of sampling")
    p.add_argument("--split", default="eval", choices=["eval", "train", "all"],
                   help="problem split for tasks that have one (default: the held-out eval split)")
    p.add_argument("--kw", action="append", default=[], metavar="KEY=VALUE",
                   help="task keyword argument, YAML value (repeatable), e.g. --kw max_turns=2")
    p.add_argument("--test-kwargs", action="store_true", help="start from the registry's small test settings")
    p.add_argument("--batch-tasks", type=int, default=8, help="tasks played in lock-step per batch")
    p.add_argument("--max-batch-size", type=int, default=0, help="max sequences per generate call (0 = all)")
    p.add_argument("--decode", default="fast", choices=["fast", "generate"],
                   help="the backend's decoding: the lean loop (default) or model.generate")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    p.add_argument("--out", help="folder for transcripts (JSONL) and summaries (JSON)")
    p.add_argument("--report", action="store_true", help="also write OUT/report.html (needs --out; "
                   "python -m baselines.report)")
    p.add_argument("--no-progress", action="store_true")
    return p


def parse_kwargs(items: list[str]) -> dict[str, Any]:
    """``["max_turns=2", "dataset=humaneval"]`` -> ``{"max_turns": 2, "dataset": "humaneval"}``."""
    out = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"task keyword arguments look like key=value, got {item!r}")
        out[key.strip()] = yaml.safe_load(raw) if raw.strip() else ""
    return out


def build_team(args: argparse.Namespace, agents: list[str]) -> Any:
    """The team the arguments describe: a trained team folder, one shared model, or per-agent models."""
    from baselines.policies import Team, TeamConfig

    if args.team:
        return Team.load(args.team, device=args.device)
    overrides = dict(item.split("=", 1) for item in args.agent_model if "=" in item)
    bad = [item for item in args.agent_model if "=" not in item]
    if bad:
        raise ValueError(f"--agent-model takes AGENT=MODEL, got {bad}")
    unknown = sorted(set(overrides) - set(agents))
    if unknown:
        raise ValueError(f"--agent-model names unknown agents {unknown}; this task's agents: {agents}")
    if not args.model and set(overrides) != set(agents):
        raise ValueError("give --model (or --team), or an --agent-model for every agent")
    if overrides:
        return Team.from_config(TeamConfig(mode="separate", model=args.model, models=overrides,
                                           dtype=args.dtype, device=args.device), agents)
    return Team.from_config(TeamConfig(mode="shared", model=args.model, dtype=args.dtype, device=args.device),
                            agents)


def markdown(report: Any) -> str:
    """The report as markdown tables (headline, per agent)."""
    k = report.samples
    ci = "n/a" if report.ci95 != report.ci95 else f"{report.ci95:.3f}"
    lines = [
        f"### {report.env}", "",
        f"| tasks x k | mean joint return | 95% CI (+/-) | avg@{k} | pass@{k} | oracle return | infra-excluded | time |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {report.tasks} x {k} | {report.mean_return:.3f} | {ci} | {report.avg_at_k:.3f} | {report.pass_at_k:.3f} "
        f"| {report.oracle_return:.3f} | {report.infra_excluded} | {report.seconds:.0f} s |", "",
        "| agent | steps | format-error rate | empty | mean action chars | issue kinds |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for agent, s in report.agents.items():
        kinds = ", ".join(f"{kind} ({n})" for kind, n in sorted(s.issue_kinds.items(), key=lambda x: -x[1])[:4])
        lines.append(f"| {agent} | {s.steps} | {s.format_error_rate:.2f} | {s.empty} | {s.completion_chars:.0f} "
                     f"| {kinds or '-'} |")
    if report.components:
        lines += ["", "| reward component | mean per turn |", "| --- | --- |"]
        lines += [f"| {k} | {v:.3f} |" for k, v in report.components.items()]
    return "\n".join(lines) + "\n"


def write_outputs(report: Any, out: Path) -> tuple[Path, Path]:
    """``<env>.transcripts.jsonl`` and ``<env>.summary.json`` under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    stem = report.env.replace("/", "_")
    tpath, spath = out / f"{stem}.transcripts.jsonl", out / f"{stem}.summary.json"
    with tpath.open("w", encoding="utf-8") as f:
        for t in report.transcripts:
            f.write(json.dumps(t, default=float) + "\n")
    summary = {**report.summary(), "env_kwargs": report.env_kwargs,
               "issue_kinds": {a: s.issue_kinds for a, s in report.agents.items()}}
    spath.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    return tpath, spath


def evaluate_env(args: argparse.Namespace, env_name: str) -> Any:
    """Build the team for ``env_name``'s agents and evaluate it; returns the report."""
    from tqdm.auto import tqdm

    from baselines.evaluate_core import evaluate_team, held_out_kwargs
    from baselines.generation import GenerationConfig, TransformersBackend

    spec = llm_marl_envs.spec(env_name)
    kwargs = {**(dict(spec.test_kwargs) if args.test_kwargs else {}), **parse_kwargs(args.kw)}
    if args.test_kwargs and args.split != "eval":
        kwargs.pop("split", None)
    kwargs = held_out_kwargs(env_name, kwargs, None if args.split == "all" else args.split)
    env = spec.make(**kwargs)
    agents = list(env.unwrapped.possible_agents)
    env.close()
    team = build_team(args, agents)
    gen = GenerationConfig(max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p,
                           seed=args.seed)
    backend = TransformersBackend(team, gen, max_batch_size=args.max_batch_size or None,
                                  decode=args.decode)
    with tqdm(total=args.episodes, desc=env_name, disable=args.no_progress, unit="task", file=sys.stderr) as bar:
        import torch

        with torch.no_grad():
            return evaluate_team(backend, env_name, kwargs, episodes=args.episodes, samples=args.samples,
                                 seed=args.seed, tasks_per_batch=args.batch_tasks, progress=bar.update)


def main(argv: list[str] | None = None) -> list[Any]:
    args = build_parser().parse_args(argv)
    if not (args.model or args.team or args.agent_model):
        build_parser().error("give --model, --agent-model or --team")
    if args.report and not args.out:
        build_parser().error("--report writes OUT/report.html: give --out too")
    if args.episodes < 1 or args.samples < 1:
        build_parser().error("--episodes and --samples must be >= 1")
    names = llm_marl_envs.list_envs() if args.env == "all" else [args.env]
    for name in names:
        llm_marl_envs.spec(name)  # unknown names fail before any model is loaded
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    reports = []
    for name in names:
        report = evaluate_env(args, name)
        reports.append(report)
        print(markdown(report), flush=True)
        if args.out:
            tpath, spath = write_outputs(report, Path(args.out))
            print(f"transcripts: {tpath}\nsummary: {spath}\n", flush=True)
    if args.report:
        from baselines.report import write_report

        print(f"report: {write_report(args.out)}", flush=True)
    return reports


if __name__ == "__main__":
    main(sys.argv[1:])
