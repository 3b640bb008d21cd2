"""Compiling a job's set-up and assert tests in the caller, once per distinct test set.

A task's tests repeat: GRPO scores every completion of a prompt against the same tests, and
pass@k evaluation scores *k* samples per problem. Compiling a one-line assert costs 15–50 µs
on the 2-core VM, about as much as running it. Without this cache, every job process compiles
its setup and every test again. :class:`TestCodeCache` compiles them in the caller once a test
set repeats, and keeps the result as it travels in the request: the code objects, marshalled
and hex-encoded. The job process then only unmarshals them (~2 µs per test).

Only a job's set-up and assert tests are compiled here (in our tasks, they come from the
dataset); the model's program is compiled and run in the job process only. Compiling runs
nothing, and test sets above 16 KB of source are left to the job process, so a huge test set
cannot stall the caller (where tests are model-written, ``cache_test_code=False`` keeps even
their compilation out of it). A test set that does not compile is left to the job process
too, which reports the broken test as usual. The job process uses the code only if it was
compiled for its own bytecode version (the magic number travels with it); otherwise it
compiles the sources, which always travel too, as do the sources the tracebacks show.
"""

from __future__ import annotations

import collections
import threading
from typing import Any

from .worker.protocol import compile_test_set

MAX_SOURCE_CHARS = 16 << 10  # larger test sets are compiled by the job process, as before
MAX_BLOB_CHARS = 32 << 10  # likewise larger results: a request must stay small (see run_batch)


class TestCodeCache:
    """A bounded, thread-safe cache: (setup, assert tests) -> their compiled code, encoded.

    One per :class:`~llm_marl_envs.sandbox.Sandbox`. A test set is compiled here the second
    time it is seen. The first time, the job process compiles it, as it would without the
    cache, so a one-pass evaluation (every test set once) costs the caller nothing. ``hits``
    counts requests sent with compiled code.
    """

    __test__ = False  # not a pytest test class, despite the name

    def __init__(self, max_entries: int = 2048) -> None:
        self.max_entries = max_entries
        self.hits = 0
        self._entries: collections.OrderedDict[Any, str | None] = collections.OrderedDict()
        self._seen_once: collections.OrderedDict[Any, None] = collections.OrderedDict()
        self._lock = threading.Lock()

    def encoded(self, setup: str, tests: list[dict[str, Any]]) -> str | None:
        """The compiled set-up and tests of a request, or None (the job process compiles them)."""
        sources = [t["code"] for t in tests if t["kind"] == "assert"]
        if not sources or len(setup) + sum(map(len, sources)) > MAX_SOURCE_CHARS:
            return None
        key = (setup, tuple((t["code"], t["name"]) if t["kind"] == "assert" else None for t in tests))
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                blob = self._entries[key]
                self.hits += blob is not None
                return blob
            if key not in self._seen_once:
                _remember(self._seen_once, key, None, self.max_entries)
                return None
            del self._seen_once[key]
        blob = _compile_encoded(setup, tests)
        with self._lock:
            _remember(self._entries, key, blob, self.max_entries)
            self.hits += blob is not None
        return blob


def _remember(entries: collections.OrderedDict[Any, Any], key: Any, value: Any, limit: int) -> None:
    entries[key] = value
    while len(entries) > limit:
        entries.popitem(last=False)  # the least recently used


def _compile_encoded(setup: str, tests: list[dict[str, Any]]) -> str | None:
    try:
        blob = compile_test_set(setup, tests)
    except Exception:  # noqa: BLE001 - SyntaxError, ValueError (null bytes), RecursionError, ...
        return None  # the job process compiles it and reports the broken test
    return blob if len(blob) <= MAX_BLOB_CHARS else None


__all__ = ["TestCodeCache"]
