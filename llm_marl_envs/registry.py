"""The registry of tasks: one place that lists every environment of the suite.

``make(name, **kwargs)`` builds a wrapped environment; ``list_envs()`` lists names;
``spec(name)`` returns the :class:`EnvSpec` with everything the compliance tests and the
trainers need to know about a task (its module, its scripted policies, fast test settings).
Users add their own tasks with :func:`register`; the compliance suite in ``tests/`` is
parametrized over this registry, so a registered task is checked automatically.

A task module follows PettingZoo's layout: ``raw_env`` (the class), ``env(**kwargs)``,
``parallel_env(**kwargs)`` where parallelizable, plus ``best_policy(env, agent) -> str``
(a scripted policy that reaches the task's maximum return) and
``random_policy(env, agent, rng) -> str``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType, ModuleType
from typing import Any


@dataclass(frozen=True)
class EnvSpec:
    """A registered task."""

    name: str  #: "<family>/<name>_v<version>"
    module: str  #: import path of the task module (PettingZoo layout)
    summary: str  #: one line for listings
    parallelizable: bool = False  #: whether ``parallel_env()`` works with default kwargs
    test_kwargs: Mapping[str, Any] = field(default_factory=dict)  #: small, fast settings for tests

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)

    def make(self, **kwargs: Any):
        return self.load().env(**kwargs)


_BUILTIN: tuple[EnvSpec, ...] = (
    EnvSpec(
        name="toy/signal_game_v0",
        module="llm_marl_envs.toy.signal_game_v0",
        summary="speaker/listener referential game; the fast check for trainers",
    ),
    EnvSpec(
        name="code/helper_main_v0",
        module="llm_marl_envs.code.helper_main_v0",
        summary="helper + main agents write one Python solution together (MAGRPO)",
        parallelizable=True,
        test_kwargs={"dataset": "humaneval", "max_turns": 2, "split": "eval", "eval_fraction": 0.05},
    ),
    EnvSpec(
        name="search/planner_worker_v0",
        module="llm_marl_envs.search.planner_worker_v0",
        summary="planner + search workers answer multi-hop questions over BM25 (Dr. MAS, SHARP)",
        parallelizable=False,
        test_kwargs={
            "n_entities": 30,
            "n_questions": 20,
            "max_hops": 3,
            "max_turns": 4,
            "n_workers": 2,
            "max_tool_calls": 2,
            "cache_dir": False,
        },
    ),
    EnvSpec(
        name="code/tree_search_v0",
        module="llm_marl_envs.code.tree_search_v0",
        summary="agents grow one search tree of candidate programs per problem (MARS2)",
        parallelizable=False,
        test_kwargs={"dataset": "stdio_sample", "max_nodes": 3},
    ),
    EnvSpec(
        name="math/solver_verifier_v0",
        module="llm_marl_envs.math.solver_verifier_v0",
        summary="a solver answers, a verifier approves or rejects, optional python tool (Dr. MAS)",
        parallelizable=False,
        test_kwargs={"tool": True, "timeout_s": 1.0},
    ),
    EnvSpec(
        name="planning/grid_v0",
        module="llm_marl_envs.planning.grid_v0",
        summary="a tool agent writes a solver program, a plan agent moves: Plan-Path, Sokoban, Sudoku (AT-GRPO)",
        parallelizable=False,
        test_kwargs={"puzzle": "plan_path", "size": 5, "max_turns": 2, "timeout_s": 1.0},
    ),
    EnvSpec(
        name="code/coder_tester_v0",
        module="llm_marl_envs.code.coder_tester_v0",
        summary="a coder writes the solution, a tester writes unit tests, both run in the sandbox",
        parallelizable=True,
        test_kwargs={"dataset": "humaneval", "max_turns": 2, "timeout_s": 2.0},
    ),
)


class Registry:
    """A name -> :class:`EnvSpec` mapping with registration."""

    def __init__(self, specs: tuple[EnvSpec, ...] = ()) -> None:
        self._specs: dict[str, EnvSpec] = {}
        for s in specs:
            self.register(s)

    def register(self, spec: EnvSpec, *, overwrite: bool = False) -> None:
        family, _, rest = spec.name.partition("/")
        if not family or not rest or "_v" not in rest:
            raise ValueError(f"task names look like '<family>/<name>_v<N>', got {spec.name!r}")
        if spec.name in self._specs and not overwrite:
            raise ValueError(f"{spec.name!r} is already registered (pass overwrite=True to replace)")
        self._specs[spec.name] = spec

    def unregister(self, name: str) -> None:
        """Remove a task (tests and notebooks that register temporary tasks use this)."""
        self.spec(name)
        del self._specs[name]

    def spec(self, name: str) -> EnvSpec:
        try:
            return self._specs[name]
        except KeyError:
            raise KeyError(f"unknown environment {name!r}; known: {sorted(self._specs)}") from None

    def names(self) -> list[str]:
        return sorted(self._specs)

    def specs(self) -> Mapping[str, EnvSpec]:
        return MappingProxyType(self._specs)


#: the suite's registry (built-in tasks plus whatever users register)
registry = Registry(_BUILTIN)


def register(spec: EnvSpec, *, overwrite: bool = False) -> None:
    """Add a task to the suite's registry."""
    registry.register(spec, overwrite=overwrite)


def make(name: str, **kwargs: Any):
    """Build the wrapped environment registered as ``name`` with ``kwargs``."""
    return registry.spec(name).make(**kwargs)


def list_envs() -> list[str]:
    """Names of every registered task."""
    return registry.names()


def spec(name: str) -> EnvSpec:
    """The :class:`EnvSpec` of ``name``."""
    return registry.spec(name)
