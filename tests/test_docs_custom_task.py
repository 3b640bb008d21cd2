"""Runs the code of docs/custom_task.md: the guide's task must build, register and comply."""

from __future__ import annotations

import importlib.util
import re
import sys
import warnings
from pathlib import Path

import llm_marl_envs
from llm_marl_envs.testing import check_env, play_episode

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "custom_task.md"


def test_guide_task_is_short_registers_and_passes_compliance(tmp_path, monkeypatch):
    code = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)[0]
    assert len(code.strip().splitlines()) < 60
    package = tmp_path / "my_tasks"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "sum_game_v0.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        importlib.import_module("my_tasks.sum_game_v0")
        assert "toy/sum_game_v0" in llm_marl_envs.list_envs()
        env = llm_marl_envs.make("toy/sum_game_v0")
        module = sys.modules["my_tasks.sum_game_v0"]
        assert play_episode(env, module.best_policy, seed=4) == 1.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check_env("toy/sum_game_v0")
    finally:
        if "toy/sum_game_v0" in llm_marl_envs.list_envs():
            llm_marl_envs.registry.unregister("toy/sum_game_v0")
        for name in ("my_tasks.sum_game_v0", "my_tasks"):
            sys.modules.pop(name, None)
