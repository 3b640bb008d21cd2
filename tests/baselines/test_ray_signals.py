"""``local_cluster`` leaves no process-wide state behind: ray.init's signal handlers are undone."""

from __future__ import annotations

import signal

import pytest

pytest.importorskip("ray")

from baselines.ray_workers import local_cluster  # noqa: E402

pytestmark = pytest.mark.slow


def test_local_cluster_gives_the_callers_signal_handlers_back():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    with local_cluster(num_cpus=1):
        assert signal.getsignal(signal.SIGTERM) != before[signal.SIGTERM]  # ray.init installed its own
    assert {sig: signal.getsignal(sig) for sig in before} == before
