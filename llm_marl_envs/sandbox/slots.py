"""The sandbox's worker slots: who runs next, first come first served.

A :class:`SlotQueue` hands out the indices of a pool's free slots to the threads that ask,
in the order they asked (tickets), and knows who is waiting (a batch, or None for a single
job) so that a batch can give its slot up between jobs when another caller waits. Closing it
wakes every waiter with None.
"""

from __future__ import annotations

import collections
import itertools
import threading
from typing import Any


class SlotQueue:
    """Thread-safe free list of ``size`` slots with a fair (ticket-ordered) wait."""

    def __init__(self, size: int) -> None:
        self._cond = threading.Condition()
        self._idle = list(range(size))
        self._queue: collections.deque[int] = collections.deque()
        self._tickets = itertools.count()
        self._waiting: collections.Counter[Any] = collections.Counter()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def acquire(self, owner: Any = None) -> int | None:
        """A free slot, first come first served (None once the queue is closed)."""
        with self._cond:
            ticket = next(self._tickets)
            self._queue.append(ticket)
            self._waiting[owner] += 1
            try:
                while not self._closed and not (self._idle and self._queue[0] == ticket):
                    self._cond.wait()
                slot = None if self._closed else self._idle.pop()
            finally:
                self._queue.remove(ticket)
                self._waiting[owner] -= 1
                if not self._waiting[owner]:
                    del self._waiting[owner]
                if self._queue and self._idle:
                    self._cond.notify_all()  # the next in line may take another free slot
            return slot

    def release(self, slot: int) -> None:
        with self._cond:
            self._idle.append(slot)
            self._cond.notify_all()  # (the first in line, whichever thread it is)

    def others_waiting(self, owner: Any) -> bool:
        """Whether a caller other than ``owner`` waits for a slot."""
        with self._cond:
            return any(who is not owner for who in self._waiting)

    def close(self) -> None:
        """From now on every ``acquire`` (waiting or not) returns None."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
