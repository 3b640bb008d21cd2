"""Detaching a code task's sandbox when the environment is pickled, and re-attaching it lazily.

Also :func:`hidden_test_texts`, the code tasks' ``secrets`` (what no observation may show).

A :class:`~llm_marl_envs.sandbox.Sandbox` holds threads, locks and pipes to worker processes:
it cannot be pickled, and should not be -- a copy in another process needs its own workers.
The pickle keeps only the sandbox's configuration; the copy re-attaches on first use to its
process's default sandbox when that one has the same configuration, else to a new sandbox
of that configuration.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: secrets shorter than this are too generic to be a leak ("1", "True")
MIN_SECRET_CHARS = 12


class SandboxResource:
    """Mixin for a task whose ``self.sandbox`` is a process resource (:mod:`llm_marl_envs.core.copying`):
    shared by deep copies, detached when the environment is pickled and re-attached on first use."""

    process_attributes = ("sandbox",)

    def _detach_resource(self, name: str, value: Any) -> Any:
        return detach_sandbox(value)

    def _reattach_resource(self, name: str, token: Any) -> Any:
        return reattach_sandbox(token)


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


def hidden_test_texts(hidden: Sequence[Any], public: Sequence[Any] = (), reference: str | None = None) -> tuple[str, ...]:
    """Texts of the hidden tests not also public (assert code, stdin + expected stdout), and the reference.

    Texts shorter than :data:`MIN_SECRET_CHARS` are left out (too generic to count as a leak).
    """
    shown = {getattr(t, "code", None) or (getattr(t, "stdin", ""), getattr(t, "expected_stdout", "")) for t in public}
    out: list[str] = []
    for t in hidden:
        code = getattr(t, "code", None)
        if code is not None:
            if code not in shown:
                out.append(code.strip())
        elif (t.stdin, t.expected_stdout) not in shown:
            out.append(f"{t.stdin.rstrip()}\n{t.expected_stdout.rstrip()}".strip())
    if reference:
        out.append(reference.strip())
    return tuple(x for x in out if len(x) >= MIN_SECRET_CHARS)
