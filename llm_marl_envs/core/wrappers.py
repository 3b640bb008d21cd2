"""The standard wrapper every task's ``env()`` returns, and the ``env``/``parallel_env`` factories.

PettingZoo's convention: ``raw_env`` is the bare class, ``env()`` returns it wrapped so that
API misuse (stepping before ``reset``...) raises a clear error, and ``parallel_env()``
exists where the task is parallelizable. :class:`TextEnvWrapper` keeps ``clone()``
returning a wrapped environment, so branching works the same on ``env()`` objects.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from pettingzoo.utils import OrderEnforcingWrapper
from pettingzoo.utils.conversions import aec_to_parallel


class TextEnvWrapper(OrderEnforcingWrapper):
    """Order-enforcing wrapper whose ``clone()`` copies the wrapper too."""

    def clone(self) -> TextEnvWrapper:
        inner = self.unwrapped
        memo = {id(getattr(inner, n)): getattr(inner, n) for n in inner.shared_attributes if hasattr(inner, n)}
        return copy.deepcopy(self, memo)

    def observe_chat(self, agent: str) -> list[dict]:
        return self.unwrapped.observe_chat(agent)


def make_env_fn(raw_env: Callable[..., Any]) -> Callable[..., TextEnvWrapper]:
    """Build the module-level ``env(**kwargs)`` factory for a task class."""

    def env(**kwargs: Any) -> TextEnvWrapper:
        return TextEnvWrapper(raw_env(**kwargs))

    env.__doc__ = f"A wrapped :class:`{raw_env.__name__}` (see its docstring for the parameters)."
    return env


def make_parallel_env_fn(raw_env: Callable[..., Any]) -> Callable[..., Any]:
    """Build ``parallel_env(**kwargs)``; raises if the configuration is not parallelizable."""

    def parallel_env(**kwargs: Any):
        aec = raw_env(**kwargs)
        if not aec.metadata.get("is_parallelizable", False):
            raise ValueError(
                f"{type(aec).__name__} with {kwargs} is not parallelizable: agents see each "
                "other's answers within a turn, so they cannot act simultaneously"
            )
        return aec_to_parallel(TextEnvWrapper(aec))

    parallel_env.__doc__ = f"A parallel-API view of :class:`{raw_env.__name__}`."
    return parallel_env
