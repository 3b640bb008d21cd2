"""Compliance checks for generic MARL code: what RLlib, TorchRL, Tianshou, PettingZoo's
conversions and Gymnasium's vector envs rely on (part of ``check_env``, see :mod:`.testing`).

- ``acting``: in both schedules every live agent has ``infos[agent]["acting"]`` and the
  observation's ``"acting"`` flag at every step, both equal to ``is_acting``, and the flag is
  true: a step of an acting agent is recorded, a step of a non-acting one is a no-op;
- ``parallel_infos``: the parallel env's infos have the same keys and scalar value types from
  reset on (clients such as TorchRL fix their info spec at reset);
- ``total_policies``: the module's ``best_policy`` and ``random_policy`` called for every live
  agent in every slot of the cycle schedule (AEC and parallel) give a valid action, the
  documented no-op (``NOOP_ACTION``) for an agent that does not act;
- ``state``: PettingZoo's ``state_test`` on the AEC and the parallel env;
- ``aec_to_parallel``: PettingZoo's ``aec_to_parallel(env(max_cycles=N))`` passes
  ``parallel_api_test`` and plays an episode whose rewards add up to the episode return;
- ``vector_spaces``: every action and observation space survives Gymnasium's batching
  (``batch_space``, ``concatenate``, ``iterate``) with each env getting its own value back.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from llm_marl_envs.core.cycles import NOOP_ACTION
from llm_marl_envs.registry import EnvSpec

#: cycles of the ``env(max_cycles=N)`` episodes these checks play
CHECK_CYCLES = 4
_SCALARS = (bool, int, float, np.bool_, np.integer, np.floating)


def _cycle_env(spec: EnvSpec) -> Any:
    horizon = spec.load().raw_env.horizon_kwarg
    kwargs = {k: v for k, v in spec.test_kwargs.items() if k != horizon}
    return spec.make(**kwargs, max_cycles=CHECK_CYCLES)


def _policies(spec: EnvSpec) -> dict[str, Any]:
    module = spec.load()
    rng = np.random.default_rng(0)
    return {"best_policy": module.best_policy, "random_policy": lambda e, a: module.random_policy(e, a, rng)}


def _assert_acting_flags(env: Any, where: str) -> None:
    raw = env.unwrapped
    for a in raw.agents:
        info = raw.infos[a]
        assert "acting" in info, f"{where}: infos[{a!r}] has no 'acting' flag"
        assert info["acting"] is raw.is_acting(a), f"{where}: infos[{a!r}]['acting'] disagrees with is_acting"
        assert raw.observe(a)["acting"] == int(info["acting"]), f"{where}: {a}'s observation flag disagrees"


def check_acting(spec: EnvSpec, seeds: tuple[int, ...] = (0, 1)) -> None:
    """``acting`` is present for every live agent at every step, and it tells the truth."""
    random_policy = _policies(spec)["random_policy"]
    for env in (_cycle_env(spec), spec.make(**spec.test_kwargs)):
        raw = env.unwrapped
        for seed in seeds:
            env.reset(seed=seed)
            for steps, agent in enumerate(env.agent_iter()):
                where = f"{raw.schedule_mode} schedule, seed {seed}, step {steps} ({agent})"
                _assert_acting_flags(env, where)
                _, _, term, trunc, _ = env.last()
                acting, recorded = raw.infos[agent]["acting"], len(raw.record.steps)
                assert raw.schedule_mode == "cycles" or acting or term or trunc, f"{where}: selected but not acting"
                env.step(None if term or trunc else random_policy(env, agent))
                if not (term or trunc):
                    assert (len(raw.record.steps) == recorded + 1) == acting, (
                        f"{where}: acting={acting} but the step was {'not ' if acting else ''}recorded"
                    )
                assert steps < 10_000


def check_parallel_infos(spec: EnvSpec, seeds: tuple[int, ...] = (0, 1)) -> None:
    """The parallel env's info keys and value types are fixed at reset; the values are scalars."""
    par = spec.parallel_env(**spec.test_kwargs)
    policy = _policies(spec)["random_policy"]
    for seed in seeds:
        _, infos = par.reset(seed=seed)
        schema = {a: {k: type(v) for k, v in info.items()} for a, info in infos.items()}
        for a, keys in schema.items():
            assert "acting" in keys, f"parallel reset: infos[{a!r}] has no 'acting'"
            bad = {k: t.__name__ for k, t in keys.items() if not issubclass(t, _SCALARS)}
            assert not bad, f"parallel infos[{a!r}] hold non-scalar values {bad} (TorchRL cannot tensorize them)"
        for steps in range(10_000):
            if not par.agents:
                break
            _, _, _, _, infos = par.step({a: policy(par.aec_env, a) for a in par.agents})
            for a, info in infos.items():
                got = {k: type(v) for k, v in info.items()}
                assert got == schema[a], f"parallel step {steps}: infos[{a!r}] schema {got} != reset's {schema[a]}"
        else:
            raise AssertionError("parallel random play did not end the episode within 10000 steps")


