"""Plugin tasks: entry points, ``module:name`` names, ``register`` checks, ``baselines.train --import``."""

from __future__ import annotations

import sys

import pytest

import llm_marl_envs
from llm_marl_envs import EnvSpec, UnknownEnvironmentError
from llm_marl_envs.registry import Registry

TASK = '''
from llm_marl_envs import EnvSpec, register
from llm_marl_envs.toy.signal_game_v0 import raw_env, env, best_policy, random_policy

register(EnvSpec("{name}", __name__, "a plugin copy of the signal game"))
'''


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    created: list[str] = []

    def write(module: str, name: str) -> None:
        (tmp_path / f"{module}.py").write_text(TASK.format(name=name))
        created.append(module)

    yield tmp_path, write
    for module in created:
        sys.modules.pop(module, None)
    for name in ("plug/ep_task_v0", "plug/colon_task_v0"):
        if name in llm_marl_envs.registry.specs():
            llm_marl_envs.registry.unregister(name)


def test_entry_point_group_loads_an_installed_plugin(plugin_dir):
    path, write = plugin_dir
    write("ep_plugin_mod", "plug/ep_task_v0")
    dist = path / "ep_plugin-0.1.dist-info"  # what pip writes for an installed package
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[llm_marl_envs.tasks]\nep_task = ep_plugin_mod\n")
    # a fresh registry reading the group (the suite's registry read it once, at collection)
    reg = Registry(entry_point_group="llm_marl_envs.tasks")
    assert "ep_plugin_mod" not in sys.modules
    with pytest.raises(UnknownEnvironmentError):
        reg.spec("plug/nothing_v0")  # a miss loads the plugins...
    assert "ep_plugin_mod" in sys.modules  # ...which imported the module: it registered its task
    assert "plug/ep_task_v0" in llm_marl_envs.list_envs() and not reg.plugin_errors
    env = llm_marl_envs.make("plug/ep_task_v0")
    env.reset(seed=0)
    assert env.agent_selection == "speaker"


def test_module_colon_name_imports_then_makes(plugin_dir):
    _, write = plugin_dir
    write("colon_plugin_mod", "plug/colon_task_v0")
    env = llm_marl_envs.make("colon_plugin_mod:plug/colon_task_v0", n_rounds=2)
    assert env.unwrapped.n_rounds == 2
    with pytest.raises(UnknownEnvironmentError, match="cannot import 'no_such_mod_xyz'"):
        llm_marl_envs.make("no_such_mod_xyz:plug/x_v0")


def test_unknown_name_explains_how_to_bring_a_task():
    with pytest.raises(KeyError, match="--import"):
        llm_marl_envs.make("my/task_v0")


def test_register_refuses_a_module_that_does_not_exist():
    with pytest.raises(ModuleNotFoundError, match="no_such_pkg.task_v0"):
        Registry().register(EnvSpec("my/task_v0", "no_such_pkg.task_v0", "missing"))
    with pytest.raises(TypeError, match="EnvSpec"):
        Registry().register("my/task_v0")  # type: ignore[arg-type]


def test_train_cli_typed_errors(capsys):
    from baselines.train import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--eval-episodes", "0", "--print-config"])
    assert exit_info.value.code == 2 and "--no-eval" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="--import no_such_mod_xyz"):
        main(["--import", "no_such_mod_xyz", "--print-config"])
