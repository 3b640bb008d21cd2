"""Shared fixtures and helpers for the integrity tests (``tests/sandbox/integrity/``).

These are programs that try to make a test report "passed" without solving it, or to read what
they must not (their own tests, earlier jobs), or to keep resources beyond their job.

Each attack test of this package failed on the sandbox before the trusted comparison (the tests are
judged in a process the program cannot reach) and the per-job isolation were added: every
hostile program below got full marks, or found what it looked for, or kept what it made.
The semantics tests (honest programs) pass on both.
"""

from __future__ import annotations

import pytest

from llm_marl_envs.sandbox import Sandbox

from ..conftest import small_config

# Reads every readable anonymous mapping of the job's own memory (heap, stack, anonymous: where any
# data of a job lives) and returns what matches a pattern. Through ctypes, in its own address space:
# a job process is not dumpable, so even its own /proc/self/mem is closed to it.
MEMSCAN = '''
def _scan(pattern):
    import ctypes, re
    rx = re.compile(pattern)
    found = []
    with open('/proc/self/maps') as maps:
        regions = [line.split() for line in maps]
    for r in regions:
        name = r[5] if len(r) > 5 else ''
        if 'r' not in r[1] or name not in ('', '[heap]', '[stack]'):
            continue
        a, b = (int(x, 16) for x in r[0].split('-'))
        if b - a > (256 << 20):
            continue
        found += rx.findall(ctypes.string_at(a, b - a))
    return sorted(set(found))
'''


# Every test of this package using these fixtures runs twice: with the tests judged in the fork
# server where they are of the kind it may judge (the default, see worker/purity.py), and always
# in a judge process.
JUDGES = [pytest.param(True, id="judged-in-server"), pytest.param(False, id="judge-process")]


@pytest.fixture(scope="package", params=JUDGES)
def sandbox(request):
    with Sandbox(small_config(judge_in_server=request.param)) as sb:
        yield sb


@pytest.fixture(scope="package", params=JUDGES)
def one_worker(request):
    """A pool of one: consecutive jobs run on the same fork server."""
    with Sandbox(small_config(workers=1, judge_in_server=request.param)) as sb:
        yield sb


def passed(res) -> list[bool]:
    assert res.ok, res.infra_error
    return [t.passed for t in res.tests]
