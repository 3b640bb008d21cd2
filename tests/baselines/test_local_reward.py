"""AT-GRPO's local reward: only the components a task declares local, never a raw tool-call count."""

from __future__ import annotations

import pytest

from baselines.rollout.common import agent_components, local_reward
from llm_marl_envs.search import planner_worker_v0 as pw
from llm_marl_envs.toy import signal_game_v0


def _drive(env, actions):
    env.reset(seed=0, options={"question_index": 0})
    it = iter(actions)
    for _agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else next(it, ""))
    return env


def test_planner_worker_local_reward_is_tool_validity_not_validity_plus_call_count():
    env = pw.env(n_workers=2, max_tool_calls=3, n_entities=120, n_questions=60, cache_dir=False)
    q = env.unwrapped.examples[0]
    _drive(env, [
        '<dispatch worker="0">look</dispatch> <dispatch worker="1">look</dispatch>',
        "<search>!!!</search>", f"<search>{q.question}</search>",  # the workers act in turn
        "<search>!!</search>", "<report>found</report>",
        "<search>!</search>", "<report>none</report>",
    ])  # fmt: skip
    inner = env.unwrapped
    assert inner.local_reward_components == {"worker_0": ("tool_validity",), "worker_1": ("tool_validity",)}
    spammer, searcher = agent_components(env, 0, "worker_0"), agent_components(env, 0, "worker_1")
    assert spammer == {"tool_validity": 0.0, "agent_tool_calls": 3.0}  # three invalid calls
    assert searcher == {"tool_validity": 1.0, "agent_tool_calls": 1.0}  # one valid call
    # summing every reported component would give the spammer 3.0 > 2.0: more calls, even invalid, earn more
    assert local_reward(env, 0, "worker_0") == 0.0
    assert local_reward(env, 0, "worker_1") == 1.0
    assert local_reward(env, 0, "planner") == 0.0  # declares none


def test_tasks_without_a_declaration_have_no_local_reward():
    env = signal_game_v0.env(n_candidates=2, words=["apple", "boat"])
    env.reset(seed=0)
    for agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else signal_game_v0.best_policy(env, agent))
    assert local_reward(env, 0, "speaker") == local_reward(env, 0, "listener") == 0.0


def test_a_declared_component_the_task_never_reports_is_an_error_not_a_zero():
    class Declares(signal_game_v0.raw_env):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.local_reward_components = {"speaker": ("clarity",)}

    env = Declares(n_candidates=2, words=["apple", "boat"])
    env.reset(seed=0)
    while not env.record.done:
        env.step(signal_game_v0.best_policy(env, env.agent_selection))
    with pytest.raises(KeyError, match="clarity"):
        local_reward(env, 0, "speaker")
    assert local_reward(env, 0, "listener") == 0.0
