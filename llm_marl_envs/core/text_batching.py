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
- shared memory (``AsyncVectorEnv``'s default) would store text as a fixed-size array of charset
  indices, which free text does not fit: it raises ``CustomSpaceError``, which Gymnasium turns into
  its advice to pass ``shared_memory=False``.

``flatten``, ``flatdim``, ``flatten_space`` and ``unflatten`` refuse ``FreeText`` with
:class:`TextNotFlattenableError`: text has no fixed-size numeric form (Gymnasium's ``Text``
flattening is a ``max_length``-wide vector of charset indices -- a million wide for an
observation -- and fails on characters outside the sample charset). Numeric-model libraries
(RLlib's default models, Stable-Baselines3) call these; an LLM reads the text instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from copy import deepcopy
from typing import Any

from gymnasium import spaces
from gymnasium.error import CustomSpaceError
from gymnasium.spaces.utils import flatdim, flatten, flatten_space, unflatten
from gymnasium.vector.utils import (
    batch_differing_spaces,
    batch_space,
    create_shared_memory,
    iterate,
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


@create_shared_memory.register(FreeText)
def _no_shared_memory(space: FreeText, n: int = 1, ctx: Any = None) -> Any:
    raise CustomSpaceError(
        f"{space!r} holds free text, which has no fixed-size shared-memory form: "
        "use AsyncVectorEnv(..., shared_memory=False)"
    )


def _refuse(space: FreeText, *_: Any) -> Any:
    raise TextNotFlattenableError(
        f"{space!r} cannot be flattened: free text has no fixed-size numeric form. Feed the text to a "
        "language model (or tokenize it yourself); numeric default models (RLlib, SB3) do not apply"
    )


for _fn in (flatdim, flatten, flatten_space, unflatten):
    _fn.register(FreeText)(_refuse)
