"""A sandbox that fails is an infrastructure error in the new tasks, never a score of 0.

The sandbox here is real and closed: every job it is given comes back with ``infra_error``.
"""

from __future__ import annotations

import pytest

from llm_marl_envs.code import coder_tester_v0
from llm_marl_envs.math import solver_verifier_v0
from llm_marl_envs.planning import grid_v0
from llm_marl_envs.sandbox import Sandbox, SandboxConfig, SandboxError


@pytest.fixture(scope="module")
def closed_sandbox():
    sandbox = Sandbox(SandboxConfig(workers=1))
    sandbox.close()
    return sandbox


@pytest.mark.parametrize(("module", "kwargs"), [
    (solver_verifier_v0, {"tool": True}),
    (grid_v0, {"size": 5}),
    (coder_tester_v0, {"dataset": "stdio_sample", "max_turns": 1}),
])
def test_closed_sandbox_raises_instead_of_scoring(closed_sandbox, module, kwargs):
    env = module.env(sandbox=closed_sandbox, **kwargs)
    env.reset(seed=0)
    with pytest.raises(SandboxError, match="infrastructure"):
        for agent in env.agent_iter():
            env.step(module.best_policy(env, agent))
    assert not env.unwrapped.record.turns  # nothing was scored


@pytest.mark.parametrize(("module", "kwargs"), [
    (solver_verifier_v0, {"tool": True}),
    (grid_v0, {"size": 5}),
    (coder_tester_v0, {"dataset": "stdio_sample", "max_turns": 1}),
])
def test_played_envs_pickle_without_the_default_sandbox(module, kwargs):
    import pickle

    env = module.env(**kwargs)
    env.reset(seed=0)
    env.step(module.best_policy(env, env.agent_selection))  # the default sandbox has been used
    copy = pickle.loads(pickle.dumps(env))
    assert copy.unwrapped.transcript() == env.unwrapped.transcript()
    for agent in copy.agent_iter():
        _, _, term, trunc, _ = copy.last()
        copy.step(None if term or trunc else module.best_policy(copy, agent))
    assert copy.unwrapped.record.total_reward == 1.0


def test_played_envs_with_their_own_sandbox_pickle_and_reattach():
    """A sandbox given at construction is detached in the pickle; the copy re-attaches to one of
    the same configuration on first use (``code.sandbox_handle.SandboxResource``)."""
    import pickle

    own = Sandbox(SandboxConfig(workers=1))
    try:
        env = grid_v0.env(sandbox=own, size=5)
        env.reset(seed=0)
        env.step(grid_v0.best_policy(env, env.agent_selection))  # the tool's program ran in `own`
        copy = pickle.loads(pickle.dumps(env))
        for agent in copy.agent_iter():
            _, _, term, trunc, _ = copy.last()
            copy.step(None if term or trunc else grid_v0.best_policy(copy, agent))
        assert copy.unwrapped.record.total_reward == 1.0
        assert copy.unwrapped.sandbox is not own and copy.unwrapped.sandbox.config == own.config
    finally:
        own.close()
