"""The clean fork point: every job process is forked from a copy of the fork server taken
before it saw any job.

The fork server (here "the server") reads requests, builds replies and parses records: its
heap holds earlier jobs' programs, tests and results, so no job process may be forked from
it. Right after its warm-up, before its first job, it forks the **zygote**, which only ever
receives small spawn commands (a role, resource limits, and descriptors passed with
``SCM_RIGHTS``), never job data. For each command, the zygote forks with ``CLONE_PARENT``,
so the new process is the *server's* child (the server waits for it, reads its rusage, and
kills it as before). The child then confines itself (:mod:`.child`) and reads what it must
run from a descriptor (a memfd the server wrote): the program process only its program, the
judge the set-up and tests.

A command may ask for the new process to be the init of a PID namespace of its own
(``new_pid``: every job process, when the worker has a PID namespace; see .supervisor: all it
starts dies with it), or for a fresh IPC namespace (``new_ipc``; jobs do not use it: their
seccomp filter refuses every IPC object instead, see .seccomp).
"""

from __future__ import annotations

import _socket
import array
import ctypes
import json
import os
from typing import Any

from . import linux
from .guard import REAL

_SYS_CLONE = {"x86_64": 56, "aarch64": 220}.get(os.uname().machine)
_CLONE_PARENT = 0x00008000
_CLONE_NEWPID = 0x20000000
_SIGCHLD = 17
MAX_FDS = 32  # descriptors in one spawn command (all its processes together)
INFRA_EXIT_CODE = 121


class ZygoteGone(OSError):
    """The zygote died or broke the protocol: the worker cannot fork jobs any more."""


def clone_parent(new_pid_namespace: bool = False) -> int:
    """``fork()``, except that the child's parent is this process's parent (``CLONE_PARENT``);
    ``new_pid_namespace``: the child is the init of a new PID namespace (``CLONE_NEWPID``)."""
    api = ctypes.pythonapi
    api.PyOS_BeforeFork()
    flags = _CLONE_PARENT | _SIGCHLD | (_CLONE_NEWPID if new_pid_namespace else 0)
    pid = _PYLIBC.syscall(_SYS_CLONE, flags, 0, 0, 0, 0)
    if pid == 0:
        api.PyOS_AfterFork_Child()
        return 0
    api.PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(ctypes.get_errno(), "clone failed")
    return pid


_PYLIBC = ctypes.PyDLL(None, use_errno=True)  # PyDLL: the GIL stays held across the clone
_PYLIBC.syscall.restype = ctypes.c_long


class Zygote:
    """The server's handle on its zygote."""

    def __init__(self, child_main: Any) -> None:
        """Fork the zygote now; ``child_main(command, fds)`` runs in each spawned process."""
        if _SYS_CLONE is None:  # pragma: no cover - other architectures
            raise OSError("no clone syscall number for this machine")
        ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        pid = REAL.fork()
        if pid == 0:  # pragma: no cover - the zygote
            ours.close()
            try:
                _zygote_loop(theirs, child_main)
            finally:
                os._exit(0)
        theirs.close()
        self.pid = pid
        self.sock = ours

    def spawn(self, *jobs: tuple[dict[str, Any], list[int]]) -> list[int]:
        """Start one job process per ``(command, fds)`` (fds: its 0, 1, 2, 3, 4, ...), in one
        round trip; their pids."""
        commands = [command for command, _ in jobs]
        for command, fds in jobs:
            command["nfds"] = len(fds)
        fds = [fd for _, group in jobs for fd in group]
        try:
            self.sock.sendmsg([json.dumps(commands).encode()],
                              [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", fds))])
            pids = [int(p) for p in self.sock.recv(256).split()]
        except (OSError, ValueError) as exc:
            raise ZygoteGone(f"the zygote failed: {exc}") from None
        if len(pids) != len(jobs) or min(pids) <= 0:
            raise ZygoteGone(f"the zygote could not fork ({pids})")
        return pids


def _zygote_loop(sock: Any, child_main: Any) -> None:  # pragma: no cover - in the zygote
    linux.set_process_name(b"sbx-zygote")
    space = _socket.CMSG_SPACE(MAX_FDS * 4)
    while True:
        try:
            data, ancillary, _flags, _addr = sock.recvmsg(1 << 16, space)
        except InterruptedError:
            continue
        if not data:
            return
        fds: list[int] = []
        for level, kind, payload in ancillary:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                got = array.array("i")
                got.frombytes(payload[: len(payload) - len(payload) % 4])
                fds.extend(got)
        pids = []
        start = 0
        for command in json.loads(data):
            mine = fds[start:start + int(command["nfds"])]
            start += len(mine)
            try:
                if command.get("new_ipc"):
                    linux.unshare(linux.CLONE_NEWIPC)
                pid = clone_parent(bool(command.get("new_pid")))
            except OSError as exc:
                pid = -(exc.errno or 1)
            if pid == 0:
                try:
                    sock.close()
                    child_main(command, mine)
                finally:
                    os._exit(INFRA_EXIT_CODE)
            pids.append(str(pid))
        for fd in fds:
            os.close(fd)
        sock.send(" ".join(pids).encode())
