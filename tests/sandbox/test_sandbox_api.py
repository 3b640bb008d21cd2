"""Functional behaviour of the sandbox API: test styles, results, tracebacks, comparisons."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from llm_marl_envs.sandbox import (
    AssertTest,
    ExecResult,
    IOTest,
    Job,
    SandboxConfig,
    SandboxError,
    outputs_match,
    tests_from_check,
)

ADD = "def add(a, b):\n    return a + b\n"


def test_assert_tests_are_reported_one_by_one(sandbox):
    res = sandbox.run(ADD, [AssertTest("assert add(1, 2) == 3", "ok"), AssertTest("assert add(2, 2) == 5", "bad")])
    assert res.ok and res.infra_error is None and res.compile_error is None
    assert (res.passed, res.total, res.pass_fraction, res.all_passed) == (1, 2, 0.5, False)
    good, bad = res.tests
    assert (good.name, good.passed, good.error_type) == ("ok", True, None)
    assert (bad.name, bad.passed, bad.error_type) == ("bad", False, "AssertionError")
    assert "assert add(2, 2) == 5" in bad.traceback
    assert not bad.timed_out and not bad.memory_exceeded
    assert bad.wall_time_s >= 0 and bad.cpu_time_s >= 0


def test_traceback_points_at_the_programs_own_lines(sandbox):
    program = "import math\n\n\ndef f(x):\n    y = x + 1\n    return math.sqrt(-y)\n"
    res = sandbox.run(program, [AssertTest("f(1)")])
    t = res.tests[0]
    assert (t.error_type, t.error_message) == ("ValueError", "math domain error")
    assert 'File "solution.py", line 6, in f' in t.traceback
    assert "return math.sqrt(-y)" in t.traceback
    assert "harness" not in t.traceback and "worker" not in t.traceback


def test_stdout_and_stderr_are_captured_per_test_and_truncated(sandbox):
    program = "import sys\nprint('loading')\ndef f(n):\n    print('x' * n)\n    print('err', file=sys.stderr)\n    return n\n"
    res = sandbox.run(program, [AssertTest("assert f(3) == 3"), AssertTest("assert f(5000) == 5000")])
    assert res.stdout == "loading\n"
    first, second = res.tests
    assert (first.stdout, first.stderr) == ("xxx\n", "err\n")
    limit = sandbox.config.report_chars
    assert second.passed and second.stdout.startswith("x" * limit) and "[truncated 3001 characters]" in second.stdout


def test_io_tests_compare_stdout_in_the_caller(sandbox):
    program = "n = int(input())\nprint(n * 2)\nimport sys\nprint('debug', file=sys.stderr)\n"
    res = sandbox.run(program, [IOTest("21\n", "42\n", "good"), IOTest("1\n", "3\n", "bad"), IOTest("x\n", "0\n", "crash")])
    good, bad, crash = res.tests
    assert (good.kind, good.passed, good.got, good.stderr, good.exit_code) == ("io", True, "42\n", "debug\n", 0)
    assert (bad.passed, bad.error_type, bad.stdin, bad.expected, bad.got) == (False, None, "1\n", "3\n", "2\n")
    assert (crash.passed, crash.error_type, crash.exit_code) == (False, "ValueError", 1)
    assert "invalid literal for int()" in crash.error_message
    assert 'File "solution.py", line 1' in crash.traceback and "ValueError" in crash.stderr


def test_io_program_runs_as_main_and_may_exit(sandbox):
    program = "import sys\nif __name__ == '__main__':\n    print(sys.stdin.read().upper(), end='')\n    sys.exit(0)\n"
    assert sandbox.run(program, [IOTest("abc\n", "ABC\n")]).all_passed
    res = sandbox.run("import sys\nprint(1)\nsys.exit(3)\n", [IOTest("", "1\n")])
    assert (res.tests[0].passed, res.tests[0].exit_code, res.tests[0].error_type) == (False, 3, "NonZeroExit")


def test_mixed_test_styles_keep_their_order(sandbox):
    program = "def f():\n    return 1\nif __name__ == '__main__':\n    print(f())\n"
    res = sandbox.run(program, [IOTest("", "1\n"), AssertTest("assert f() == 1"), IOTest("", "2\n")])
    assert [t.kind for t in res.tests] == ["io", "assert", "io"]
    assert [t.passed for t in res.tests] == [True, True, False]


def test_compile_error_fails_every_test_with_line_and_column(sandbox):
    res = sandbox.run("def f(:\n    pass\n", [AssertTest("f()"), IOTest("", "")])
    assert res.ok and res.compile_error.startswith("SyntaxError: invalid syntax (solution.py, line 1, column 7)")
    assert "def f(:" in res.compile_error
    assert [(t.passed, t.error_type) for t in res.tests] == [(False, "SyntaxError"), (False, "SyntaxError")]
    assert res.pass_fraction == 0.0


def test_top_level_exception_fails_every_test(sandbox):
    res = sandbox.run("x = 1 / 0\ndef f():\n    return 1\n", [AssertTest("assert f() == 1"), AssertTest("assert 1")])
    assert res.program_error == "ZeroDivisionError: division by zero"
    assert all(t.error_type == "ZeroDivisionError" and not t.passed for t in res.tests)
    assert "top level" in res.tests[0].error_message


def test_setup_runs_after_the_program(sandbox):
    program = "def check(candidate):\n    pass\ndef f():\n    return 2\n"
    setup = "def check(candidate):\n    assert candidate() == 3\ncandidate = f\n"
    res = sandbox.run(program, [AssertTest("check(candidate)")], setup=setup)
    assert res.tests[0].error_type == "AssertionError"  # the setup's check, not the program's


def test_a_function_named_like_a_builtin_is_reachable_through_the_setup(sandbox):
    res = sandbox.run("def sum(xs):\n    return 42\n",
                      [AssertTest("assert candidate([1]) == 42"), AssertTest("assert sum([1]) == 1")],
                      setup="candidate = sum\n")
    assert [t.passed for t in res.tests] == [True, True]  # the tests' own `sum` is the builtin


def test_numpy_is_importable_in_jobs(sandbox):
    pytest.importorskip("numpy")
    res = sandbox.run("import numpy as np\ndef f():\n    return int(np.arange(10).sum())\n",
                      [AssertTest("assert f() == 45")], timeout_s=10)
    assert res.all_passed, res.tests[0].error_message or res.program_error


def test_timeout_reruns_the_remaining_tests_in_a_fresh_process(sandbox):
    program = "import time\ndef f(x):\n    while x == 1:\n        pass\n    return x\n"
    tests = [AssertTest("assert f(0) == 0"), AssertTest("f(1)"), AssertTest("assert f(2) == 2")]
    res = sandbox.run(program, tests, timeout_s=0.5)
    assert [t.passed for t in res.tests] == [True, False, True]
    slow = res.tests[1]
    assert (slow.timed_out, slow.error_type) == (True, "TimeoutError")
    assert slow.wall_time_s == pytest.approx(0.5)
    assert res.wall_time_s < 3.0


def test_tests_from_check_splits_humaneval_style_checks():
    test_code = (
        "METADATA = {'author': 'x'}\n\n"
        "def check(candidate):\n"
        "    import math\n"
        "    assert candidate(1) == 2\n"
        "    r = candidate(2)\n"
        "    assert r == 3, 'two'\n"
        "    for x in range(3):\n"
        "        assert candidate(x) == x + 1\n"
        "    assert candidate('''a\n"
        "b''') is not None\n"
        "    assert True\n"
    )
    setup, tests = tests_from_check(test_code, "inc")
    assert "METADATA" in setup and "candidate = inc\n" in setup and "import math" in setup
    assert "def check" not in setup
    assert [t.name for t in tests] == ["L5", "L6", "L8", "L10"]  # ("assert True" tests nothing: set-up)
    assert setup.endswith("assert True\n")
    assert tests[1].code == "r = candidate(2)\nassert r == 3, 'two'\n"
    assert tests[2].code.startswith("for x in range(3):")
    for t in tests:
        compile(t.code, "<t>", "exec")


def test_tests_from_check_runs_end_to_end(sandbox):
    test_code = "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(5) == 7\n"
    setup, tests = tests_from_check(test_code, "inc")
    res = sandbox.run("def inc(x):\n    return x + 1\n", tests, setup=setup)
    assert [t.passed for t in res.tests] == [True, False]
    assert res.tests[1].name == "L3"


def test_tests_from_check_without_check_takes_top_level_asserts():
    setup, tests = tests_from_check("import math\nassert f(1) == 1\nassert f(2) == 4\n", "f")
    assert setup == "import math\n" and [t.code for t in tests] == ["assert f(1) == 1\n", "assert f(2) == 4\n"]
    with pytest.raises(ValueError):
        tests_from_check("def check(:\n", "f")


def test_run_batch_keeps_order_and_runs_everything(sandbox):
    jobs = [Job(f"def f():\n    return {i}\n", [AssertTest(f"assert f() == {i if i % 3 else -1}")]) for i in range(12)]
    results = sandbox.run_batch(jobs)
    assert [r.all_passed for r in results] == [bool(i % 3) for i in range(12)]
    assert sandbox.run_batch([]) == []


def test_job_without_tests_still_reports_the_program(sandbox):
    res = sandbox.run("print('hi')\n", [])
    assert (res.total, res.passed, res.pass_fraction, res.all_passed, res.stdout) == (0, 0, 0.0, False, "hi\n")
    res = sandbox.run("def f(:\n", [])
    assert res.compile_error is not None


def test_invalid_test_code_is_an_infrastructure_error_not_a_failure(sandbox):
    res = sandbox.run(ADD, [AssertTest("assert add(1, 2) == 3"), AssertTest("assert (")])
    assert res.infra_error is not None and "test 1 does not compile" in res.infra_error
    assert res.tests == [] and not res.ok
    for prop in ("passed", "pass_fraction", "all_passed"):
        with pytest.raises(SandboxError):
            getattr(res, prop)
    res = sandbox.run(ADD, [AssertTest("assert 1")], setup="def (")
    assert "the test setup does not compile" in res.infra_error


def test_bad_arguments_raise_type_errors_before_running(sandbox):
    with pytest.raises(TypeError):
        sandbox.run(123, [AssertTest("assert 1")])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        sandbox.run("x = 1", ["assert 1"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        sandbox.run("x = 1", "assert 1")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        sandbox.run("x = 1", [], timeout_s=0)


def test_exec_result_score_properties():
    ok = ExecResult(tests=[], total=0)
    assert ok.pass_fraction == 0.0 and not ok.all_passed and ok.raise_for_infra_error() is ok
    broken = ExecResult(total=3, infra_error="worker died")
    with pytest.raises(SandboxError, match="worker died"):
        broken.raise_for_infra_error()
    assert not math.isnan(ok.pass_fraction)


def test_output_comparison_modes():
    assert outputs_match("1 2\n3  \n\n", "1 2\n3\n", "lines")
    assert not outputs_match("1 2\n3\n", "1  2\n3\n", "lines")
    assert outputs_match("1  2\n3", "1 2 3", "tokens")
    assert outputs_match("0.3333333", "0.333333333", "tokens", float_tolerance=1e-6)
    assert not outputs_match("0.34", "0.33", "tokens", float_tolerance=1e-6)
    assert not outputs_match("nan", "NaN", "tokens", float_tolerance=1e-6) and outputs_match("nan", "nan", "tokens")
    assert not outputs_match("a\n", "a", "exact")


def test_config_validation():
    with pytest.raises(ValueError):
        SandboxConfig(timeout_s=0)
    with pytest.raises(ValueError):
        SandboxConfig(io_compare="fuzzy")
    with pytest.raises(ValueError):
        SandboxConfig(workers=0)
    assert SandboxConfig().pool_size >= 1
    limits = SandboxConfig(timeout_s=2).job_limits(None, 3)
    assert (limits["timeout_s"], limits["cpu_time_s"], limits["job_timeout_s"]) == (2.0, 2.0, 8.0)


def test_the_fork_servers_warm_up_leaves_nothing_for_jobs_to_see(sandbox):
    # The warm-up ran the harness on programs of its own (solution.py, tests named L0...,
    # an I/O program) inside the fork server: none of it may show in a job.
    program = ("import linecache, sys\n"
               "LINE = linecache.getline('solution.py', 2)\n"
               "def f(x):\n    return 1 // x\n")
    res = sandbox.run(program, [AssertTest("assert LINE.startswith('LINE = linecache')", name="L0"),
                                AssertTest("assert f(0) == 1", name="L1")])
    assert res.tests[0].passed, res.tests[0]
    assert "return 1 // x" in res.tests[1].traceback and "assert f(0) == 1" in res.tests[1].traceback
    io = sandbox.run("import sys\nprint(sys.argv, sys.modules['__main__'].__file__, sys.stdin.read())",
                     [IOTest("in put", "['solution.py'] solution.py in put\n")])
    assert io.tests[0].passed, io.tests[0]


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="checks CPython 3.11's quickening")
def test_job_processes_inherit_warm_harness_code(sandbox):
    # The fork server ran the harness before forking any job, so the harness's bytecode is
    # already quickened (rewritten in place) in a fresh job process: it does not copy those pages.
    program = ("import dis, sys\n"
               "write = sys.modules['llm_sandbox_worker.harness'].BoundedText.write.__code__\n"
               "QUICK = [i.opname for i in dis.get_instructions(write, adaptive=True)] != "
               "[i.opname for i in dis.get_instructions(write)]\n")
    res = sandbox.run(program, [AssertTest("assert QUICK")])
    assert res.tests[0].passed, res.tests[0]


def test_jobs_import_from_the_same_directories_as_python_minus_i(sandbox):
    # Fork servers start without `site` (-S) and build the import path themselves: a job must
    # see every directory a plain `python -I` has, site-packages included (numpy is installed),
    # and the same answers from site.getsitepackages() and sys.prefix.
    show = "import json, site, sys\nprint(json.dumps([sys.path, site.getsitepackages(), sys.prefix]))\n"
    expected = subprocess.run([sys.executable, "-I", "-c", show], capture_output=True, text=True, check=True).stdout
    res = sandbox.run("import numpy\n" + show, [IOTest("", "")])
    assert res.ok and res.tests[0].error_type is None, res.tests[0]
    (path, site_dirs, prefix), (want_path, want_site_dirs, want_prefix) = json.loads(res.tests[0].stdout), json.loads(expected)
    assert [p for p in path if os.path.exists(p)] == [p for p in want_path if os.path.exists(p)]
    assert (site_dirs, prefix) == (want_site_dirs, want_prefix)


def test_exit_and_quit_are_defined_in_jobs(sandbox):
    # `site` defines them; competitive-programming solutions call them to stop early.
    io = sandbox.run("print('a')\nexit(0)\nprint('b')", [IOTest("", "a\n")])
    assert io.tests[0].passed, io.tests[0]
    io = sandbox.run("print('a')\nquit()", [IOTest("", "a\n")])
    assert io.tests[0].passed, io.tests[0]
    res = sandbox.run("ok = callable(help) and 'license' in str(license.__class__).lower() or True",
                      [AssertTest("assert callable(help) and callable(copyright) and ok")])
    assert res.tests[0].passed, res.tests[0]


def test_pth_files_add_their_paths_but_run_no_code(tmp_path, monkeypatch):
    from llm_marl_envs.sandbox.worker import sitepath

    (tmp_path / "extra").mkdir()
    marker = tmp_path / "ran"
    (tmp_path / "a.pth").write_text(f"# a comment\nextra\nmissing-dir\nimport os; open({str(marker)!r}, 'w')\n\n")
    (tmp_path / ".hidden.pth").write_text("extra2\n")
    (tmp_path / "extra2").mkdir()
    assert sitepath._pth_paths(str(tmp_path)) == [str(tmp_path / "extra")]
    assert not marker.exists()
    monkeypatch.setattr(sitepath.site, "getsitepackages", lambda prefixes=None: [str(tmp_path)])
    monkeypatch.setattr(sys, "path", ["/first"])
    sitepath.set_up_import_path()
    assert sys.path == ["/first", str(tmp_path), str(tmp_path / "extra")]
    assert not marker.exists()
