"""After all hostile programs (this file runs last): nothing left behind, the caller unharmed."""

from __future__ import annotations

import os
import signal
import tempfile

from ..conftest import job_processes
from .conftest import CALLER_CWD, CALLER_SIGNALS, CANARY, A, litter, outcome


def test_zz_nothing_left_behind_and_the_caller_unharmed(sandbox, private_tmp_before):
    assert job_processes(sandbox) == []
    assert sandbox.wait_idle()  # (the last job's files are deleted right after its reply)
    for pid, entries in private_tmp_before.items():
        assert sorted(os.listdir(f"/proc/{pid}/root/tmp")) == entries
        assert os.listdir(f"/proc/{pid}/root/dev/shm") == []
        assert litter(pid) == []
    assert not [p for p in os.listdir(tempfile.gettempdir()) if p.startswith("llm-sandbox-job-")]
    assert os.getcwd() == CALLER_CWD and os.environ["SBX_SECRET_CANARY"] == CANARY
    assert {s: signal.getsignal(s) for s in CALLER_SIGNALS} == CALLER_SIGNALS
    assert outcome(sandbox.run("def f():\n    return 1\n", [A("assert f() == 1")])) == [(True, None)]
