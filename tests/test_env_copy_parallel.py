"""Cycle schedule, parallel API, max_cycles, pickle/deepcopy at any point, clone() keeping wrappers."""

from __future__ import annotations

import copy
import pickle

import pytest
from pettingzoo.utils import BaseParallelWrapper, BaseWrapper, OrderEnforcingWrapper

import llm_marl_envs
from llm_marl_envs.core.parallel import MissingActionError, UnknownAgentError
from llm_marl_envs.testing import play_episode
from llm_marl_envs.toy import signal_game_v0


def test_max_cycles_truncates_and_every_agent_steps_each_cycle():
    env = signal_game_v0.env(max_cycles=3)
    env.reset(seed=0)
    counts = {a: 0 for a in env.possible_agents}
    for agent in env.agent_iter():
        counts[agent] += 1
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else "apple")
    assert counts == {"speaker": 4, "listener": 4}  # 3 cycles + the dead step
    assert env.unwrapped.record.truncated and env.unwrapped.cycles == 3


def test_max_cycles_conflicting_with_horizon_is_a_clear_error():
    with pytest.raises(ValueError, match="do not pass both"):
        signal_game_v0.env(max_cycles=3, n_rounds=2)
    with pytest.raises(ValueError, match="max_cycles must be"):
        signal_game_v0.env(max_cycles=0)


def test_parallel_step_missing_or_unknown_agent_is_typed():
    par = signal_game_v0.parallel_env()
    par.reset(seed=0)
    with pytest.raises(MissingActionError, match="speaker"):
        par.step({"listener": "x"})
    with pytest.raises(UnknownAgentError, match="ghost"):
        par.step({"speaker": "x", "listener": "x", "ghost": "x"})
    with pytest.raises(TypeError, match="dict"):
        par.step(["x", "y"])
    par.step({"speaker": "x"})  # a non-acting agent's action may be left out


def test_parallel_rewards_sum_to_the_episode_return():
    par = signal_game_v0.parallel_env(n_rounds=2)
    _, infos = par.reset(seed=1)
    total = 0.0
    while par.agents:
        actions = {a: signal_game_v0.best_policy(par.aec_env, a) if infos[a]["acting"] else "" for a in par.agents}
        _, rewards, _, _, infos = par.step(actions)
        total += rewards["speaker"]
    assert total == par.unwrapped.record.total_reward == 2.0


@pytest.mark.parametrize("name", ["code/tree_search_v0", "code/helper_main_v0"])
def test_code_tasks_pickle_and_deepcopy_after_the_sandbox_ran(name):
    spec = llm_marl_envs.spec(name)
    module = spec.load()
    env = spec.make(**spec.test_kwargs)
    play_episode(env, module.best_policy, seed=0)
    env.reset(seed=2)
    env.step(module.best_policy(env, env.agent_selection))  # mid-episode, after a sandbox run
    restored = pickle.loads(pickle.dumps(env))
    twin = copy.deepcopy(env)
    assert "sandbox" not in vars(restored.unwrapped) or name != "code/tree_search_v0"  # detached until used
    for e in (restored, twin, env):
        for agent in e.agent_iter():
            _, _, term, trunc, _ = e.last()
            e.step(None if term or trunc else module.best_policy(e, agent))
    assert restored.unwrapped.record.total_reward == twin.unwrapped.record.total_reward
    assert twin.unwrapped.record.total_reward == env.unwrapped.record.total_reward


class UserWrapper(BaseWrapper):
    """A user's own wrapper, outside ours."""


def test_clone_keeps_every_outer_wrapper():
    env = UserWrapper(OrderEnforcingWrapper(signal_game_v0.env()))
    env.reset(seed=0)
    clone = env.clone()
    assert type(clone) is UserWrapper and type(clone.env) is OrderEnforcingWrapper
    assert clone.unwrapped is not env.unwrapped
    clone.step("apple")
    assert env.agent_selection == "speaker" and clone.agent_selection == "listener"
    assert type(copy.deepcopy(env).env) is OrderEnforcingWrapper


def test_bad_inputs_get_typed_errors():
    with pytest.raises(TypeError, match="n_rounds must be int"):
        signal_game_v0.env(n_rounds="3")
    with pytest.raises(TypeError, match="unknown argument"):
        signal_game_v0.env(n_round=3)
    with pytest.raises(ValueError, match="must be <= 0"):
        signal_game_v0.env(format_penalty=0.5)
    env = signal_game_v0.env()
    with pytest.raises(TypeError, match="seed must be"):
        env.reset(seed="abc")


class UserParallelWrapper(BaseParallelWrapper):
    """A user's own parallel wrapper."""


def test_parallel_clone_keeps_wrappers():
    import supersuit as ss

    par = UserParallelWrapper(signal_game_v0.parallel_env(n_rounds=2))
    par.reset(seed=0)
    clone = par.clone()
    assert type(clone) is UserParallelWrapper and clone.unwrapped is not par.unwrapped
    clone.step({"speaker": "apple", "listener": ""})
    assert par.unwrapped.record.steps == [] and len(clone.unwrapped.record.steps) == 1
    # wrappers that convert (parallel -> AEC -> parallel) do not forward attributes: deepcopy copies them all
    converted = ss.reward_lambda_v0(signal_game_v0.parallel_env(n_rounds=2), lambda r: 10 * r)
    converted.reset(seed=0)
    twin = copy.deepcopy(converted)
    assert type(twin) is type(converted) and twin.unwrapped is not converted.unwrapped
