"""Fixtures for the sandbox tests: one small shared pool, and helpers to inspect the workers.

Limits are small (1 s per test, 256 MB) so that hostile programs hit them quickly.
"""

from __future__ import annotations

import os

import pytest

from llm_marl_envs.sandbox import Sandbox, SandboxConfig

SMALL = dict(workers=2, timeout_s=1.0, memory_mb=256, max_output_bytes=1 << 20, report_chars=2000,
             file_size_mb=16, tmpfs_size_mb=64, max_processes=32)


def small_config(**overrides) -> SandboxConfig:
    return SandboxConfig(**{**SMALL, **overrides})


@pytest.fixture(scope="session")
def sandbox():
    with Sandbox(small_config()) as sb:
        yield sb


def server_pids(sb: Sandbox) -> list[int]:
    """The fork servers' pids as seen from here (children of the processes the pool started)."""
    out = []
    for pid in sb.worker_pids():
        children = _children(pid)
        out.extend(children if sb.isolation.get("pid_ns") else [pid])
    return out


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def job_processes(sb: Sandbox) -> list[int]:
    """Every process below the fork servers (job processes still alive, or not reaped yet).

    With PID namespaces, no process of a job may exist once its reply has arrived: this looks at
    once. Without them, leftovers are killed after the reply: this waits until the workers are idle.
    The zygotes (each fork server's clean fork point, ``sbx-zygote``) are not job processes.
    """
    if not sb.isolation.get("pid_ns"):
        assert sb.wait_idle()
    found, todo = [], server_pids(sb)
    while todo:
        for child in _children(todo.pop()):
            if _comm(child) == "sbx-zygote":
                continue
            found.append(child)
            todo.append(child)
    return found


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def processes_named(marker: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as f:
                    if marker in f.read():
                        pids.append(int(entry))
            except OSError:
                continue
    return pids
