"""Detaching a code task's sandbox when the environment is pickled, and re-attaching it lazily.

A :class:`~llm_marl_envs.sandbox.Sandbox` holds threads, locks and pipes to worker processes:
it cannot be pickled, and should not be -- a copy in another process needs its own workers.
The pickle keeps only the sandbox's configuration; the copy re-attaches on first use to its
process's default sandbox when that one has the same configuration, else to a new sandbox
of that configuration.
"""

from __future__ import annotations

from typing import Any


def detach_sandbox(sandbox: Any) -> Any:
    """The token kept in a pickle: the sandbox's configuration (None: the default sandbox)."""
    return getattr(sandbox, "config", None) if sandbox is not None else None


def reattach_sandbox(token: Any) -> Any:
    """A sandbox for ``token``: this process's default one if its configuration matches, else a new one."""
    from llm_marl_envs.sandbox import Sandbox, default_sandbox

    try:
        return default_sandbox(token)
    except ValueError:  # the process default exists with another configuration
        return Sandbox(token)
