"""Command line: ``python -m baselines.train`` (no arguments = the embedded default run).

    python -m baselines.train                                  # tiny model learns the signal game on CPU
    python -m baselines.train --env toy/signal_game_v0 --scheme dr_mas --steps 80
    python -m baselines.train --config baselines/configs/signal_game.yaml optim.lr=1e-3 rollout.group_size=16
    python -m baselines.train --model Qwen/Qwen2.5-0.5B-Instruct --device cuda --env code/helper_main_v0 \\
        --scheme magrpo generation.max_new_tokens=256 model.sharing=lora
    python -m baselines.train --config baselines/configs/helper_main_magrpo_smollm2.yaml   # real model, CPU
    python -m baselines.train --resume runs/<run>                 # exact resume from the latest checkpoint
    python -m baselines.train --import my_tasks.sum_game_v0 --env toy/sum_game_v0   # a task of your own
    torchrun --nproc_per_node 2 -m baselines.train ...             # data parallel (docs/scaling.md)

Flags override the YAML file; ``key=value`` overrides (dotted keys, YAML values) override both.
Outputs in the run folder: ``config.yaml``, ``metrics.jsonl``, ``tb/`` (TensorBoard),
``checkpoints/``, ``team/`` (trained weights), ``curves.png`` (reward and per-agent gradient norms);
``samples/`` (a bounded sample of episodes; every step's with ``log.save_samples=true``) and ``report.html``
(:mod:`baselines.report`; ``--no-report``: not written).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from baselines.checkpoint import load_checkpoint
from baselines.config import TrainConfig, from_dict, load_config

if TYPE_CHECKING:
    from baselines.distributed import DistContext


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m baselines.train", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Config keys: see docs/training.md or baselines/config_sections.py.")
    p.add_argument("overrides", nargs="*", help="key=value overrides, e.g. optim.lr=1e-3 rollout.group_size=8")
    p.add_argument("--config", help="YAML config file")
    p.add_argument("--env", help="registered environment name, e.g. toy/signal_game_v0")
    p.add_argument("--scheme", help="grpo | dr_mas | magrpo | at_grpo | mars2 | sharp")
    p.add_argument("--model", help="model preset (smollm2-135m-instruct), local path or hub id "
                                    "(default: a tiny model built locally)")
    p.add_argument("--sharing", choices=["shared", "lora", "single_model", "separate"],
                   help="model.sharing: one model, one LoRA adapter per agent, ONE adapter for every agent "
                        "(the single-model baseline), or one model per agent")
    p.add_argument("--agent-model", action="append", default=[], metavar="AGENT=MODEL",
                   help="AGENT's own model (repeatable; model.agents.AGENT.path; the team becomes one model per "
                        "agent, model.sharing=separate)")
    p.add_argument("--agent-device", action="append", default=[], metavar="AGENT=DEVICE",
                   help="AGENT's model on its own device, e.g. listener=cuda:1 (repeatable; model.agents.AGENT.device, "
                        "model.sharing=separate)")
    p.add_argument("--steps", type=int, help="optimizer steps")
    p.add_argument("--seed", type=int)
    p.add_argument("--device", help="cpu, cuda, cuda:1 ...")
    p.add_argument("--out", help="output folder for runs (log.out_dir)")
    p.add_argument("--name", help="run folder name (log.run_name)")
    p.add_argument("--resume", help="checkpoint file or run folder to resume from (its config is reused)")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE first (it registers your task); repeatable")
    p.add_argument("--eval-episodes", type=_positive_int, default=256, help="episodes of the final evaluation")
    p.add_argument("--no-eval", action="store_true", help="skip the final evaluation")
    p.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    p.add_argument("--report", action=argparse.BooleanOptionalAction, default=True,
                   help="write <run>/report.html at the end and print its path (default; python -m baselines.report): "
                        "a bounded sample of episodes (log.sample_steps, log.sample_episodes), every step's with "
                        "log.save_samples=true")
    return p


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value} (use --no-eval to skip the final evaluation)")
    return value


def import_modules(modules: list[str]) -> None:
    """Import the ``--import`` modules (they register tasks); a missing one is a clear error."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            raise SystemExit(f"--import {name}: {exc} (is it installed, or on PYTHONPATH?)") from exc


