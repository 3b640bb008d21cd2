"""Compliance checks every task must pass; importable so users can check their own tasks.

``check_env("family/name_v0")`` runs them all on a registered task. The project's test
suite runs the same checks on every task of the registry (``tests/test_compliance.py``),
so a newly registered task is checked automatically.

Checks: PettingZoo's ``api_test``, ``seed_test``, ``parallel_api_test``, ``max_cycles_test``
and ``render_test``; observations as text and chat; the scripted best policy reaches the
maximum of ``return_range()`` and the do-nothing policy (every action ``""``) stays inside
it; the task is trainable (the module has the ``random_policy(env, agent, rng)`` the
trainers use, and its actions are valid text that ends episodes); no observation contains
a secret of the task (``secrets(agent)``: gold answers, hidden tests) at reset or while
the team does nothing; clones are independent, pickling and deep copies play on alike;
hostile actions (huge, null bytes, surrogates, bytes, non-strings) never raise and are
reported as format issues; and what RLlib, TorchRL, Tianshou, PettingZoo's conversions and
Gymnasium's vector envs rely on (:mod:`.testing_interop`: truthful ``acting`` flags, a fixed
parallel info schema, policies that answer in every slot, ``state_test``, ``aec_to_parallel``,
vector batching of the spaces).

``check_env`` prints one line per check (PettingZoo's own output and renders are captured)
and returns the summary; a failing check raises ``AssertionError`` naming it.
"""

from __future__ import annotations

import contextlib
import copy
import io
import math
import pickle
import time
import types
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from llm_marl_envs import testing_interop
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

    parallel_api_test(spec.parallel_env(**spec.test_kwargs), num_cycles=20)


def check_max_cycles(spec: EnvSpec) -> None:
    """PettingZoo's ``max_cycles_test`` on ``env(max_cycles=...)`` / ``parallel_env(max_cycles=...)``."""
    from pettingzoo.test import max_cycles_test

    horizon = spec.load().raw_env.horizon_kwarg
    kwargs = {k: v for k, v in spec.test_kwargs.items() if k != horizon}
    module = types.SimpleNamespace(env=lambda **kw: spec.make(**kwargs, **kw),
                                   parallel_env=lambda **kw: spec.parallel_env(**kwargs, **kw))  # fmt: skip
    max_cycles_test(module)


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
    """The best policy reaches the maximum of ``return_range()``; doing nothing stays inside it."""
    module = spec.load()
    assert hasattr(module, "best_policy"), f"{spec.module} needs best_policy(env, agent) -> str"
    env = _make(spec)
    for seed in seeds:
        env.reset(seed=seed)
        try:
            low, high = env.unwrapped.return_range()
        except NotImplementedError:
            raise AssertionError(f"{spec.module}: implement return_range() -> (min, max) episode return") from None
        assert low < high, f"return_range() must be a proper interval, got {(low, high)}"
        best = play_episode(env, module.best_policy, seed=seed)
        assert math.isclose(best, high, abs_tol=1e-9), f"best policy got {best}, maximum is {high}"
        nothing = play_episode(env, lambda e, a: "", seed=seed)
        assert low - 1e-9 <= nothing <= high + 1e-9, f"do-nothing got {nothing}, outside {(low, high)}"


def check_trainable(spec: EnvSpec, episodes: int = 2) -> None:
    """What the trainers need: ``random_policy(env, agent, rng) -> str`` giving valid, episode-ending play."""
    module = spec.load()
    policy = getattr(module, "random_policy", None)
    assert callable(policy), (
        f"{spec.module} has no random_policy(env, agent, rng) -> str: the trainers (baselines) use it to "
        "build the tiny model's vocabulary and to measure the chance level"
    )
    env = _make(spec)
    rng = np.random.default_rng(0)
    low, high = env.unwrapped.return_range() if hasattr(env.unwrapped, "return_range") else (-math.inf, math.inf)
    for seed in range(episodes):
        env.reset(seed=seed)
        for steps, agent in enumerate(env.agent_iter()):
            _, _, term, trunc, _ = env.last()
            action = None if term or trunc else policy(env, agent, rng)
            if action is not None:
                assert env.action_space(agent).contains(action), f"random_policy gave an invalid action {action!r:.80}"
            env.step(action)
            assert steps < 10_000, "random play did not end the episode within 10000 steps"
        total = env.unwrapped.record.total_reward
        assert low - 1e-9 <= total <= high + 1e-9, f"random play got {total}, outside return_range {(low, high)}"