def check_total_policies(spec: EnvSpec, seeds: tuple[int, ...] = (0, 1)) -> None:
    """Policies called for every live agent in every slot answer; non-acting agents get the no-op."""
    policies = _policies(spec)
    env = _cycle_env(spec)
    raw = env.unwrapped
    for seed in seeds:
        env.reset(seed=seed)
        for steps, agent in enumerate(env.agent_iter()):
            for name, policy in policies.items():
                for a in raw.agents:
                    where = f"{spec.module}.{name}(env, {a!r}) at step {steps} (seed {seed})"
                    try:
                        action = policy(env, a)
                    except Exception as exc:
                        raise AssertionError(f"{where} raised {exc!r} (use core.noop_when_idle)") from exc
                    assert env.action_space(a).contains(action), f"{where} gave an invalid action {action!r:.80}"
                    assert raw.is_acting(a) or action == NOOP_ACTION, f"{where}: {a} does not act, expected the no-op"
            _, _, term, trunc, _ = env.last()
            env.step(None if term or trunc else policies["best_policy"](env, agent))
            assert steps < 10_000
    par = spec.parallel_env(**spec.test_kwargs)
    par.reset(seed=seeds[0])
    while par.agents:
        par.step({a: policies["best_policy"](par.aec_env, a) for a in par.agents})


def check_state(spec: EnvSpec) -> None:
    """PettingZoo's ``state_test``: ``state_space`` and ``state()`` on the AEC and the parallel env."""
    from pettingzoo.test import state_test

    state_test(spec.make(**spec.test_kwargs), spec.parallel_env(**spec.test_kwargs), num_cycles=10)


def check_aec_to_parallel(spec: EnvSpec) -> None:
    """PettingZoo's own conversion of ``env(max_cycles=N)`` is accepted and plays whole episodes."""
    from pettingzoo.test import parallel_api_test
    from pettingzoo.utils import aec_to_parallel

    env = _cycle_env(spec)
    assert env.metadata.get("is_parallelizable"), "env(max_cycles=N) must declare metadata['is_parallelizable']"
    parallel_api_test(aec_to_parallel(env), num_cycles=20)
    par, best = aec_to_parallel(_cycle_env(spec)), _policies(spec)["best_policy"]
    par.reset(seed=0)
    total = 0.0
    while par.agents:
        _, rewards, _, _, _ = par.step({a: best(par.aec_env, a) for a in par.agents})
        total += rewards[par.possible_agents[0]]
    assert math.isclose(total, par.unwrapped.record.total_reward, abs_tol=1e-9), (
        f"aec_to_parallel rewards add up to {total}, the episode return is {par.unwrapped.record.total_reward}"
    )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, str):
        return isinstance(b, str) and a == b
    return bool(np.array_equal(a, b))


def check_vector_spaces(spec: EnvSpec, n: int = 3) -> None:
    """Gymnasium's vector batching hands each env its own action and observation back, whole."""
    from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

    env = spec.make(**spec.test_kwargs)
    env.reset(seed=0)
    for agent in env.possible_agents:
        for kind, space in (("action", env.action_space(agent)), ("observation", env.observation_space(agent))):
            space.seed(0)
            values = [space.sample() for _ in range(n)]
            if kind == "observation":
                values[0] = env.observe(agent)
            batched = concatenate(space, values, create_empty_array(space, n))
            back = list(iterate(batch_space(space, n), batched))
            assert len(back) == n and all(_same(v, b) for v, b in zip(values, back)), (
                f"{agent}'s {kind} space {space}: Gymnasium's vector batching gave {back!r:.200} for {values!r:.200}"
            )


CHECKS = {
    "acting": check_acting,
    "parallel_infos": check_parallel_infos,
    "total_policies": check_total_policies,
    "state": check_state,
    "aec_to_parallel": check_aec_to_parallel,
    "vector_spaces": check_vector_spaces,
}
