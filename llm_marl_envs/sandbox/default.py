"""``default_sandbox()``: one lazily created Sandbox shared by the whole process.

Safe to call from any thread (creation is locked); the pool is killed at interpreter exit.
After ``os.fork()`` the child gets a new pool of its own on its first call, since the
parent's fork servers belong to the parent.
"""

from __future__ import annotations

import atexit
import os
import threading

from .config import SandboxConfig
from .sandbox import Sandbox

_lock = threading.Lock()
_instance: Sandbox | None = None


def default_sandbox(config: SandboxConfig | None = None) -> Sandbox:
    """The process-wide Sandbox, created on first use (with ``config``, or the defaults).

    Passing a ``config`` that differs from the one it was created with raises ValueError.
    """
    global _instance
    with _lock:
        current = _instance
        usable = current is not None and not current.closed and current._owner_pid == os.getpid()
        if usable:
            assert current is not None
            if config is not None and config != current.config:
                raise ValueError("default_sandbox() already exists with another configuration")
            return current
        _instance = Sandbox(config)
        return _instance


def close_default_sandbox() -> None:
    """Kill the default sandbox's workers now (it is re-created on the next call)."""
    global _instance
    with _lock:
        current, _instance = _instance, None
    if current is not None and current._owner_pid == os.getpid():
        current.close()


atexit.register(close_default_sandbox)
