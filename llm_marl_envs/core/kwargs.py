"""Checking the keyword arguments of a task factory before the task sees them.

``env(n_rounds="3")`` should say that ``n_rounds`` must be an int, not fail later with
``'<' not supported between 'str' and 'int'``. :func:`check_kwargs` compares every keyword
with the annotation of the task class's ``__init__`` parameter of that name, for the plain
types (``int``, ``float``, ``bool``, ``str``, ``None`` and unions of them; ``bool`` is not
accepted for ``int``, an ``int`` is for ``float``); other annotations are left to the task.
Unknown keywords are reported with the list of known ones.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Mapping
from typing import Any

import numpy as np

_PLAIN = (int, float, bool, str, type(None))


def _allowed(annotation: Any) -> tuple[type, ...] | None:
    """The plain types an annotation allows, or None when it is not made of plain types only."""
    if annotation in _PLAIN:
        return (annotation,)
    if annotation is None:
        return (type(None),)
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        out: list[type] = []
        for arg in typing.get_args(annotation):
            sub = _allowed(arg)
            if sub is None:
                return None
            out.extend(sub)
        return tuple(out)
    return None


def _matches(value: Any, allowed: tuple[type, ...]) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool in allowed
    if isinstance(value, (int, np.integer)):
        return int in allowed or float in allowed
    if isinstance(value, (float, np.floating)):
        return float in allowed
    return isinstance(value, allowed)


def _name(t: type) -> str:
    return "None" if t is type(None) else t.__name__


def check_kwargs(cls: type, kwargs: Mapping[str, Any]) -> None:
    """Raise TypeError for an unknown keyword or a value of the wrong plain type."""
    init = cls.__init__
    params = inspect.signature(init).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        known = [n for n, p in params.items() if n != "self" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
        unknown = sorted(set(kwargs) - set(known))
        if unknown:
            raise TypeError(f"{cls.__module__}: unknown argument(s) {unknown}; the task accepts {known}")
    try:
        hints = typing.get_type_hints(init)
    except Exception:  # annotations that cannot be resolved are the task's business
        return
    for key, value in kwargs.items():
        allowed = _allowed(hints.get(key, Any))
        if allowed is not None and not _matches(value, allowed):
            expected = " or ".join(_name(t) for t in allowed)
            raise TypeError(f"{key} must be {expected}, got {type(value).__name__} {value!r}")