def resolve_config(args: argparse.Namespace) -> TrainConfig:
    base: dict = {}
    for flag, key in (("scheme", "scheme"), ("steps", "steps"), ("seed", "seed"), ("device", "device")):
        if getattr(args, flag) is not None:
            base[key] = getattr(args, flag)
    if args.env is not None:
        base["env"] = {"name": args.env}
    if args.model is not None:
        base.setdefault("model", {})["path"] = args.model
    if args.sharing is not None:
        base.setdefault("model", {})["sharing"] = args.sharing
    for flag, key in ((args.agent_model, "path"), (args.agent_device, "device")):
        for agent, value in _agent_pairs(flag, "--agent-" + ("model" if key == "path" else "device")).items():
            model = base.setdefault("model", {})
            model.setdefault("agents", {}).setdefault(agent, {})[key] = value
            model.setdefault("sharing", "separate")
    if args.out is not None:
        base.setdefault("log", {})["out_dir"] = args.out
    if args.name is not None:
        base.setdefault("log", {})["run_name"] = args.name
    return load_config(args.config, args.overrides, base=base)


def _agent_pairs(items: list[str], flag: str) -> dict[str, str]:
    """``["speaker=./a"]`` -> ``{"speaker": "./a"}``; anything but AGENT=VALUE is an error."""
    bad = [item for item in items if "=" not in item or not item.split("=", 1)[0] or not item.split("=", 1)[1]]
    if bad:
        raise SystemExit(f"{flag} takes AGENT=VALUE, got {bad}")
    return dict(item.split("=", 1) for item in items)


def main(argv: list[str] | None = None) -> dict:
    args = build_parser().parse_intermixed_args(argv)  # key=value overrides may come anywhere
    import_modules(args.imports)
    from baselines.distributed import DistContext  # heavy imports after argument errors

    if args.print_config:
        import yaml

        print(yaml.safe_dump(resolve_config(args).to_dict(), sort_keys=False))
        return {}
    config = from_dict(TrainConfig, load_checkpoint(args.resume)["config"]) if args.resume else resolve_config(args)
    dist = DistContext.from_env(config.device)  # one process unless launched by torchrun / accelerate launch
    try:
        out = _run(args, config, dist)
        if args.report and dist.is_main:
            from baselines.report import write_report

            out["report"] = str(write_report(out["run_dir"]))
            print(f"report: {out['report']}", flush=True)
        return out
    finally:
        dist.close()


def _run(args: argparse.Namespace, config: TrainConfig, dist: DistContext) -> dict:
    from baselines.trainer import Trainer

    eval_episodes = 0 if args.no_eval else args.eval_episodes
    if dist.active and config.device.startswith("cuda") and ":" not in config.device:
        config.device = f"cuda:{dist.local_rank}"  # one GPU per rank
    if args.resume:
        if args.steps is not None:
            config.steps = args.steps
        run_dir = Path(args.resume)
        run_dir = run_dir.parent.parent if run_dir.is_file() else (run_dir.parent if run_dir.name == "checkpoints"
                                                                     else run_dir)
        trainer = Trainer(config, run_dir, dist=dist)
        return trainer.fit(resume=args.resume, eval_episodes=eval_episodes)
    trainer = Trainer(config, dist=dist)
    if dist.is_main:
        print(f"run folder: {trainer.run_dir}  ({config.scheme} on {config.env.name}, rollout {trainer.mode}, "
              f"{config.steps} steps, {dist.world_size} rank(s))", flush=True)
    return trainer.fit(eval_episodes=eval_episodes)


if __name__ == "__main__":
    main(sys.argv[1:])
