"""The strict plain-data encoding that carries values between a job's program and its judge.

Only builtin types cross, by their *exact* type (a subclass of ``int`` or ``list`` is not
plain data, whatever it claims): ``None``, ``bool``, ``int``, ``float`` (NaN, infinities and
``-0.0`` included), ``complex``, ``str``, ``bytes``, ``bytearray``, ``list``, ``tuple``,
``dict``, ``set`` and ``frozenset``, nested at most :data:`MAX_DEPTH` deep. The wire form is
JSON: lists, strings, numbers, ``true``/``false``/``null`` as themselves, everything else as a
one-key object whose key names the type (``{"t": [...]}`` for a tuple). Decoding rebuilds
fresh builtin objects and rejects anything else with :class:`NotPlainData`, so the judge never
holds an object of the program's making: no custom ``__eq__``, ``__hash__`` or ``__bool__``
reaches the comparison. Other references travel as tags the two sides agree on (``h``: an
object kept by the program process, ``g``: one of the program's globals).
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 200
_BIG_INT = 10 ** 4000  # beyond this, ints travel as hex (JSON decoders limit int digits)
_SCALARS = (str, float, type(None), bool)
_dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=True, separators=(",", ":")).encode
_loads = json.JSONDecoder().decode


class NotPlainData(TypeError):
    """A value is not made of builtin types only (or the wire form is not the plain encoding)."""


def encode(value: Any, ref: Any = None) -> str:
    """The wire form of ``value``; ``ref(obj)`` gives the tag of an object that is not plain data
    (None: raise :class:`NotPlainData`)."""
    if type(value) in _SCALARS or (type(value) is int and -_BIG_INT < value < _BIG_INT):
        return _dumps(value)
    return _dumps(to_tree(value, ref))


def to_tree(value: Any, ref: Any = None, depth: int = 0) -> Any:
    """``value`` as a JSON-able tree of the encoding."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is int:
        return value if -_BIG_INT < value < _BIG_INT else {"i": format(value, "x")}
    if depth > MAX_DEPTH:
        raise NotPlainData(f"nested deeper than {MAX_DEPTH} levels")
    depth += 1
    if kind is list:
        return [to_tree(v, ref, depth) for v in value]
    if kind is tuple:
        return {"t": [to_tree(v, ref, depth) for v in value]}
    if kind is dict:
        return {"d": [[to_tree(k, ref, depth), to_tree(v, ref, depth)] for k, v in value.items()]}
    if kind is set:
        return {"s": [to_tree(v, ref, depth) for v in value]}
    if kind is frozenset:
        return {"f": [to_tree(v, ref, depth) for v in value]}
    if kind is bytes:
        return {"b": value.hex()}
    if kind is bytearray:
        return {"y": value.hex()}
    if kind is complex:
        return {"c": [value.real, value.imag]}
    if ref is not None:
        return ref(value)
    raise NotPlainData(f"a {kind.__name__} is not plain data")


def decode(text: str | bytes, deref: Any = None) -> Any:
    """Rebuild a value from its wire form; ``deref(tag, data)`` resolves reference tags."""
    try:
        tree = _loads(text if isinstance(text, str) else text.decode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError) as exc:
        raise NotPlainData(f"malformed plain data: {exc}") from None
    return from_tree(tree, deref)


def from_tree(tree: Any, deref: Any = None, depth: int = 0, tick: Any = None) -> Any:
    """Rebuild a value from its tree; ``tick()``, if given, is called for every container (the
    fork server checks its deadline there: rebuilding a big reply is work done for the program)."""
    kind = type(tree)
    if kind in _SCALARS or kind is int:
        return tree
    if depth > MAX_DEPTH + 1:
        raise NotPlainData("nested too deep")
    depth += 1
    if tick is not None:
        tick()
    if kind is list:
        return [from_tree(v, deref, depth, tick) for v in tree]
    if kind is not dict or len(tree) != 1:
        raise NotPlainData("malformed plain data")
    ((tag, data),) = tree.items()
    try:
        if tag == "t":
            return tuple(from_tree(v, deref, depth, tick) for v in _list(data))
        if tag == "d":
            out = {}
            for pair in _list(data):
                k, v = _list(pair)
                out[from_tree(k, deref, depth, tick)] = from_tree(v, deref, depth, tick)
            return out
        if tag == "s":
            return {from_tree(v, deref, depth, tick) for v in _list(data)}
        if tag == "f":
            return frozenset(from_tree(v, deref, depth, tick) for v in _list(data))
        if tag in ("b", "y"):
            raw = bytes.fromhex(_str(data))
            return raw if tag == "b" else bytearray(raw)
        if tag == "c":
            re_, im = _list(data)
            if type(re_) not in (int, float) or type(im) not in (int, float):
                raise NotPlainData("malformed complex")
            return complex(re_, im)
        if tag == "i":
            return int(_str(data), 16)
    except (TypeError, ValueError, OverflowError) as exc:  # unhashable keys, bad hex, wrong arity, ...
        if isinstance(exc, NotPlainData):
            raise
        raise NotPlainData(f"malformed plain data ({tag}): {exc}") from None
    if deref is not None:
        return deref(tag, data)
    raise NotPlainData(f"unknown tag {tag!r}")


def _list(data: Any) -> list[Any]:
    if type(data) is not list:
        raise NotPlainData("malformed plain data")
    return data


def _str(data: Any) -> str:
    if type(data) is not str:
        raise NotPlainData("malformed plain data")
    return data
