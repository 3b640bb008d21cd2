"""Small process and descriptor helpers of the fork server: reading output pipes, the stdin
of a run, pidfds, reaping, listing this process's children, and its scheduler group.
"""

from __future__ import annotations

import fcntl
import os
import select
import time
from typing import Any

from . import protocol as P
from .guard import REAL
from .records import START_TIMEOUT_S, RunResult


def read_output(fd: int, buf: bytearray, totals: dict[int, int], cap: int) -> bool:
    """Read what is available on ``fd``, keeping at most ``cap`` bytes; False at end of file."""
    try:
        data = os.read(fd, 1 << 16)
    except OSError:
        return False
    if not data:
        return False
    totals[fd] += len(data)
    room = cap - len(buf)
    if room > 0:
        buf += data[:room]
    return True


def fd_ready(fd: int) -> bool:
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return False


_F_ADD_SEALS = 1033
_SEALS = 0x1 | 0x2 | 0x4 | 0x8  # F_SEAL_SEAL, F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_WRITE


def make_stdin_fd(data: bytes) -> int:
    """A read-only descriptor of ``data`` for a job's stdin, private to it: a sealed memfd (nobody
    can change it, whatever they open it with), mode 0444 (the job may reopen it, /dev/stdin),
    reachable by another process only through ``/proc/<job>/fd/0``, which a non-dumpable job denies."""
    try:
        fd = os.memfd_create("stdin", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    except (AttributeError, OSError):  # pragma: no cover - memfd needs Linux >= 3.17
        path = f"/tmp/.stdin-{os.urandom(8).hex()}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        REAL.unlink(path)
    try:
        P.write_all(fd, data)
        REAL.chmod(fd, 0o444)  # (os.fchmod is the guard's, see .guard)
        try:
            fcntl.fcntl(fd, _F_ADD_SEALS, _SEALS)
        except OSError:  # pragma: no cover - the fallback file: not sealed (0444 and read-only all the same)
            pass
        return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(fd)


def pidfd_open(pid: int) -> int | None:
    try:
        return REAL.pidfd_open(pid)
    except (AttributeError, OSError):  # pragma: no cover - Linux < 5.3: poll with a short period
        return None


HELPER_EXIT_WAIT_S = 1.0  # how long a program process may take to die after its judge stopped


def reap_within(pid: int, timeout_s: float = HELPER_EXIT_WAIT_S) -> tuple[bool, int | None, Any]:
    """Wait up to ``timeout_s`` for child ``pid`` to exit (through its pidfd), then reap it if it did;
    as :func:`try_reap`."""
    pidfd = pidfd_open(pid)
    if pidfd is not None:
        try:
            select.select([pidfd], [], [], timeout_s)
        finally:
            os.close(pidfd)
    return try_reap(pid)


def try_reap(pid: int) -> tuple[bool, int | None, Any]:
    try:
        got, status, usage = os.wait4(pid, os.WNOHANG)
    except ChildProcessError:  # pragma: no cover
        return True, None, None
    if got == 0:
        return False, None, None
    return True, status, usage


def reap_all(zygote: int) -> bool:
    """Reap every exited child; True if some children remain, besides ``zygote``.

    The zygote exiting means the worker cannot go on: the fork server exits (the caller then
    starts a fresh worker).
    """
    while True:
        try:
            got, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if got == zygote:
            os._exit(4)
        if got == 0:
            return len(children_of_self()) > 1


def children_of_self() -> list[int]:
    pids: list[int] = []
    me = os.getpid()
    try:
        for tid in os.listdir(f"/proc/{me}/task"):
            with open(f"/proc/{me}/task/{tid}/children") as f:
                pids.extend(int(p) for p in f.read().split())
    except OSError:  # pragma: no cover - kernels without CONFIG_PROC_CHILDREN: scan /proc
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                            pids.append(int(entry))
                except (OSError, ValueError, IndexError):
                    continue
    return pids


def describe_start_failure(result: RunResult) -> str:
    if result.killed == "start":
        return f"the job process did not start within {START_TIMEOUT_S:g} s"
    how = f"exit code {result.exit_code}" if result.exit_code is not None else f"signal {result.signal}"
    return f"the job process died during set-up ({how})"


class SchedulerGroup:
    """This process's scheduler autogroup (the one its session, hence every job it runs, shares),
    reset to nice 0 after each job. A job cannot write ``/proc/self/autogroup`` (it is not
    dumpable), but an image it exec'd is dumpable again and could lower the priority of every
    later job of this worker."""

    def __init__(self) -> None:
        try:
            self.fd = os.open("/proc/self/autogroup", os.O_RDWR | os.O_CLOEXEC)
        except OSError:  # pragma: no cover - a kernel without autogroups: nothing to reset
            self.fd = -1

    def reset(self) -> bool:
        """Nice 0 again if a job changed it (one read when it did not); False if that failed."""
        if self.fd < 0:
            return True
        try:
            if os.pread(self.fd, 64, 0).rstrip().endswith(b" nice 0"):
                return True
        except OSError:  # pragma: no cover
            return False
        for _ in range(100):  # the kernel takes one such write per 100 ms, machine-wide (EAGAIN)
            try:
                os.write(self.fd, b"0")
                return True
            except BlockingIOError:
                time.sleep(0.02)
            except OSError:  # pragma: no cover
                return False
        return False  # pragma: no cover - the worker is replaced
