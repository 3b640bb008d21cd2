"""Shared helpers and fixtures for the hostile-program tests (``tests/sandbox/hostile/``).

Each hostile program must end in a precise, harmless outcome. They run on the shared small pool
of ``tests/sandbox/conftest.py`` (1 s per test, 256 MB). The files are numbered so that they run in
order: ``test_1_time.py`` records the caller's state first (through the fixtures below, which every
test of this package uses, so any one file also runs alone) and ``test_6_afterwards.py`` checks
last that nothing was left behind.
"""

from __future__ import annotations

import os
import signal

import pytest

from llm_marl_envs.sandbox import AssertTest

from ..conftest import server_pids

A = AssertTest
CANARY = "sbx-canary-7f3a91"
CALLER_CWD = os.getcwd()
CALLER_SIGNALS = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)}
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")


def outcome(res):
    assert res.ok, res.infra_error
    return [(t.passed, t.error_type) for t in res.tests]


def litter(pid: int) -> list[str]:
    """What a fork server's private temporary directories hold besides its own entries."""
    found = []
    for d in PRIVATE_DIRS:
        if os.path.isdir(f"/proc/{pid}/root{d}"):
            found += [f"{d}/{p}" for p in os.listdir(f"/proc/{pid}/root{d}") if p.startswith("sbx-litter")]
    return found


@pytest.fixture(scope="package", autouse=True)
def private_tmp_before(sandbox):
    """What each fork server's private /tmp holds before the hostile programs run."""
    assert sandbox.wait_idle()
    return {pid: sorted(os.listdir(f"/proc/{pid}/root/tmp")) for pid in server_pids(sandbox)}


@pytest.fixture(scope="package", autouse=True)
def caller_canary():
    """A secret set in the caller's environment while the hostile programs run: it must never reach a job."""
    os.environ["SBX_SECRET_CANARY"] = CANARY
    yield CANARY
    del os.environ["SBX_SECRET_CANARY"]
