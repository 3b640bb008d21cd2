"""The caller's compiled-test cache (testcode.py) and how job processes use what it sends."""

from __future__ import annotations

import importlib.util
import marshal

from llm_marl_envs.sandbox import AssertTest, IOTest, Job, Sandbox
from llm_marl_envs.sandbox.assemble import build_request
from llm_marl_envs.sandbox.testcode import MAX_SOURCE_CHARS, TestCodeCache
from llm_marl_envs.sandbox.worker import harness

from .conftest import small_config

ADD = "def add(a, b):\n    return a + b\n"
TESTS = [AssertTest("assert add(1, 2) == 3", "ok"), AssertTest("assert add(2, 2) == 5", "bad")]


def _request(cache: TestCodeCache | None, tests=TESTS, setup: str = "") -> dict:
    return build_request(Job(ADD, list(tests), setup), small_config(), cache)


def test_a_test_set_is_compiled_from_its_second_use_and_then_reused():
    cache = TestCodeCache()
    assert "compiled" not in _request(cache)  # first use: the job process compiles it
    second, third = _request(cache), _request(cache)
    assert second["compiled"] == third["compiled"] and cache.hits == 2
    magic, setup_code, codes = marshal.loads(bytes.fromhex(second["compiled"]))
    assert magic == importlib.util.MAGIC_NUMBER and setup_code.co_filename == "<setup>"
    assert [c.co_filename for c in codes] == ["<test ok>", "<test bad>"]
    # Another name, setup or code is another test set.
    assert "compiled" not in _request(cache, setup="x = 1\n")
    assert "compiled" not in _request(cache, [AssertTest("assert add(1, 2) == 3", "renamed"), TESTS[1]])
    assert "compiled" not in build_request(Job(ADD, list(TESTS)), small_config(), None)


def test_what_the_cache_leaves_to_the_job_process():
    cache = TestCodeCache()
    broken = [AssertTest("assert add(1, 2) ==", "broken")]
    huge = [AssertTest("assert add(1, 2) == 3" + " " * MAX_SOURCE_CHARS, "huge")]
    io_only = [IOTest("1", "1")]
    null_byte = [AssertTest("assert True\x00", "nul")]
    too_deep = [AssertTest("assert " + "(" * 300 + "1" + ")" * 300, "deep")]
    for tests in (broken, huge, io_only, null_byte, too_deep):
        for _ in range(3):
            assert "compiled" not in _request(cache, tests)
    assert cache.hits == 0
    mixed = [IOTest("1", "1"), TESTS[0]]
    _request(cache, mixed)
    _, _, codes = marshal.loads(bytes.fromhex(_request(cache, mixed)["compiled"]))
    assert codes[0] is None and codes[1].co_filename == "<test ok>"


def test_the_cache_is_bounded():
    cache = TestCodeCache(max_entries=3)
    for i in range(10):
        for _ in range(2):
            _request(cache, [AssertTest(f"assert add({i}, 0) == {i}", "t")])
    assert len(cache._entries) == 3 and len(cache._seen_once) <= 3
    assert "compiled" not in _request(cache, [AssertTest("assert add(0, 0) == 0", "t")])  # evicted


def test_the_job_process_ignores_code_it_cannot_use():
    request = _request(None)
    indices = [0, 1]
    assert harness._load_compiled(request, indices) is None  # none sent
    for blob in ("not hex !", b"junk".hex(),
                 _blob(b"\x00\x00\r\n", "", ["pass", "pass"]),  # another bytecode version
                 _blob(importlib.util.MAGIC_NUMBER, "", ["pass"])):  # not one code per test
        assert harness._load_compiled({**request, "compiled": blob}, indices) is None
    loaded = harness._load_compiled({**request, "compiled": _blob(importlib.util.MAGIC_NUMBER, "", ["x = 1", "y = 2"])},
                                    indices)
    assert loaded is not None and [i for i, _ in loaded[1]] == indices


def _blob(magic: bytes, setup: str, tests: list[str]) -> str:
    codes = tuple(compile(t, f"<test {i}>", "exec") for i, t in enumerate(tests))
    return marshal.dumps((magic, compile(setup, "<setup>", "exec"), codes)).hex()


def test_repeated_jobs_give_the_same_results_with_compiled_tests(sandbox):
    setup = "def check(f):\n    assert f(1, 1) == 2\n"
    tests = [*TESTS, AssertTest("check(add)", "check"), AssertTest("assert add(1, 2) ==", "broken")]
    results = [sandbox.run(ADD, tests[:3], setup=setup) for _ in range(3)]
    assert sandbox.test_code_hits >= 1  # the third run (at least) used the caller's code
    for res in results:
        assert [(t.name, t.passed, t.error_type) for t in res.tests] == [
            ("ok", True, None), ("bad", False, "AssertionError"), ("check", True, None)]
        assert "assert add(2, 2) == 5" in res.tests[1].traceback  # the test's source line, from linecache
    broken = [sandbox.run(ADD, tests, setup=setup) for _ in range(3)]
    assert all(r.infra_error and "test 3 does not compile" in r.infra_error for r in broken)


def test_the_job_process_runs_the_code_the_caller_sent():
    class Swapped(TestCodeCache):
        """Sends code compiled from other sources than the requests carry."""

        def encoded(self, setup, tests):
            swapped = [{**t, "code": "assert True"} for t in tests]
            return super().encoded(setup, swapped)

    with Sandbox(small_config(workers=1)) as sb:
        sb._test_code = Swapped()
        failing = [AssertTest("assert False", "t")]
        outcomes = [sb.run("x = 1", failing).tests[0].passed for _ in range(3)]
    assert outcomes == [False, True, True]  # compiled by the job process, then the caller's code


def test_reruns_after_a_dead_test_use_the_compiled_tests_too(sandbox):
    # Test 1 kills its process: the tests after it re-run in a fresh one, from the same request.
    program = "import os\ndef f(x):\n    if x == 1:\n        os._exit(3)\n    return x\n"
    tests = [AssertTest(f"assert f({i}) == {i}", f"t{i}") for i in range(4)]
    before = sandbox.test_code_hits
    outcomes = [[(t.passed, t.error_type) for t in sandbox.run(program, tests).tests] for _ in range(3)]
    assert sandbox.test_code_hits - before >= 2  # runs 2 and 3 (and their re-runs) carried compiled tests
    assert outcomes[0] == outcomes[1] == outcomes[2] == [
        (True, None), (False, "ProcessExited"), (True, None), (True, None)]
