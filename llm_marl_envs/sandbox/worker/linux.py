"""Thin ctypes wrappers for the Linux calls the standard library lacks before Python 3.12:
``unshare``, ``setns``, ``mount``, ``prctl`` and ``capset``. Each raises ``OSError`` on
failure. Used by the fork server (namespaces, mounts) and by its children (capabilities).
"""

from __future__ import annotations

import ctypes
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NAME = 15
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PR_CAPBSET_DROP = 24

_LINUX_CAPABILITY_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def setns(fd: int, nstype: int) -> None:
    _check(_libc.setns(fd, nstype), "setns")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(s: str | None) -> bytes | None:
        return None if s is None else os.fsencode(s)

    _check(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def prctl(option: int, arg2: int = 0) -> None:
    _check(_libc.prctl(option, arg2, 0, 0, 0), "prctl")


def set_process_name(name: bytes) -> None:
    """The name ``ps`` and ``/proc/<pid>/comm`` show (at most 15 bytes)."""
    buf = ctypes.create_string_buffer(name[:15])
    _libc.prctl(PR_SET_NAME, ctypes.addressof(buf), 0, 0, 0)


class PreparedPrctl:
    """One ``prctl`` call with its arguments converted in advance, for freshly forked children.

    Built once in the fork server; calling it in a job process then touches only a few
    objects (a plain ``prctl()`` call converts its arguments through ``argtypes``, and
    :func:`set_process_name` creates a ctypes array type: each costs dozens of copy-on-write
    page faults in a process that has just been forked).
    """

    def __init__(self, option: int, arg2: int | bytes) -> None:
        self._keep = None
        if isinstance(arg2, bytes):  # a string argument (PR_SET_NAME): pass its address
            self._keep = ctypes.create_string_buffer(arg2)
            arg2 = ctypes.addressof(self._keep)
        self._call = _libc["prctl"]  # a function object of its own, without argtypes
        self._call.restype = ctypes.c_int
        zero = ctypes.c_ulong(0)
        self._args = (ctypes.c_int(option), ctypes.c_ulong(arg2), zero, zero, zero)

    def __call__(self) -> None:
        if self._call(*self._args) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"prctl: {os.strerror(err)}")


def limit_malloc_arenas(count: int) -> None:
    """glibc ``mallopt(M_ARENA_MAX, count)``, inherited by forked children; no-op elsewhere."""
    try:
        _libc.mallopt(-8, count)
    except AttributeError:  # pragma: no cover - not glibc
        pass


def trim_heap() -> None:
    """glibc ``malloc_trim(0)``: return free heap memory to the kernel (less for fork to copy)."""
    try:
        _libc.malloc_trim(0)
    except AttributeError:  # pragma: no cover - not glibc
        pass


def drop_all_capabilities() -> None:
    """Empty the effective, permitted, inheritable and bounding capability sets."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:
            break  # EINVAL: past the last capability this kernel knows
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")
