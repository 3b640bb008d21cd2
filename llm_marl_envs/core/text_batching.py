"""``FreeText`` under Gymnasium's vector and flattening utilities (registered on import of ``core``).

Gymnasium's vector envs batch a space with ``batch_space(single, n)`` and hand env ``i`` its
action with ``iterate(batched, actions)``; SuperSuit's vector envs call ``iterate(single,
actions)`` with the *single* space instead. Both must give each env its own whole string:

- ``batch_space(FreeText, n)`` (and ``batch_differing_spaces``) is a :class:`BatchedFreeText`,
  a ``Tuple`` of ``n`` ``FreeText`` whose ``iterate`` yields one string per env (Gymnasium's
  default for a ``Tuple`` zips the iterates of its parts, which splits strings into characters);
- ``iterate(FreeText, batch)`` (SuperSuit's call) iterates the batch; a single ``str`` is refused,
  since iterating it would hand out characters;
- batching the observations (``concatenate``, ``create_empty_array`` on the single space) is
  Gymnasium's own handling of ``Text``: a tuple of strings;
- shared memory (``AsyncVectorEnv``'s default): Gymnasium's ``Text`` form (a fixed-size array of
  charset indices, decoded once when the vector env starts) fits neither free text nor changing
  observations, so ``FreeText`` has its own: one slot per env of ``4 * max_length`` bytes of UTF-8
  and the length, read back as :class:`SharedTexts`, a live view decoded on access (a plain tuple of
  strings once copied, which ``AsyncVectorEnv``'s default ``copy=True`` does at every step).

``flatten``, ``flatdim``, ``flatten_space`` and ``unflatten`` refuse ``FreeText`` with
:class:`TextNotFlattenableError`: text has no fixed-size numeric form (Gymnasium's ``Text``
flattening is a ``max_length``-wide vector of charset indices -- a million wide for an
observation -- and fails on characters outside the sample charset). Numeric-model libraries
(RLlib's default models, Stable-Baselines3) call these; an LLM reads the text instead.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator, Sequence
from copy import deepcopy
from types import ModuleType
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.spaces.utils import flatdim, flatten, flatten_space, unflatten
from gymnasium.vector.utils import (
    batch_differing_spaces,
    batch_space,
    create_shared_memory,
    iterate,
    read_from_shared_memory,
    write_to_shared_memory,
)

from llm_marl_envs.core.spaces import FreeText


class TextNotFlattenableError(ValueError):
    """A ``FreeText`` space was asked for a flat numeric form, which text does not have."""


class BatchedFreeText(spaces.Tuple):
    """``n`` ``FreeText`` spaces batched by a vector env: a tuple with one string per env."""

    def __init__(self, parts: Sequence[FreeText], seed: Any = None) -> None:
        if not parts or not all(isinstance(p, FreeText) for p in parts):
            raise TypeError(f"BatchedFreeText batches FreeText spaces, got {list(parts)!r}")
        super().__init__(tuple(parts), seed=seed)

    def __repr__(self) -> str:
        return f"BatchedFreeText({self.spaces[0]!r} x {len(self.spaces)})"


@batch_space.register(FreeText)
def _batch_free_text(space: FreeText, n: int = 1) -> BatchedFreeText:
    batched = BatchedFreeText([deepcopy(space) for _ in range(n)], seed=deepcopy(space.np_random))
    batched.seed([int(s) for s in deepcopy(space.np_random).integers(0, int(1e8), n)])
    return batched


@batch_differing_spaces.register(FreeText)
def _batch_differing_free_text(parts: Sequence[FreeText]) -> BatchedFreeText:
    return BatchedFreeText([deepcopy(p) for p in parts], seed=deepcopy(parts[0].np_random))


def _strings(items: Any, what: str) -> Iterator[Any]:
    if isinstance(items, (str, bytes)):
        raise TypeError(
            f"iterate({what}, items) takes a batch of texts (one per env), got a single "
            f"{type(items).__name__} {items!r:.40}: iterating it would hand each env one character"
        )
    return iter(items)


@iterate.register(BatchedFreeText)
def _iterate_batched_free_text(space: BatchedFreeText, items: Any) -> Iterator[Any]:
    return _strings(items, "BatchedFreeText")


@iterate.register(FreeText)
def _iterate_free_text(space: FreeText, items: Any) -> Iterator[Any]:
    """SuperSuit iterates a batch with the single space (``concat_vec_envs_v1``, Markov vector env)."""
    return _strings(items, "FreeText")


_LENGTH = 8  # bytes of a slot's length header


def _slot(space: FreeText) -> int:
    """Bytes of one env's slot: the length, then room for ``max_length`` characters of UTF-8."""
    return _LENGTH + 4 * space.max_length


def _bytes(shared_memory: Any) -> np.ndarray:
    return np.frombuffer(shared_memory.get_obj(), dtype=np.uint8)


class SharedTexts(Sequence):
    """The current texts of ``n`` envs in shared memory, decoded on access (a live view, as Gymnasium's
    numeric shared observations are); ``copy.deepcopy`` and ``tuple()`` give a plain tuple of strings."""

    def __init__(self, space: FreeText, shared_memory: Any, n: int) -> None:
        self._space, self._memory, self._n = space, shared_memory, n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(self._n)))
        if not -self._n <= index < self._n:
            raise IndexError(f"env {index} of {self._n}")
        start = (index % self._n) * _slot(self._space)
        data = _bytes(self._memory)
        length = int.from_bytes(data[start:start + _LENGTH].tobytes(), "little")
        return data[start + _LENGTH:start + _LENGTH + length].tobytes().decode("utf-8")

    def __deepcopy__(self, memo: dict) -> tuple[str, ...]:
        return tuple(self)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SharedTexts({tuple(self)!r})"


@create_shared_memory.register(FreeText)
def _free_text_shared_memory(space: FreeText, n: int = 1, ctx: ModuleType = multiprocessing) -> Any:
    return ctx.Array("B", n * _slot(space))


@read_from_shared_memory.register(FreeText)
def _read_free_text(space: FreeText, shared_memory: Any, n: int = 1) -> SharedTexts:
    return SharedTexts(space, shared_memory, n)


@write_to_shared_memory.register(FreeText)
def _write_free_text(space: FreeText, index: int, value: str, shared_memory: Any) -> None:
    if not space.contains(value):
        raise ValueError(f"{space!r} does not contain {value!r:.80} (a str of at most {space.max_length} chars)")
    data, encoded = value.encode("utf-8"), _bytes(shared_memory)
    start = index * _slot(space)
    encoded[start:start + _LENGTH] = np.frombuffer(len(data).to_bytes(_LENGTH, "little"), dtype=np.uint8)
    encoded[start + _LENGTH:start + _LENGTH + len(data)] = np.frombuffer(data, dtype=np.uint8)


def _refuse(space: FreeText, *_: Any) -> Any:
    raise TextNotFlattenableError(
        f"{space!r} cannot be flattened: free text has no fixed-size numeric form. Feed the text to a "
        "language model (or tokenize it yourself); numeric default models (RLlib, SB3) do not apply"
    )


for _fn in (flatdim, flatten, flatten_space, unflatten):
    _fn.register(FreeText)(_refuse)
