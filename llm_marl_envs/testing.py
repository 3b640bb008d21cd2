"""Compliance checks every task must pass; importable so users can check their own tasks.

``check_env("family/name_v0")`` runs them all on a registered task. The project's test
suite runs the same checks on every task of the registry (``tests/test_compliance.py``),
so a newly registered task is checked automatically.

Checks: PettingZoo's ``api_test``, ``seed_test``, ``parallel_api_test`` (parallelizable
tasks) and ``render_test``; observations as text and chat; the scripted best policy
reaches the maximum return and the do-nothing policy (every action ``""``) the minimum;
clones are independent; hostile actions (huge, null bytes, surrogates, bytes, non-strings)
never raise and are reported as format issues.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from llm_marl_envs.registry import EnvSpec, registry

Policy = Callable[[Any, str], Any]


def play_episode(env: Any, policy: Policy, seed: int | None = 0, max_steps: int = 100_000) -> float:
    """Play one episode with ``policy(env, agent)``; return the team's episode return."""
    env.reset(seed=seed)
    for steps, agent in enumerate(env.agent_iter()):
        _, _, terminated, truncated, _ = env.last()
        env.step(None if terminated or truncated else policy(env, agent))
        if steps >= max_steps:
            raise AssertionError(f"episode did not end within {max_steps} steps")
    return env.unwrapped.record.total_reward


def _make(spec: EnvSpec, **extra: Any) -> Any:
    return spec.make(**{**spec.test_kwargs, **extra})


def check_api(spec: EnvSpec) -> None:
    from pettingzoo.test import api_test

    api_test(_make(spec), num_cycles=20)


def check_seed(spec: EnvSpec) -> None:
    from pettingzoo.test import seed_test

    seed_test(lambda: _make(spec), num_cycles=20)


def check_parallel(spec: EnvSpec) -> None:
    from pettingzoo.test import parallel_api_test

    parallel_api_test(spec.load().parallel_env(**spec.test_kwargs), num_cycles=20)


def check_render(spec: EnvSpec) -> None:
    from pettingzoo.test import render_test

    render_test(lambda render_mode=None: _make(spec, render_mode=render_mode))


def check_observations(spec: EnvSpec) -> None:
    env = _make(spec)
    env.reset(seed=1)
    for agent in env.agents:
        assert env.observation_space(agent).contains(env.observe(agent))
        chat = env.unwrapped.observe_chat(agent)
        assert chat[0]["role"] == "system", "the first message must be the role instructions"
        assert all(set(m) == {"role", "content"} for m in chat)


def check_policies(spec: EnvSpec, seeds: tuple[int, ...] = (0, 1)) -> None:
    """The best policy reaches the maximum return; the do-nothing policy the minimum."""
    module = spec.load()
    env = _make(spec)
    for seed in seeds:
        env.reset(seed=seed)
        low, high = env.unwrapped.return_range()
        assert low < high, f"return_range() must be a proper interval, got {(low, high)}"
        best = play_episode(env, module.best_policy, seed=seed)
        assert math.isclose(best, high, abs_tol=1e-9), f"best policy got {best}, maximum is {high}"
        nothing = play_episode(env, lambda e, a: "", seed=seed)
        assert math.isclose(nothing, low, abs_tol=1e-9), f"do-nothing got {nothing}, minimum is {low}"


def check_clones(spec: EnvSpec) -> None:
    """Stepping a clone never changes the original; two clones of one state play alike."""
    module = spec.load()
    env = _make(spec)
    env.reset(seed=3)
    env.step(module.best_policy(env, env.agent_selection))
    if not env.agents:
        return
    before = {a: env.observe(a)["text"] for a in env.agents}
    n_steps = len(env.unwrapped.record.steps)
    junk = env.clone()
    assert junk.unwrapped is not env.unwrapped
    play_from_here(junk, lambda e, a: "junk ~~~")
    assert {a: env.observe(a)["text"] for a in before} == before, "a clone changed the original"
    assert len(env.unwrapped.record.steps) == n_steps
    twin = env.clone()
    play_from_here(env, module.best_policy)
    play_from_here(twin, module.best_policy)
    assert env.unwrapped.record.total_reward == twin.unwrapped.record.total_reward
    assert env.unwrapped.transcript() == twin.unwrapped.transcript()


def play_from_here(env: Any, policy: Policy) -> None:
    for agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else policy(env, agent))


HOSTILE_ACTIONS: tuple[Any, ...] = (
    "x" * 1_000_000,
    "\x00\x00code\x00",
    "\ud800\udfff broken surrogates",
    b"\xff\xfe bytes",
    "",
    None,
    12345,
    ["not", "text"],
    "```python\nwhile True: pass\n```",
    "<answer></answer><search></search>" * 1000,
    "😀" * 5000,
)


def check_hostile_actions(spec: EnvSpec) -> None:
    """Hostile actions never raise; the truncation of a huge one is reported."""
    env = _make(spec)
    for shift in range(2):
        env.reset(seed=shift)
        i = shift
        for _agent in env.agent_iter():
            _, _, term, trunc, _ = env.last()
            env.step(None if term or trunc else HOSTILE_ACTIONS[i % len(HOSTILE_ACTIONS)])
            i += 1
        record = env.unwrapped.record
        assert record.done and np.isfinite(record.total_reward)
    env.reset(seed=0)
    env.step("x" * (env.unwrapped.max_action_chars + 1))
    issues = env.unwrapped.record.steps[0].format_issues
    assert any("truncated" in issue for issue in issues), issues


CHECKS: dict[str, Callable[[EnvSpec], None]] = {
    "api": check_api,
    "seed": check_seed,
    "render": check_render,
    "observations": check_observations,
    "policies": check_policies,
    "clones": check_clones,
    "hostile_actions": check_hostile_actions,
}


def check_env(name_or_spec: str | EnvSpec) -> None:
    """Run every compliance check on a registered task; raises AssertionError on failure."""
    spec = registry.spec(name_or_spec) if isinstance(name_or_spec, str) else name_or_spec
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for check in CHECKS.values():
            check(spec)
        if spec.parallelizable:
            check_parallel(spec)
