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
import fcntl
import os
import resource

from . import linux
from .guard import REAL
from .seccomp import PreparedFilter

RESULT_FD = 3  # the harness writes its records here; the program is never told about it

_RLIMITS = {
    "cpu_s": resource.RLIMIT_CPU,
    "address_space_bytes": resource.RLIMIT_AS,
    "file_size_bytes": resource.RLIMIT_FSIZE,
    "open_files": resource.RLIMIT_NOFILE,
    "processes": resource.RLIMIT_NPROC,
    "core_bytes": resource.RLIMIT_CORE,
    "stack_bytes": resource.RLIMIT_STACK,
}
_ALWAYS = ("core_bytes",)  # set even when 0 (0 is the point: no core files)


class ChildSpec:
    """Everything :func:`confine` needs; built by the fork server for each run.

    (A plain class: ``dataclasses`` imports ``inspect``, 1.4 MB the fork server would carry.)
    """

    def __init__(self, *, job_dir: str, env: dict[str, str] | None, stdin_fd: int, stdout_fd: int,
                 stderr_fd: int, result_fd: int, rlimits: dict[str, int] | None = None,
                 uid: int | None = None, gid: int | None = None, drop_capabilities: bool = False,
                 parent_death_signal: bool = True, extra_fds: list[int] | None = None, pgid: int = 0,
                 seccomp: bool = False) -> None:
        self.job_dir = job_dir
        self.env = env  # None: keep the fork server's (already the job environment)
        self.stdin_fd, self.stdout_fd, self.stderr_fd, self.result_fd = stdin_fd, stdout_fd, stderr_fd, result_fd
        self.rlimits = rlimits or {}  # keys of _RLIMITS; <= 0 = unlimited
        # What confine() passes to setrlimit, prepared here (in the fork server).
        self.setrlimit_args = [(_RLIMITS[key], _limit_pair(_RLIMITS[key], value))
                               for key, value in self.rlimits.items() if value > 0 or key in _ALWAYS]
        self.uid, self.gid = uid, gid  # switch to this uid/gid (None: keep the current ones)
        self.drop_capabilities = drop_capabilities  # empty the capability sets (user namespace)
        self.parent_death_signal = parent_death_signal  # not needed in a PID namespace
        self.extra_fds = extra_fds or []  # become descriptors 4, 5, ... (after the result fd, 3)
        self.pgid = pgid  # the process group to join (0: a new one, led by this process)
        self.seccomp = seccomp  # install the job filter (.seccomp) once confined


def confine(spec: ChildSpec) -> None:
    """Apply ``spec`` to the calling (freshly forked) process. Raises on any failure."""
    # A new process group (to kill it as a whole). Not setsid(): the fork server already has
    # no controlling terminal, and every new session costs a scheduler autogroup (~1 ms).
    REAL.setpgid(0, spec.pgid)
    # The fork server ignores SIGINT. (_signal, not signal: no enum conversions, fewer page faults.)
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    # The sources may be any of the targets: move them all out of the way first.
    sources = [spec.stdin_fd, spec.stdout_fd, spec.stderr_fd, spec.result_fd, *spec.extra_fds]
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, 16 + len(sources)) for fd in sources]
    for target, fd in enumerate(moved):
        os.dup2(fd, target)
    os.closerange(len(sources), _MAX_FD)
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
    # Not dumpable (as the fork server; the credential change above may have set the system's
    # default): no other process, even of the same uid, may open its memory (/proc/PID/mem), its
    # descriptors (/proc/PID/fd/0: the stdin) or its /proc files (they belong to root: a job cannot
    # renice the scheduler group it shares with its fork server through /proc/self/autogroup).
    # The seccomp filter refuses PR_SET_DUMPABLE from then on.
    _SET_NOT_DUMPABLE()
    if spec.seccomp:
        _SECCOMP()
    try:
        _SET_NAME()
    except OSError:  # pragma: no cover - cosmetic
        pass


# Prepared in the fork server (see linux.PreparedPrctl).
_SET_PARENT_DEATH_SIGNAL = linux.PreparedPrctl(linux.PR_SET_PDEATHSIG, _signal.SIGKILL)
_SET_NOT_DUMPABLE = linux.PreparedPrctl(linux.PR_SET_DUMPABLE, 0)
_SET_NAME = linux.PreparedPrctl(linux.PR_SET_NAME, b"sbx-job")
_SECCOMP = PreparedFilter()


# The fork server's hard limits, read once (a job can only lower them).
_HARD = {which: resource.getrlimit(which)[1] for which in _RLIMITS.values()}
_SOFT_STACK = resource.getrlimit(resource.RLIMIT_STACK)[0]


def _limit_pair(which: int, value: int) -> tuple[int, int]:
    hard = _HARD[which]
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    if which == resource.RLIMIT_STACK:  # a bounded hard limit; the soft one stays as it was (8 MB)
        soft = _SOFT_STACK if _SOFT_STACK != resource.RLIM_INFINITY else value
        return min(soft, value), value
    return value, value


def _max_fd() -> int:
    try:
        return int(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    except (ValueError, OSError):  # pragma: no cover
        return 65536


_MAX_FD = _max_fd()  # the fork server's open-file limit: no descriptor of a new child is above it
