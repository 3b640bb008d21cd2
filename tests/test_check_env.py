"""``check_env`` catches what the issue listed: leaks, untrainable tasks, noisy output."""

from __future__ import annotations

import sys
import types

import pytest

from llm_marl_envs import EnvSpec
from llm_marl_envs.core import make_env_fn, make_parallel_env_fn
from llm_marl_envs.testing import check_env, check_no_leaks, check_trainable
from llm_marl_envs.toy import signal_game_v0


class _SecretTarget(signal_game_v0.raw_env):
    """The signal game declaring the target as the listener's secret."""

    def secrets(self, agent):
        return (f"target: {self.target}",) if agent == "listener" else ()


class _Leaky(_SecretTarget):
    """... and leaking it to the listener."""

    def _begin_turn(self):
        super()._begin_turn()
        self.tell("listener", f"target: {self.target}")


def _module(name: str, cls: type, with_random: bool = True) -> EnvSpec:
    module = types.ModuleType(name)
    module.raw_env, module.env, module.parallel_env = cls, make_env_fn(cls), make_parallel_env_fn(cls)
    module.best_policy = signal_game_v0.best_policy
    if with_random:
        module.random_policy = signal_game_v0.random_policy
    sys.modules[name] = module
    return EnvSpec(f"toy/{name}_v0", name, "test task")


@pytest.fixture
def specs():
    made = {"honest": _module("honest_task", _SecretTarget), "leaky": _module("leaky_task", _Leaky),
            "no_random": _module("no_random_task", signal_game_v0.raw_env, with_random=False)}
    yield made
    for name in ("honest_task", "leaky_task", "no_random_task"):
        sys.modules.pop(name, None)


def test_leak_of_a_secret_is_caught(specs):
    check_no_leaks(specs["honest"])
    with pytest.raises(AssertionError, match="leaks a secret"):
        check_no_leaks(specs["leaky"])


def test_missing_random_policy_makes_a_task_untrainable(specs):
    with pytest.raises(AssertionError, match="random_policy"):
        check_trainable(specs["no_random"])
    with pytest.raises(AssertionError, match="check 'trainable' failed"):
        check_env(specs["no_random"], verbose=False)


def test_check_env_prints_only_a_summary(specs, capsys):
    timings = check_env(specs["honest"])
    out = capsys.readouterr().out
    assert len(out.splitlines()) == len(timings) + 1 and "all 18 checks passed" in out
    assert "[turn" not in out  # no transcript, no PettingZoo chatter
