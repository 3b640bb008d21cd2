"""Bridges from this suite's tasks to the trainers people already use (docs/bridges.md).

- :mod:`llm_marl_envs.bridges.openenv_server`: serve any task with OpenEnv's protocol -- the ``/ws``
  WebSocket session its stock clients speak, and its HTTP reset/step/state -- (one open seat, partners
  server-side; or hot-seat), standard library only (:mod:`.openenv_http` is the transport,
  :mod:`.websocket` the WebSocket framing).
- :mod:`llm_marl_envs.bridges.verifiers_env`: ``make_env(task, frozen=[...])`` -> a ``verifiers.v1``
  ``Env`` (extra ``verifiers``).
- :mod:`baselines.bridges.trl`: a ``rollout_func`` and an ``environment_factory`` class for TRL's
  ``GRPOTrainer`` (extra ``trl``; it needs torch, so it lives with the baselines).

This module holds what every bridge shares: the checks of a task name and of seat names, and
of an optional framework being installed in a supported version (errors name the extra to install).
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any

from llm_marl_envs.registry import EnvSpec, registry

#: framework -> (import name, extra, minimum version (inclusive), maximum version (exclusive))
SUPPORTED: Mapping[str, tuple[str, str, str, str]] = {
    "trl": ("trl", "trl", "1.16", "1.17"),
    "verifiers": ("verifiers", "verifiers", "0.4", "0.5"),
}


class BridgeError(RuntimeError):
    """A framework bridge cannot be used as asked (missing extra, unsupported version, bad seat)."""


def _version_tuple(version: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in version.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit()) if not piece.isdigit() else piece
        if not digits:
            break
        parts.append(int(digits))
        if not piece.isdigit():
            break
    return tuple(parts)


def check_version(framework: str, version: str) -> None:
    """Raise :class:`BridgeError` when ``version`` of ``framework`` is outside the supported range."""
    _, extra, low, high = SUPPORTED[framework]
    if not _version_tuple(low) <= _version_tuple(version) < _version_tuple(high):
        raise BridgeError(
            f"{framework} {version} is not supported by this bridge (supported: >={low},<{high}); "
            f"install a supported version with: pip install 'llm-marl-envs[{extra}]'"
        )


def require(framework: str) -> ModuleType:
    """Import ``framework`` after checking it is installed in a supported version."""
    module_name, extra, low, high = SUPPORTED[framework]
    try:
        version = importlib.metadata.version(module_name)
        module = importlib.import_module(module_name)
    except (ImportError, importlib.metadata.PackageNotFoundError) as exc:
        raise BridgeError(
            f"the {framework} bridge needs {framework}>={low},<{high} (Python >= 3.11), which is not installed: "
            f"pip install 'llm-marl-envs[{extra}]'"
        ) from exc
    check_version(framework, version)
    return module


def task_spec(task: str) -> EnvSpec:
    """The registered task ``task`` (an unknown name raises ``UnknownEnvironmentError`` listing the known ones)."""
    return registry.spec(task)


def check_seats(task: str, agents: Iterable[str], seats: Iterable[str], what: str = "seat") -> list[str]:
    """``seats`` as a list, after checking each is one of ``agents`` (the task's ``possible_agents``)."""
    agents = list(agents)
    if isinstance(seats, str):
        seats = [seats]
    seats = list(seats)
    unknown = [s for s in seats if s not in agents]
    if unknown:
        raise BridgeError(f"{task} has no {what} {unknown[0]!r}; its seats are {agents}")
    return seats


def make_task_env(task: str, env_kwargs: Mapping[str, Any] | None = None):
    """Build the AEC env of the registered ``task`` with ``env_kwargs``."""
    return task_spec(task).make(**dict(env_kwargs or {}))


def task_module(task: str) -> ModuleType:
    """The task's module (its scripted policies live there: ``best_policy``, ``random_policy``)."""
    return task_spec(task).load()


def advance(env: Any, partners: Mapping[str, Any], max_steps: int = 10_000) -> str | None:
    """Step finished agents (``None``), partner seats (``partners[agent](env, agent)``) and idle seats
    (``""``) until an acting seat without a partner is selected: return it, or None once the episode is over."""
    for _ in range(max_steps):
        if env.unwrapped.record.done or not env.agents:
            return None
        agent = env.agent_selection
        _, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
        elif agent in partners:
            env.step(partners[agent](env, agent))
        elif not env.observe(agent)["acting"]:
            env.step("")
        else:
            return agent
    raise BridgeError(f"no seat without a partner was asked to act within {max_steps} steps")
