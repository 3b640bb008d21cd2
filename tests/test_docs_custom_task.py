"""Runs docs/custom_task.md: the guide's task builds, registers, complies, and trains from the CLI."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import yaml

import llm_marl_envs
from llm_marl_envs.testing import play_episode

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "custom_task.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", GUIDE.read_text(), re.S)


def _write_package(tmp_path: Path) -> None:
    package = tmp_path / "my_tasks"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "sum_game_v0.py").write_text(_blocks("python")[0])


def test_guide_task_is_short_registers_and_passes_compliance(tmp_path, monkeypatch, capsys):
    code, usage = _blocks("python")[:2]
    assert len(code.strip().splitlines()) < 60
    _write_package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(usage, "custom_task.md (usage)", "exec"), {})  # imports, makes, runs check_env
        assert "all 18 checks passed" in capsys.readouterr().out
        module = sys.modules["my_tasks.sum_game_v0"]
        env = llm_marl_envs.make("toy/sum_game_v0")
        assert play_episode(env, module.best_policy, seed=4) == 1.0
    finally:
        if "toy/sum_game_v0" in llm_marl_envs.registry.specs():
            llm_marl_envs.registry.unregister("toy/sum_game_v0")
        for name in ("my_tasks.sum_game_v0", "my_tasks"):
            sys.modules.pop(name, None)


def test_guide_cli_training_runs_as_written(tmp_path):
    """The guide's last block, run verbatim by bash in the folder holding ``my_tasks/``."""
    _write_package(tmp_path)
    command = _blocks("bash")[-1]
    assert command.lstrip().startswith("python -m baselines.train --import my_tasks.sum_game_v0")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(ROOT)}  # this checkout's baselines (the user's would be installed)
    done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    run = tmp_path / "runs" / "sum_game"
    assert yaml.safe_load((run / "config.yaml").read_text())["env"]["name"] == "toy/sum_game_v0"
    assert (run / "metrics.jsonl").read_text().strip() and (run / "team" / "team.json").is_file()
    assert "final reward" in done.stdout
