"""``SandboxConfig``: every limit and isolation switch of the sandbox, with safe defaults."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

from .results import SandboxError

DEFAULT_ENV: dict[str, str] = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}

# Cheap standard-library modules that solutions commonly import, loaded once per fork server
# so that a job does not pay for them (what the harness needs is loaded anyway). Not more:
# every module makes each fork and exit a little dearer. Nothing heavy (no numpy). Never
# `random`, `statistics`, `threading` or what imports them (subprocess, tempfile, ...): their
# at-fork hooks would run Python code in every job process.
DEFAULT_PRELOAD: tuple[str, ...] = (
    "bisect", "collections", "copy", "functools", "heapq", "itertools", "json", "math", "operator",
    "re", "string", "typing",
)

# The host paths jobs may read (with a mount namespace): what the interpreter, the C library
# and site-packages need. Every other top-level directory, and every other entry of /etc, is
# hidden behind an empty tmpfs; Python's own directories (prefix, sys.path) are always
# re-exposed, read-only, wherever they are.
DEFAULT_READABLE: tuple[str, ...] = (
    "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr", "/dev", "/proc", "/sys",
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/timezone",
    "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/host.conf", "/etc/resolv.conf",
    "/etc/gai.conf", "/etc/protocols", "/etc/services", "/etc/mime.types", "/etc/ssl", "/etc/ca-certificates",
    "/etc/ca-certificates.conf", "/etc/os-release", "/etc/alternatives", "/etc/fonts", "/etc/matplotlibrc",
)

_IO_COMPARE_MODES = ("exact", "lines", "tokens")


@dataclass(frozen=True)
class SandboxConfig:
    """Limits and isolation settings. All sizes are per job process unless noted.

    Time limits:
        timeout_s: wall-clock limit per test (and for loading the program), seconds.
        cpu_time_s: CPU-seconds per test (default = ``timeout_s``); enforced as RLIMIT_CPU on
            each job process (tests run in one process share the sum).
        job_timeout_s: wall-clock budget for a whole job, re-runs included
            (default: ``timeout_s * (number of tests + 1)``).
    Resources: memory_mb (RLIMIT_AS), file_size_mb (RLIMIT_FSIZE), open_files (RLIMIT_NOFILE),
        max_processes (RLIMIT_NPROC: processes *and threads* of the job user; per worker when
        the worker has its own user namespace), tmpfs_size_mb (the worker's private /tmp).
    Output: max_output_bytes: stdout or stderr beyond this fails the test
        (``OutputLimitExceeded``; for I/O tests at least twice the expected output is allowed);
        report_chars: how much of stdout/stderr/tracebacks is kept in results.
    I/O comparison: io_compare = "exact" | "lines" (default: trailing whitespace of each line and
        trailing blank lines ignored) | "tokens" (whitespace-separated tokens; numbers equal
        within ``float_tolerance`` when it is set).
    Isolation: use_namespaces, drop_privileges (+ uid/gid, only when running as root; the
        judge of assert tests runs as ``judge_uid`` with the same gid, so the program cannot
        signal, trace or read it; uid_per_worker: worker ``i`` uses ``uid - 2i`` and
        ``judge_uid - 2i``, so that jobs of different workers never share a host uid),
        guard (in-interpreter guard), block_network (interpreter-level socket block, in addition
        to the network namespace), allow_subprocesses, private_dirs, hidden_paths,
        readable_paths (the allow-list of host paths jobs may read; see DEFAULT_READABLE), env
        (the complete environment of job processes), tmp_root (job directories when no
        private /tmp is available).
    Pool: workers (default: two per CPU available to this process), pin_workers (each fork server and
        its jobs on one CPU; default: when the workers cover the CPUs evenly), preload_modules,
        infra_retries (re-runs of a job on a fresh worker after an infrastructure failure),
        raise_on_infra_error (raise SandboxError instead of returning a flagged result),
        start_timeout_s, python (interpreter for the workers; default sys.executable),
        cache_test_code (compile each distinct set-up + assert tests once, in the caller, and
        send the code with the requests; only when ``python`` is this interpreter),
        judge_in_server (judge assert tests whose code cannot change the fork server, see
        ``worker/purity.py``, in the fork server itself instead of a judge process: one job
        process per run instead of two; False: always a judge process).
    """

    timeout_s: float = 5.0
    cpu_time_s: float | None = None
    job_timeout_s: float | None = None
    memory_mb: int = 1024
    file_size_mb: int = 64
    open_files: int = 64
    max_processes: int = 32
    tmpfs_size_mb: int = 256
    max_output_bytes: int = 4 << 20
    report_chars: int = 4096
    io_compare: str = "lines"
    float_tolerance: float | None = None
    use_namespaces: bool = True
    drop_privileges: bool = True
    uid: int = 65534
    gid: int = 65534
    judge_uid: int = 65533
    uid_per_worker: bool = True
    guard: bool = True
    block_network: bool = True
    allow_subprocesses: bool = False
    private_dirs: tuple[str, ...] = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
    hidden_paths: tuple[str, ...] = ("/root", "/home")
    readable_paths: tuple[str, ...] = DEFAULT_READABLE
    env: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_ENV))
    tmp_root: str | None = None
    workers: int | None = None
    pin_workers: bool | None = None
    preload_modules: tuple[str, ...] = DEFAULT_PRELOAD
    infra_retries: int = 1
    raise_on_infra_error: bool = False
    start_timeout_s: float = 60.0
    python: str | None = None
    cache_test_code: bool = True
    judge_in_server: bool = True

    def __post_init__(self) -> None:
        positive = ("timeout_s", "memory_mb", "file_size_mb", "open_files", "max_processes", "tmpfs_size_mb",
                    "max_output_bytes", "report_chars", "start_timeout_s")
        for name in positive:
            if not getattr(self, name) > 0:
                raise ValueError(f"SandboxConfig.{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("cpu_time_s", "job_timeout_s"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"SandboxConfig.{name} must be > 0 or None, got {value!r}")
        if self.workers is not None and self.workers < 1:
            raise ValueError("SandboxConfig.workers must be >= 1")
        if self.io_compare not in _IO_COMPARE_MODES:
            raise ValueError(f"SandboxConfig.io_compare must be one of {_IO_COMPARE_MODES}")
        if self.infra_retries < 0:
            raise ValueError("SandboxConfig.infra_retries must be >= 0")
        uids = [self.worker_uids(i) for i in range(self.pool_size)]
        flat = [u for pair in uids for u in pair]
        if len(set(flat)) != len(flat) or min(flat) < 1:
            raise ValueError("SandboxConfig: uid and judge_uid give workers overlapping (or non-positive) uids; "
                             "use uids of different parity (the defaults: 65534 and 65533) or uid_per_worker=False")

    def worker_uids(self, index: int) -> tuple[int, int]:
        """(program uid, judge uid) of fork server ``index`` (see ``uid_per_worker``)."""
        offset = 2 * index if self.uid_per_worker else 0
        return self.uid - offset, self.judge_uid - offset

    @property
    def pool_size(self) -> int:
        """``workers``, or two per CPU available: a job's judge and program processes wait for
        each other, and a second worker on the CPU runs meanwhile."""
        if self.workers is not None:
            return self.workers
        try:
            return 2 * max(1, len(os.sched_getaffinity(0)))
        except (AttributeError, OSError):  # pragma: no cover - not Linux
            return 2 * max(1, os.cpu_count() or 1)

    def worker_cpu(self, index: int, allowed: list[int] | None = None) -> int | None:
        """The CPU that fork server ``index`` (and every job it runs) is pinned to; None: not pinned.

        ``allowed``: the CPUs to use (default: those this process may run on). Worker ``i``
        gets the ``i``-th of them, round robin. ``pin_workers=None`` pins only when the pool
        covers them evenly (``workers`` a multiple of their number, as by default), so that
        several pools, in one process or in many, still spread over all CPUs.
        """
        if self.pin_workers is False:
            return None
        if allowed is None:
            try:
                allowed = sorted(os.sched_getaffinity(0))
            except (AttributeError, OSError):  # pragma: no cover - not Linux
                return None
        if len(allowed) < 2 or (self.pin_workers is None and self.pool_size % len(allowed) != 0):
            return None
        return allowed[index % len(allowed)]

    def job_limits(self, timeout_s: float | None, n_tests: int) -> dict[str, Any]:
        """The per-job limits sent to the fork server."""
        timeout = float(timeout_s if timeout_s is not None else self.timeout_s)
        if not timeout > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        cpu = self.cpu_time_s if self.cpu_time_s is not None else timeout
        budget = self.job_timeout_s if self.job_timeout_s is not None else timeout * (n_tests + 1)
        return {
            "timeout_s": timeout,
            "cpu_time_s": float(cpu),
            "job_timeout_s": float(budget),
            "memory_bytes": int(self.memory_mb) << 20,
            "file_size_bytes": int(self.file_size_mb) << 20,
            "open_files": int(self.open_files),
            "processes": int(self.max_processes),
            "output_bytes": int(self.max_output_bytes),
            "report_chars": int(self.report_chars),
        }

    def worker_settings(self, index: int) -> dict[str, Any]:
        """The start-up settings of fork server ``index``."""
        return {
            "cpu": self.worker_cpu(index),
            "use_namespaces": self.use_namespaces,
            "drop_privileges": self.drop_privileges,
            "uid": self.worker_uids(index)[0],
            "gid": self.gid,
            "judge_uid": self.worker_uids(index)[1],
            "private_dirs": list(self.private_dirs),
            "hidden_paths": list(self.hidden_paths),
            "readable_paths": list(self.readable_paths),
            "tmpfs_size_mb": self.tmpfs_size_mb,
            "tmp_root": self.tmp_root or tempfile.gettempdir(),
            "env": dict(self.env),
            "guard": self.guard,
            "allow_subprocesses": self.allow_subprocesses,
            "block_network": self.block_network,
            "preload": list(self.preload_modules),
            "judge_in_server": self.judge_in_server,
        }


__all__ = ["DEFAULT_ENV", "DEFAULT_PRELOAD", "DEFAULT_READABLE", "SandboxConfig", "SandboxError"]
