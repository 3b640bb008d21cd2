"""The data types and the protocol shared by every retriever.

Contract of a :class:`Retriever` (what the search environments rely on):

* ``search(query, k)`` returns at most ``k`` :class:`Passage` objects, best first (scores
  non-increasing), only passages that actually match the query (an empty list when
  nothing matches -- never padding), and the same list for the same query every time.
* ``batch_search(queries, k)`` equals ``[search(q, k) for q in queries]``.
* An infrastructure failure (server down, index unreadable) raises :class:`RetrievalError`;
  it is never reported as "no results", so an environment can tell a broken retriever
  from a bad query.
* A retriever is read-only after construction, so one instance may be shared by every
  clone of an environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Document:
    """One corpus entry."""

    id: str
    title: str
    text: str


@dataclass(frozen=True)
class Passage:
    """One retrieved corpus entry with its retrieval score (higher is better)."""

    id: str
    title: str
    text: str
    score: float


class RetrievalError(RuntimeError):
    """The retriever itself failed (not: the query matched nothing)."""


@runtime_checkable
class Retriever(Protocol):
    """Anything that can return the top-``k`` passages for a text query."""

    def search(self, query: str, k: int) -> list[Passage]: ...

    def batch_search(self, queries: Sequence[str], k: int) -> list[list[Passage]]: ...
