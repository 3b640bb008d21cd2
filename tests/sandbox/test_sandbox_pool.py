"""The pool: infrastructure failures, concurrency, the default sandbox, the fallback mode."""

from __future__ import annotations

import os
import signal
import stat
import sys
import threading
import time

import pytest

from llm_marl_envs.sandbox import (
    AssertTest,
    IOTest,
    Job,
    Sandbox,
    SandboxError,
    close_default_sandbox,
    default_sandbox,
)

from .conftest import processes_named, server_pids, small_config

SLEEPY = "import time\ndef f(t):\n    time.sleep(t)\n    return t\n"


def _kill_server_later(sb: Sandbox, delay: float) -> threading.Thread:
    def kill() -> None:
        time.sleep(delay)
        for pid in server_pids(sb):
            os.kill(pid, signal.SIGKILL)

    thread = threading.Thread(target=kill)
    thread.start()
    return thread


def test_a_worker_that_dies_gives_a_flagged_infrastructure_error():
    with Sandbox(small_config(workers=1, infra_retries=0, timeout_s=5)) as sb:
        killer = _kill_server_later(sb, 0.5)
        res = sb.run(SLEEPY, [AssertTest("assert f(3) == 3"), AssertTest("assert 1")])
        killer.join()
        assert res.infra_error is not None and "sandbox worker failed" in res.infra_error
        assert res.tests == [] and res.total == 2 and not res.ok
        with pytest.raises(SandboxError):
            _ = res.pass_fraction
        with pytest.raises(SandboxError):
            _ = res.all_passed
        # the dead worker was replaced
        assert sb.run(SLEEPY, [AssertTest("assert f(0) == 0")]).all_passed


def test_infra_failures_are_retried_on_a_fresh_worker():
    with Sandbox(small_config(workers=1, infra_retries=1, timeout_s=5)) as sb:
        first = server_pids(sb)
        killer = _kill_server_later(sb, 0.3)
        res = sb.run(SLEEPY, [AssertTest("assert f(1) == 1")])
        killer.join()
        assert res.ok and res.all_passed
        assert server_pids(sb) != first


def test_a_closed_sandbox_reports_or_raises(tmp_path):
    sb = Sandbox(small_config(workers=1))
    pids = sb.worker_pids()
    sb.close()
    sb.close()  # idempotent
    res = sb.run("x = 1", [AssertTest("assert x == 1")])
    assert res.infra_error == "the sandbox is closed" and res.tests == []
    assert sb.run_batch([Job("x = 1", [AssertTest("assert x == 1")])])[0].infra_error == "the sandbox is closed"
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or _is_zombie_or_gone(pid)
    strict = Sandbox(small_config(workers=1, raise_on_infra_error=True))
    strict.close()
    with pytest.raises(SandboxError, match="closed"):
        strict.run("x = 1", [AssertTest("assert x == 1")])