def check_no_leaks(spec: EnvSpec, seeds: tuple[int, ...] = (0, 1, 2)) -> None:
    """No agent's observation contains one of its ``secrets`` (gold answer, hidden tests)."""
    env = _make(spec)
    raw = env.unwrapped
    for seed in seeds:
        env.reset(seed=seed)
        for steps, _agent in enumerate(env.agent_iter()):
            for a in raw.agents:
                shown = raw.observe(a)["text"] + "\n".join(m["content"] for m in raw.observe_chat(a))
                for secret in raw.secrets(a):
                    assert secret not in shown, f"{a}'s observation leaks a secret of the task: {secret[:80]!r}"
            _, _, term, trunc, _ = env.last()
            env.step(None if term or trunc else "")
            assert steps < 10_000


def check_copies(spec: EnvSpec) -> None:
    """Mid-episode, a pickled and a deep-copied env play on exactly like the original."""
    module = spec.load()
    env = _make(spec)
    env.reset(seed=5)
    env.step(module.best_policy(env, env.agent_selection))
    copies = [pickle.loads(pickle.dumps(env)), copy.deepcopy(env), env]
    for e in copies:
        play_from_here(e, module.best_policy)
    returns = {e.unwrapped.record.total_reward for e in copies}
    assert len(returns) == 1, f"copies played to different returns {returns}"
    assert len({e.unwrapped.transcript() for e in copies}) == 1, "copies played differently"


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
        low, high = env.unwrapped.return_range()
        assert low - 1e-9 <= record.total_reward <= high + 1e-9, (
            f"hostile actions got {record.total_reward}, outside return_range {(low, high)} "
            "(sanitizing issues flag an agent too: count every agent in the minimum)"
        )
    env.reset(seed=0)
    env.step("x" * (env.unwrapped.max_action_chars + 1))
    issues = env.unwrapped.record.steps[0].format_issues
    assert any("truncated" in issue for issue in issues), issues


CHECKS: dict[str, Callable[[EnvSpec], None]] = {
    "api": check_api,
    "seed": check_seed,
    "parallel_api": check_parallel,
    "max_cycles": check_max_cycles,
    "render": check_render,
    "observations": check_observations,
    "policies": check_policies,
    "trainable": check_trainable,
    "no_leaks": check_no_leaks,
    "clones": check_clones,
    "copies": check_copies,
    "hostile_actions": check_hostile_actions,
    **testing_interop.CHECKS,  # what other libraries' wrappers rely on
}


def check_env(name_or_spec: str | EnvSpec, *, verbose: bool = True) -> dict[str, float]:
    """Run every compliance check on a task; print one summary line per check; return seconds per check.

    Raises AssertionError naming the first failing check (PettingZoo's output and the
    renders are captured, not printed).
    """
    spec = registry.spec(name_or_spec) if isinstance(name_or_spec, str) else name_or_spec
    timings: dict[str, float] = {}
    for name, check in CHECKS.items():
        start = time.perf_counter()
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            try:
                check(spec)
            except AssertionError as exc:
                raise AssertionError(f"{spec.name}: check {name!r} failed: {exc}") from exc
        timings[name] = time.perf_counter() - start
        if verbose:
            print(f"  {name:16s} ok  ({timings[name]:.2f} s)")
    if verbose:
        print(f"{spec.name}: all {len(CHECKS)} checks passed in {sum(timings.values()):.1f} s")
    return timings
