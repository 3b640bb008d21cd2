"""The registry of tasks: one place that lists every environment of the suite.

``make(name, **kwargs)`` builds a wrapped environment; ``list_envs()`` lists names;
``spec(name)`` returns the :class:`EnvSpec` with everything the compliance tests and the
trainers need to know about a task (its module, its scripted policies, fast test settings).
Users add their own tasks with :func:`register`; the compliance suite in ``tests/`` is
parametrized over this registry, so a registered task is checked automatically.

Plugin tasks are found three ways, so that any code taking a task name (``make``,
``python -m baselines.train --env``) can use them:

- an installed package declares an entry point in the group ``llm_marl_envs.tasks``
  (``[project.entry-points."llm_marl_envs.tasks"] my_tasks = "my_tasks.sum_game_v0"``): the
  module is imported (and so registers its tasks) the first time a name is not found or
  the tasks are listed;
- ``make("my_tasks.sum_game_v0:toy/sum_game_v0")`` imports the module before the look-up;
- ``python -m baselines.train --import my_tasks.sum_game_v0 --env toy/sum_game_v0``.

A task module follows PettingZoo's layout: ``raw_env`` (the class), ``env(**kwargs)``,
``parallel_env(**kwargs)`` (the generic one is used where a module has none), plus ``best_policy(env, agent) -> str``
(a scripted policy that reaches the task's maximum return) and
``random_policy(env, agent, rng) -> str``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
import warnings
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
    #: whether the agents act simultaneously with default kwargs (a parallel step is then a whole
    #: turn); every task has ``parallel_env()`` either way (see :mod:`llm_marl_envs.core.cycles`)
    parallelizable: bool = False
    test_kwargs: Mapping[str, Any] = field(default_factory=dict)  #: small, fast settings for tests

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)

    def make(self, **kwargs: Any):
        return self.load().env(**kwargs)

    def parallel_env(self, **kwargs: Any):
        """The task's ``parallel_env(**kwargs)``; the generic one where the module has none."""
        module = self.load()
        if hasattr(module, "parallel_env"):
            return module.parallel_env(**kwargs)
        from llm_marl_envs.core.wrappers import make_parallel_env_fn

        return make_parallel_env_fn(module.raw_env)(**kwargs)


#: the entry-point group of plugin task modules
ENTRY_POINT_GROUP = "llm_marl_envs.tasks"


class UnknownEnvironmentError(KeyError):
    """No task is registered under this name (also after loading the plugins)."""

    def __str__(self) -> str:
        return str(self.args[0])


def _module_exists(module: str) -> bool:
    if module in sys.modules:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that does not exist
        return False


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

    def __init__(self, specs: tuple[EnvSpec, ...] = (), entry_point_group: str | None = None) -> None:
        self._specs: dict[str, EnvSpec] = {}
        self._group = entry_point_group
        self._plugins_loaded = entry_point_group is None
        self.plugin_errors: dict[str, str] = {}  #: entry point -> why it failed to load
        for s in specs:
            self.register(s)

    def register(self, spec: EnvSpec, *, overwrite: bool = False) -> None:
        if not isinstance(spec, EnvSpec):
            raise TypeError(f"register() takes an EnvSpec, got {type(spec).__name__}")
        family, _, rest = spec.name.partition("/")
        if not family or not rest or "_v" not in rest or ":" in spec.name:
            raise ValueError(f"task names look like '<family>/<name>_v<N>', got {spec.name!r}")
        if not _module_exists(spec.module):
            raise ModuleNotFoundError(
                f"cannot register {spec.name!r}: its module {spec.module!r} cannot be imported (not found)",
                name=spec.module,
            )
        if spec.name in self._specs and not overwrite:
            raise ValueError(f"{spec.name!r} is already registered (pass overwrite=True to replace)")
        self._specs[spec.name] = spec

    def unregister(self, name: str) -> None:
        """Remove a task (tests and notebooks that register temporary tasks use this)."""
        self.spec(name)
        del self._specs[name]

    def load_plugins(self) -> None:
        """Import the modules of the entry-point group once (a broken plugin is reported, not raised)."""
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        for ep in importlib.metadata.entry_points(group=self._group or ""):
            try:
                ep.load()
            except Exception as exc:  # one broken plugin must not hide the others
                self.plugin_errors[ep.name] = f"{type(exc).__name__}: {exc}"
                warnings.warn(f"task plugin {ep.name!r} ({ep.value}) failed to load: {exc}", stacklevel=2)

    def spec(self, name: str) -> EnvSpec:
        if not isinstance(name, str):
            raise TypeError(f"environment names are strings, got {type(name).__name__}")
        if ":" in name:  # "package.module:family/name_v0": import the module, then look up
            module, _, name = name.partition(":")
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as exc:
                raise UnknownEnvironmentError(f"cannot import {module!r} for {name!r}: {exc}") from exc
        if name not in self._specs:
            self.load_plugins()
        try:
            return self._specs[name]
        except KeyError:
            broken = f"; plugins that failed to load: {self.plugin_errors}" if self.plugin_errors else ""
            raise UnknownEnvironmentError(
                f"unknown environment {name!r}; known: {sorted(self._specs)}{broken}. A task of your own: "
                "import its module first, or pass 'package.module:family/name_v0', or use "
                f"--import package.module with baselines.train, or declare an entry point in {ENTRY_POINT_GROUP!r}"
            ) from None

    def names(self) -> list[str]:
        self.load_plugins()
        return sorted(self._specs)

    def specs(self) -> Mapping[str, EnvSpec]:
        return MappingProxyType(self._specs)


#: the suite's registry (built-in tasks plus whatever users register)
registry = Registry(_BUILTIN, entry_point_group=ENTRY_POINT_GROUP)


def register(spec: EnvSpec, *, overwrite: bool = False) -> None:
    """Add a task to the suite's registry."""
    registry.register(spec, overwrite=overwrite)


def make(name: str, **kwargs: Any):
    """Build the wrapped environment registered as ``name`` with ``kwargs``."""
    return registry.spec(name).make(**kwargs)


def make_parallel(name: str, **kwargs: Any):
    """The parallel-API environment registered as ``name`` (one step = one cycle)."""
    return registry.spec(name).parallel_env(**kwargs)


def list_envs() -> list[str]:
    """Names of every registered task."""
    return registry.names()


def spec(name: str) -> EnvSpec:
    """The :class:`EnvSpec` of ``name``."""
    return registry.spec(name)
