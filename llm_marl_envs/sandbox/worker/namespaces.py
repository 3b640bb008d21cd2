"""Entering the fork server's Linux namespaces (user, network, IPC/UTS, mount, PID).

Called once per fork server, in its bootstrap process, while it is still single-threaded.
Each namespace is attempted separately and the outcome reported, so a kernel or container
that refuses one (e.g. Docker's default seccomp profile refuses them all) degrades to
the remaining layers instead of failing.

* user: as root, a new user namespace with the identity mapping of every uid/gid (files and
  permissions behave exactly as on the host) so that RLIMIT_NPROC is counted per worker
  and one job's fork bomb cannot starve another worker's jobs. Unprivileged, it maps the
  caller's own uid/gid and is what makes the other namespaces possible without root.
* net: an empty network namespace (only a loopback device, left down): no socket can reach
  any host, not even 127.0.0.1.
* ipc/uts: private System V IPC objects and hostname.
* mount: private mounts (see :mod:`.fsview`).
* pid: the fork server becomes PID 1 of a new PID namespace (done by the caller of
  :func:`enter_namespaces` through a fork): jobs cannot see or signal any process outside
  it, and when the fork server dies the kernel kills every process left inside.
"""

from __future__ import annotations

import os

from . import linux


def enter_namespaces(enabled: bool) -> dict[str, object]:
    """Unshare what the kernel allows; returns which namespaces are now in effect.

    The PID namespace only applies to children created afterwards: the caller must fork
    once (the child becomes PID 1) when ``report["pid_ns"]`` is True.
    """
    report: dict[str, object] = {
        "user_ns": False,
        "net_ns": False,
        "ipc_uts_ns": False,
        "mount_ns": False,
        "pid_ns": False,
        "notes": [],
    }
    notes: list[str] = report["notes"]  # type: ignore[assignment]
    if not enabled:
        notes.append("namespaces disabled by configuration")
        return report
    try:
        _enter_user_namespace()
        report["user_ns"] = True
    except OSError as exc:
        notes.append(f"user namespace unavailable ({exc})")
    for key, flags in (
        ("net_ns", linux.CLONE_NEWNET),
        ("ipc_uts_ns", linux.CLONE_NEWIPC | linux.CLONE_NEWUTS),
        ("mount_ns", linux.CLONE_NEWNS),
        ("pid_ns", linux.CLONE_NEWPID),
    ):
        try:
            linux.unshare(flags)
            report[key] = True
        except OSError as exc:
            notes.append(f"{key.replace('_', ' ')} unavailable ({exc})")
    return report


def _enter_user_namespace() -> None:
    uid, gid = os.getuid(), os.getgid()
    if uid != 0:
        linux.unshare(linux.CLONE_NEWUSER)
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
        _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
        return
    # As root the full identity map needs CAP_SETUID in the *parent* namespace, which this
    # process loses by unsharing: a helper forked beforehand writes the maps for it.
    ready_r, ready_w = os.pipe()
    helper = os.fork()
    if helper == 0:  # pragma: no cover - runs in the helper process
        code = 1
        try:
            os.close(ready_w)
            if os.read(ready_r, 1) == b"x":
                parent = os.getppid()
                _write(f"/proc/{parent}/uid_map", "0 0 4294967295\n")
                _write(f"/proc/{parent}/gid_map", "0 0 4294967295\n")
                code = 0
        finally:
            os._exit(code)
    os.close(ready_r)
    try:
        linux.unshare(linux.CLONE_NEWUSER)
    except OSError:
        os.close(ready_w)
        os.waitpid(helper, 0)
        raise
    os.write(ready_w, b"x")
    os.close(ready_w)
    _, status = os.waitpid(helper, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        # Unmapped: we would have no privileges left at all. Nothing sensible to continue with.
        raise RuntimeError("could not write the uid/gid maps of the worker's user namespace")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)