def _is_zombie_or_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def test_closing_while_jobs_run_flags_them():
    sb = Sandbox(small_config(workers=2, timeout_s=5))
    results: list = []
    threads = [threading.Thread(target=lambda: results.append(sb.run(SLEEPY, [AssertTest("f(3)")])))
               for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    sb.close()
    for t in threads:
        t.join()
    assert [r.infra_error for r in results] == ["the sandbox was closed while the job was running"] * 2


def test_a_forked_child_cannot_use_the_parents_pool(sandbox):
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            res = sandbox.run("x = 1", [AssertTest("assert x == 1")])
            os.write(write_fd, (res.infra_error or "no error").encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    message = os.read(read_fd, 1000).decode()
    os.close(read_fd)
    os.waitpid(pid, 0)
    assert "belongs to another process" in message
    assert sandbox.run("x = 1", [AssertTest("assert x == 1")]).all_passed


def test_a_worker_that_cannot_start_raises():
    with pytest.raises((SandboxError, OSError)):
        Sandbox(small_config(workers=1, python="/nonexistent/python3"))


def _readable_by_nobody(path: str) -> bool:
    path = os.path.realpath(path)
    while path != "/":
        st = os.stat(path)
        if not st.st_mode & stat.S_IXOTH:
            return False
        path = os.path.dirname(path)
    return True


@pytest.mark.skipif(os.geteuid() != 0, reason="privilege drop only happens as root")
def test_self_test_refuses_a_setup_where_jobs_cannot_import():
    config = small_config(workers=1, use_namespaces=False)
    if all(_readable_by_nobody(p) for p in sys.path if p and os.path.exists(p)):
        with Sandbox(config) as sb:
            assert sb.run("import json", [AssertTest("assert json")]).all_passed
    else:
        with pytest.raises(SandboxError, match="cannot work"):
            Sandbox(config)


def test_many_threads_share_one_sandbox(sandbox):
    errors: list = []

    def worker(k: int) -> None:
        for j in range(4):
            expected = k * 100 + j
            res = sandbox.run(f"def f():\n    return {expected}\n",
                              [AssertTest(f"assert f() == {expected}"), AssertTest(f"assert f() != {expected}")])
            if [t.passed for t in res.tests] != [True, False]:
                errors.append((k, j, res))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_concurrent_batches_from_several_threads(sandbox):
    out: dict = {}

    def batch(k: int) -> None:
        jobs = [Job(f"print({k} * {i})", [IOTest("", f"{k * i}\n")]) for i in range(6)]
        out[k] = [r.all_passed for r in sandbox.run_batch(jobs)]

    threads = [threading.Thread(target=batch, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == {k: [True] * 6 for k in range(4)}


# -- run_batch: a task per worker, the next request queued while a job runs ------------------
def test_a_batch_survives_its_worker_being_killed():
    with Sandbox(small_config(workers=1, infra_retries=1, timeout_s=5)) as sb:
        first = server_pids(sb)
        killer = _kill_server_later(sb, 0.3)
        jobs = [Job(SLEEPY, [AssertTest(f"assert f(0.1) == 0.1 and {i} >= 0")]) for i in range(8)]
        results = sb.run_batch(jobs)
        killer.join()
        assert [(r.ok, r.all_passed) for r in results] == [(True, True)] * 8
        assert server_pids(sb) != first


def test_without_retries_only_the_running_job_of_a_killed_worker_fails():
    with Sandbox(small_config(workers=1, infra_retries=0, timeout_s=5)) as sb:
        killer = _kill_server_later(sb, 0.3)
        jobs = [Job(SLEEPY, [AssertTest("assert f(0.2) == 0.2")]) for _ in range(6)]
        results = sb.run_batch(jobs)
        killer.join()
        failed = [r for r in results if not r.ok]
        assert len(failed) == 1 and "sandbox worker failed" in failed[0].infra_error
        assert all(r.all_passed for r in results if r.ok)


def test_a_batch_gives_its_worker_up_to_other_callers():
    with Sandbox(small_config(workers=1, timeout_s=5)) as sb:
        jobs = [Job(SLEEPY, [AssertTest("assert f(0.05) == 0.05")]) for _ in range(30)]
        done: dict = {}

        def batch() -> None:
            done["batch"] = [r.all_passed for r in sb.run_batch(jobs)]
            done["batch_end"] = time.monotonic()

        thread = threading.Thread(target=batch)
        thread.start()
        time.sleep(0.3)
        res = sb.run(SLEEPY, [AssertTest("assert f(0) == 0")])
        single_end = time.monotonic()
        thread.join()
        assert res.all_passed and done["batch"] == [True] * 30
        assert single_end < done["batch_end"] - 0.3  # it did not wait for the whole batch


def test_a_batch_with_big_requests_and_invalid_tests():
    big = "x = 1\n" + "# padding\n" * 20_000 + "def f():\n    return x\n"
    assert len(big) > 100_000
    jobs = [Job(big, [AssertTest("assert f() == 1")]), Job(big, [AssertTest("assert (")]),
            Job("def f():\n    return 2\n", [AssertTest("assert f() == 2")]), Job(big, [AssertTest("assert f() == 2")])]
    with Sandbox(small_config(workers=1)) as sb:
        results = sb.run_batch(jobs * 2)
        assert [(r.ok, r.ok and r.all_passed) for r in results] == [(True, True), (False, False), (True, True),
                                                                    (True, False)] * 2
        assert "test 0 does not compile" in results[1].infra_error
    with Sandbox(small_config(workers=2, raise_on_infra_error=True)) as strict:
        with pytest.raises(SandboxError, match="does not compile"):
            strict.run_batch(jobs)
        assert strict.run_batch(jobs[:1] + jobs[2:3])[1].all_passed  # still usable


def test_job_time_budget_bounds_reruns():
    with Sandbox(small_config(workers=1, timeout_s=0.3, job_timeout_s=1.0)) as sb:
        t0 = time.monotonic()
        res = sb.run("def f():\n    while True:\n        pass\n", [AssertTest("f()")] * 8)
        assert time.monotonic() - t0 < 3
        assert all(not t.passed for t in res.tests)
        assert res.tests[0].timed_out and res.tests[-1].error_type in ("NotRun", "TimeoutError")
        assert any("budget" in (t.error_message or "") for t in res.tests)


def test_default_sandbox_is_shared_across_threads():
    close_default_sandbox()
    config = small_config(workers=1)
    found: list = []
    threads = [threading.Thread(target=lambda: found.append(default_sandbox(config))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(s) for s in found}) == 1
    first = found[0]
    assert first.run("x = 2", [AssertTest("assert x == 2")]).all_passed
    with pytest.raises(ValueError):
        default_sandbox(small_config(workers=2))
    close_default_sandbox()
    assert first.closed
    again = default_sandbox(config)
    assert again is not first and not again.closed
    close_default_sandbox()


def test_fallback_without_namespaces_or_privilege_drop(tmp_path):
    config = small_config(workers=1, use_namespaces=False, drop_privileges=False, tmp_root=str(tmp_path))
    with Sandbox(config) as sb:
        iso = sb.isolation
        assert (iso["net_ns"], iso["pid_ns"], iso["mount_ns"], iso["privileges_dropped"]) == (False,) * 4
        assert iso["subreaper"] is True and iso["pid_ns_per_job"] is False
        program = (
            "import ctypes, os, socket, time\nlibc = ctypes.CDLL(None)\n"
            "def connect():\n    socket.create_connection(('127.0.0.1', 9), timeout=0.2)\n"
            "def daemon():\n    if libc.fork() == 0:\n        libc.setsid()\n        if libc.fork() == 0:\n"
            "            libc.prctl(15, b'sbxfallback7', 0, 0, 0)\n            time.sleep(60)\n"
            "        os._exit(0)\n    time.sleep(0.2)\n"
            "def work():\n    open('scratch.txt', 'w').write('x')\n    return os.getcwd()\n"
        )
        res = sb.run(program, [AssertTest("connect()"), AssertTest("daemon()"),
                               AssertTest(f"assert work().startswith({str(tmp_path)!r})")])
        assert [(t.passed, t.error_type) for t in res.tests] == [(False, "PermissionError"), (True, None), (True, None)]
        assert sb.wait_idle()
        assert processes_named("sbxfallback7") == []
        assert os.listdir(tmp_path) == []


def test_isolation_report(sandbox):
    iso = sandbox.isolation
    for key in ("net_ns", "pid_ns", "mount_ns", "user_ns", "privileges_dropped", "private_tmp", "notes"):
        assert key in iso
    if os.geteuid() == 0:
        assert iso["privileges_dropped"] and iso["run_uid"] in {65534 - 2 * i for i in range(sandbox.size)}  # uid_per_worker


def test_which_cpu_each_worker_is_pinned_to():
    cpus = [3, 5]
    pinned = [small_config(workers=n).worker_cpu(i, cpus) for n in (2, 4) for i in range(n)]
    assert pinned == [3, 5, 3, 5, 3, 5]
    # Uneven pools are not pinned unless asked to; a single CPU or pin_workers=False never is.
    assert [small_config(workers=3).worker_cpu(i, cpus) for i in range(3)] == [None, None, None]
    assert [small_config(workers=3, pin_workers=True).worker_cpu(i, cpus) for i in range(3)] == [3, 5, 3]
    assert small_config(workers=2, pin_workers=False).worker_cpu(0, cpus) is None
    assert small_config(workers=2, pin_workers=True).worker_cpu(1, [7]) is None


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_pinned_workers_and_their_jobs_stay_on_one_cpu_each():
    allowed = sorted(os.sched_getaffinity(0))
    probe = Job("import os\nprint(sorted(os.sched_getaffinity(0)))\n", [])
    with Sandbox(small_config(workers=2, pin_workers=True)) as sb:
        assert sorted(tuple(os.sched_getaffinity(pid)) for pid in server_pids(sb)) == [(allowed[0],), (allowed[1],)]
        seen = {r.stdout.strip() for r in sb.run_batch([probe] * 8)}
        assert seen <= {f"[{allowed[0]}]", f"[{allowed[1]}]"} and seen
    with Sandbox(small_config(workers=2, pin_workers=False)) as sb:
        assert {r.stdout.strip() for r in sb.run_batch([probe] * 4)} == {str(allowed)}
