"""The strict plain-data encoding that carries values between a job's program and its judge.

Only builtin types cross, by their *exact* type (a subclass of ``int`` or ``list`` is not
plain data, whatever it claims): ``None``, ``bool``, ``int``, ``float`` (NaN, infinities and
``-0.0`` included), ``complex``, ``str``, ``bytes``, ``bytearray``, ``list``, ``tuple``,
``dict``, ``set`` and ``frozenset``, nested at most :data:`MAX_DEPTH` deep. The wire form is
JSON: lists, strings, numbers, ``true``/``false``/``null`` as themselves, everything else as a
one-key object whose key names the type (``{"t": [...]}`` for a tuple). Decoding rebuilds
fresh builtin objects and rejects anything else with :class:`NotPlainData`, so the judge never
holds an object of the program's making: no custom ``__eq__``, ``__hash__`` or ``__bool__``
reaches the comparison. Where decoding runs on CPU no deadline can interrupt (the fork server,
which passes ``tick``), a set, frozenset or dict whose keys collide in ``hash()`` (ints
``n * (2**61 - 1)`` all hash to 0: building a set of them is quadratic, in one C call) is not
built: :class:`HashFlood` is raised, and the fork server hands the run to a judge process. Other references travel as tags the two sides agree on (``h``: an
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


MAX_EQUAL_HASHES = 8  # keys of one set or dict that may share a hash() value where tick is given


class NotPlainData(TypeError):
    """A value is not made of builtin types only (or the wire form is not the plain encoding)."""


class HashFlood(Exception):
    """More than :data:`MAX_EQUAL_HASHES` keys of a set or dict share one ``hash()`` value."""


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
            pairs = [_list(pair) for pair in _list(data)]
            if any(len(pair) != 2 for pair in pairs):
                raise NotPlainData("malformed plain data (d)")
            keys = [from_tree(k, deref, depth, tick) for k, _ in pairs]
            values = [from_tree(v, deref, depth, tick) for _, v in pairs]
            _keys_hash_apart(keys, tick)
            return dict(zip(keys, values))
        if tag in ("s", "f"):
            items = [from_tree(v, deref, depth, tick) for v in _list(data)]
            _keys_hash_apart(items, tick)
            return set(items) if tag == "s" else frozenset(items)
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


def _keys_hash_apart(keys: list[Any], tick: Any) -> None:
    """Where ``tick`` is given: raise :class:`HashFlood` if building a set of ``keys`` could take
    quadratic time (TypeError for an unhashable key). The check hashes each key once and counts
    the hash values in a dict of ints, which distinct values cannot collide in."""
    if tick is None or len(keys) <= MAX_EQUAL_HASHES:
        return
    hashes = [hash(k) for k in keys]
    if len(set(hashes)) == len(hashes):
        return
    counts: dict[int, int] = {}
    for h in hashes:
        counts[h] = counts.get(h, 0) + 1
    if max(counts.values()) > MAX_EQUAL_HASHES:
        raise HashFlood(f"{max(counts.values())} keys of a set or dict share one hash() value")


def _list(data: Any) -> list[Any]:
    if type(data) is not list:
        raise NotPlainData("malformed plain data")
    return data


def _str(data: Any) -> str:
    if type(data) is not str:
        raise NotPlainData("malformed plain data")
    return data
