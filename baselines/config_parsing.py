"""Turning plain data into configuration dataclasses and back: ``to_dict`` / ``from_dict`` (with light
type coercion and unknown keys refused), ``key=value`` overrides, and the merge of YAML layers.

Generic over dataclasses; :func:`baselines.config.load_config` applies it to :class:`~baselines.config.TrainConfig`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal

import yaml


def to_dict(obj: Any) -> Any:
    """A dataclass tree as plain dicts/lists (YAML/JSON friendly)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(x) for x in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def from_dict(cls: type, data: dict[str, Any] | None, where: str = "") -> Any:
    """Build dataclass ``cls`` from a (possibly partial) dict; unknown keys raise."""
    data = dict(data or {})
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"unknown config key(s) {[where + k for k in unknown]}; known: {sorted(known)}")
    kwargs = {}
    for name, value in data.items():
        tp = hints[name]
        if _is_dataclass_type(tp):
            kwargs[name] = value if dataclasses.is_dataclass(value) else from_dict(tp, value, f"{where}{name}.")
        else:
            kwargs[name] = _coerce(value, tp, where + name)
    return cls(**kwargs)


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Light type coercion for YAML values (int -> float, list -> tuple); mismatches raise."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, where)
            except ValueError as err:
                errors.append(str(err))
        raise ValueError(f"{where}: {value!r} does not fit {tp} ({'; '.join(errors)})")
    if origin is Literal:
        if value not in args:
            raise ValueError(f"{where}: {value!r} is not one of {list(args)}")
        return value
    if tp is Any:
        return value
    if _is_dataclass_type(tp):
        if dataclasses.is_dataclass(value):
            return value
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected a mapping, got {value!r}")
        return from_dict(tp, value, f"{where}.")
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{where}: expected true/false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ValueError(f"{where}: expected a string, got {value!r}")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise ValueError(f"{where}: expected a list of {len(args)} values, got {value!r}")
        return tuple(_coerce(v, a, where) for v, a in zip(value, args))
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected a mapping, got {value!r}")
        return {k: _coerce(v, args[1], f"{where}.{k}") for k, v in value.items()}
    return value


def parse_override(item: str) -> tuple[list[str], Any]:
    """``"optim.lr=1e-3"`` -> (["optim", "lr"], 0.001)."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"overrides look like key=value (e.g. optim.lr=1e-3), got {item!r}")
    value = yaml.safe_load(raw) if raw.strip() else ""
    if isinstance(value, str) and _looks_float(value):
        value = float(value)  # YAML 1.1 reads "1e-3" as a string
    return key.strip().split("."), value


def _looks_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def apply_override(data: dict[str, Any], path: list[str], value: Any) -> None:
    """Set ``data[path[0]][path[1]]... = value`` in a nested dict (creating levels)."""
    node = data
    for part in path[:-1]:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            node[part] = nxt
        node = nxt
    node[path[-1]] = value


def merge_layer(into: dict[str, Any], new: dict[str, Any]) -> None:
    """Recursive merge; a sub-dict replaces only the keys it names (env.kwargs included)."""
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict) and key != "kwargs":
            merge_layer(into[key], value)
        else:
            into[key] = value
