"""Turning a freshly forked child of the fork server into a confined job process.

:func:`confine` runs in the child right after ``fork()``, before any untrusted code:
its own process group, standard streams and the result pipe on fixed
descriptors with every other descriptor closed, its own working directory, resource
limits, and (as root) a switch to an unprivileged uid/gid with no supplementary groups.
The environment and the umask are already the job's (the fork server set its own at start-up),
and so is ``PR_SET_NO_NEW_PRIVS`` (no regaining privileges through a set-uid binary). The
parent-death signal kills the job if its fork server dies.
"""

from __future__ import annotations

import _signal
import os
import resource

from . import linux
from .guard import REAL

RESULT_FD = 3  # the harness writes its records here; the program is never told about it

_RLIMITS = {
    "cpu_s": resource.RLIMIT_CPU,
    "address_space_bytes": resource.RLIMIT_AS,
    "file_size_bytes": resource.RLIMIT_FSIZE,
    "open_files": resource.RLIMIT_NOFILE,
    "processes": resource.RLIMIT_NPROC,
    "core_bytes": resource.RLIMIT_CORE,
}


class ChildSpec:
    """Everything :func:`confine` needs; built by the fork server for each run.

    (A plain class: ``dataclasses`` imports ``inspect``, 1.4 MB the fork server would carry.)
    """

    def __init__(self, *, job_dir: str, env: dict[str, str] | None, stdin_fd: int, stdout_fd: int,
                 stderr_fd: int, result_fd: int, rlimits: dict[str, int] | None = None,
                 uid: int | None = None, gid: int | None = None, drop_capabilities: bool = False,
                 parent_death_signal: bool = True) -> None:
        self.job_dir = job_dir
        self.env = env  # None: keep the fork server's (already the job environment)
        self.stdin_fd, self.stdout_fd, self.stderr_fd, self.result_fd = stdin_fd, stdout_fd, stderr_fd, result_fd
        self.rlimits = rlimits or {}  # keys of _RLIMITS; <= 0 = unlimited
        # What confine() passes to setrlimit, prepared here (in the fork server).
        self.setrlimit_args = [(_RLIMITS[key], _limit_pair(_RLIMITS[key], value))
                               for key, value in self.rlimits.items() if value > 0]
        self.uid, self.gid = uid, gid  # switch to this uid/gid (None: keep the current ones)
        self.drop_capabilities = drop_capabilities  # empty the capability sets (user namespace)
        self.parent_death_signal = parent_death_signal  # not needed in a PID namespace


def confine(spec: ChildSpec) -> None:
    """Apply ``spec`` to the calling (freshly forked) process. Raises on any failure."""
    # A new process group (to kill it as a whole). Not setsid(): the fork server already has
    # no controlling terminal, and every new session costs a scheduler autogroup (~1 ms).
    REAL.setpgid(0, 0)
    # The fork server ignores SIGINT. (_signal, not signal: no enum conversions, fewer page faults.)
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    # Order matters: the result pipe goes last, since its source may be one of 0..2's targets.
    os.dup2(spec.stdin_fd, 0)
    os.dup2(spec.stdout_fd, 1)
    os.dup2(spec.stderr_fd, 2)
    os.dup2(spec.result_fd, RESULT_FD)
    os.closerange(RESULT_FD + 1, _MAX_FD)
    os.chdir(spec.job_dir)  # (the umask, 022, is the fork server's)
    for which, limits in spec.setrlimit_args:
        resource.setrlimit(which, limits)
    if spec.env is not None:
        os.environ.clear()
        os.environ.update(spec.env)
    if spec.uid is not None and spec.gid is not None:
        # Each raises if it fails; setting all three ids also empties the capability sets.
        REAL.setgroups([])
        REAL.setresgid(spec.gid, spec.gid, spec.gid)
        REAL.setresuid(spec.uid, spec.uid, spec.uid)
    if spec.drop_capabilities:
        linux.drop_all_capabilities()
    # PR_SET_NO_NEW_PRIVS is inherited from the fork server, which sets it once.
    if spec.parent_death_signal:  # cleared by the credential change above: set it afterwards
        _SET_PARENT_DEATH_SIGNAL()
    # Dumpable again so that /proc/self belongs to the job user (programs may read it).
    _SET_DUMPABLE()
    try:
        _SET_NAME()
    except OSError:  # pragma: no cover - cosmetic
        pass


# Prepared in the fork server (see linux.PreparedPrctl).
_SET_PARENT_DEATH_SIGNAL = linux.PreparedPrctl(linux.PR_SET_PDEATHSIG, _signal.SIGKILL)
_SET_DUMPABLE = linux.PreparedPrctl(linux.PR_SET_DUMPABLE, 1)
_SET_NAME = linux.PreparedPrctl(linux.PR_SET_NAME, b"sbx-job")


# The fork server's hard limits, read once (a job can only lower them).
_HARD = {which: resource.getrlimit(which)[1] for which in _RLIMITS.values()}


def _limit_pair(which: int, value: int) -> tuple[int, int]:
    hard = _HARD[which]
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    return value, value


def _max_fd() -> int:
    try:
        return int(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    except (ValueError, OSError):  # pragma: no cover
        return 65536


_MAX_FD = _max_fd()  # the fork server's open-file limit: no descriptor of a new child is above it
