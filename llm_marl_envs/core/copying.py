"""Copying environments: deep copies that share heavy resources, pickling that detaches process ones.

Three kinds of attributes, declared by a task class:

- ordinary episode state: deep-copied by :func:`copy.deepcopy` and ``clone()``, pickled as is;
- ``shared_attributes`` (a dataset, a retrieval index, a sandbox): shared by a deep copy (the
  copy lives in the same process, so it may use them) but pickled normally;
- ``process_attributes`` (a sandbox handle: threads, locks, pipes to worker processes): shared
  by a deep copy, and *detached* by pickling -- the pickle keeps only a small token made by
  the task's ``_detach_resource(name, value)``; in the unpickled copy the attribute is
  re-created lazily, on first access, by ``_reattach_resource(name, token)``.

So ``pickle.dumps(env)`` works at any point of an episode (a subprocess vector env, a
checkpoint of a search) and ``copy.deepcopy(env)`` is the same as ``env.clone()``. :func:`outermost_wrapper` finds
the wrapper stack a ``clone()`` call came through, so that the copy keeps every wrapper.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from pettingzoo.utils import BaseParallelWrapper, BaseWrapper


@dataclass(frozen=True)
class Detached:
    """What a pickled environment keeps of a process resource: the task's re-attach token."""

    token: Any


def deepcopy_sharing(obj: Any, env: Any, memo: dict[int, Any] | None = None) -> Any:
    """``copy.deepcopy(obj)`` where ``env``'s shared and process attributes are shared, not copied."""
    memo = {} if memo is None else memo
    for value in shared_values(env):
        memo.setdefault(id(value), value)
    return copy.deepcopy(obj, memo)


def shared_values(env: Any) -> list[Any]:
    """The values of ``env``'s ``shared_attributes`` and ``process_attributes`` that are set."""
    names = tuple(getattr(env, "shared_attributes", ())) + tuple(getattr(env, "process_attributes", ()))
    state = vars(env)
    return [state[n] for n in names if state.get(n) is not None]


def deepcopy_env(env: Any, memo: dict[int, Any]) -> Any:
    """The body of ``TextCollabEnv.__deepcopy__``: copy the instance dict, sharing resources."""
    for value in shared_values(env):
        memo.setdefault(id(value), value)
    cls = type(env)
    new = cls.__new__(cls)
    memo[id(env)] = new
    for key, value in vars(env).items():
        new.__dict__[key] = copy.deepcopy(value, memo)
    return new


def getstate(env: Any) -> dict[str, Any]:
    """The body of ``TextCollabEnv.__getstate__``: process attributes become :class:`Detached` tokens."""
    state = dict(vars(env))
    detached = dict(state.pop("_detached", None) or {})
    for name in getattr(env, "process_attributes", ()):
        if name in state:
            detached[name] = env._detach_resource(name, state.pop(name))
    state.update({name: Detached(token) for name, token in detached.items()})
    return state


def setstate(env: Any, state: dict[str, Any]) -> None:
    """The body of ``TextCollabEnv.__setstate__``: detached attributes wait for their first access."""
    detached = {k: v.token for k, v in state.items() if isinstance(v, Detached)}
    env.__dict__.update({k: v for k, v in state.items() if not isinstance(v, Detached)})
    env.__dict__["_detached"] = detached


def reattach(env: Any, name: str) -> Any:
    """Re-create the detached process attribute ``name`` of ``env``; AttributeError if there is none."""
    detached = env.__dict__.get("_detached") or {}
    if name not in detached:
        raise AttributeError(f"{type(env).__name__!r} object has no attribute {name!r}")
    value = env._reattach_resource(name, detached.pop(name))
    env.__dict__[name] = value
    return value


def outermost_wrapper(start: Any, frame: Any) -> Any:
    """The outermost wrapper whose attribute lookup (``__getattr__`` forwarding) led to ``frame``.

    PettingZoo's (and so SuperSuit's) AEC and parallel wrappers forward unknown attributes to
    the env they wrap through ``__getattr__``; walking those frames up from the ``clone``
    lookup finds the wrapper the user called ``clone()`` on.
    """
    outer = start
    while frame is not None and frame.f_code.co_name == "__getattr__":
        owner = frame.f_locals.get("self")
        if not isinstance(owner, (BaseWrapper, BaseParallelWrapper)):
            break
        outer = owner
        frame = frame.f_back
    return outer
