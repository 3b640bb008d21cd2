"""The standard wrapper every task's ``env()`` returns, and the ``env``/``parallel_env`` factories.

PettingZoo's convention: ``raw_env`` is the bare class, ``env()`` returns it wrapped so that
API misuse (stepping before ``reset``...) raises a clear error, and ``parallel_env()`` gives
the parallel API (:mod:`.parallel`; every task has one). Both factories check their keyword
arguments against the task's ``__init__`` (:mod:`.kwargs`) and accept PettingZoo's
``max_cycles`` (:mod:`.cycles`), mapped onto the task's horizon (``horizon_kwarg``).

``clone()`` keeps every wrapper: called on any wrapper stack around a task -- ours, PettingZoo's,
SuperSuit's or a user's -- it deep-copies the whole stack from the outermost wrapper the call
went through, sharing the task's heavy resources (:mod:`.copying`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from pettingzoo.utils import OrderEnforcingWrapper

from llm_marl_envs.core.copying import deepcopy_sharing, outermost_wrapper
from llm_marl_envs.core.kwargs import check_kwargs
from llm_marl_envs.core.parallel import TextParallelEnv


class TextEnvWrapper(OrderEnforcingWrapper):
    """Order-enforcing wrapper whose ``clone()`` copies every wrapper around the task."""

    @property
    def clone(self) -> Callable[[], Any]:
        """``env.clone()``: an independent copy of the episode, wrapped exactly like ``env``."""
        outer = outermost_wrapper(self, sys._getframe(1))
        return lambda: deepcopy_sharing(outer, self.unwrapped)

    def observe_chat(self, agent: str) -> list[dict]:
        return self.unwrapped.observe_chat(agent)

    def render(self, mode: str | None = None) -> Any:
        """PettingZoo's render; ``mode`` is accepted and ignored (the env's ``render_mode`` decides)."""
        return super().render()


def horizon_kwargs(raw_env: type, kwargs: dict[str, Any]) -> int | None:
    """Pop ``max_cycles`` from ``kwargs`` and map it onto the task's horizon parameter."""
    max_cycles = kwargs.pop("max_cycles", None)
    if max_cycles is None:
        return None
    if isinstance(max_cycles, bool) or not isinstance(max_cycles, int) or max_cycles < 1:
        raise ValueError(f"max_cycles must be an int >= 1, got {max_cycles!r}")
    horizon = getattr(raw_env, "horizon_kwarg", "max_turns")
    if horizon in kwargs and kwargs[horizon] != max_cycles:
        raise ValueError(f"max_cycles={max_cycles} sets {horizon}; do not pass both ({horizon}={kwargs[horizon]!r})")
    kwargs[horizon] = max_cycles
    return max_cycles


def build_raw(raw_env: Callable[..., Any], kwargs: dict[str, Any], cycles: bool) -> Any:
    """Check ``kwargs``, build the raw task, and set its schedule (cycles when asked or ``max_cycles``)."""
    kwargs = dict(kwargs)
    max_cycles = horizon_kwargs(raw_env, kwargs)  # type: ignore[arg-type]
    if isinstance(raw_env, type):
        check_kwargs(raw_env, kwargs)
    aec = raw_env(**kwargs)
    if cycles or max_cycles is not None:
        aec.set_schedule("cycles", max_cycles)
    return aec


def make_env_fn(raw_env: Callable[..., Any]) -> Callable[..., TextEnvWrapper]:
    """Build the module-level ``env(**kwargs)`` factory for a task class."""

    def env(**kwargs: Any) -> TextEnvWrapper:
        return TextEnvWrapper(build_raw(raw_env, kwargs, cycles=False))

    env.__doc__ = (f"A wrapped :class:`{raw_env.__name__}` (see its docstring for the parameters); "
                   "``max_cycles=N`` switches to the cycle schedule with N cycles.")  # fmt: skip
    return env


def make_parallel_env_fn(raw_env: Callable[..., Any]) -> Callable[..., Any]:
    """Build ``parallel_env(**kwargs)``: the parallel API over the cycle schedule (:mod:`.parallel`)."""
    def parallel_env(**kwargs: Any) -> TextParallelEnv:
        return TextParallelEnv(TextEnvWrapper(build_raw(raw_env, kwargs, cycles=True)))

    parallel_env.__doc__ = f"A parallel-API view of :class:`{raw_env.__name__}` (one step = one cycle)."
    return parallel_env
