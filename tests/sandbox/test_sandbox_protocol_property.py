"""Property (issue #30): whatever bytes the program side sends, its job ends as failed tests of
that job: never an infra error, never an exception in the caller, and the batch's other jobs
are unharmed.

The program writes the bytes drawn by hypothesis into its end of the judge's channel (descriptor
3): unframed, framed as its first message (what it defined), or framed as the reply to every
request after a well-formed first message; in stdin/stdout mode, into descriptor 3 as well
(the harness's closed result pipe: whatever the program opens there). The tests expect a value no
draw can produce, so none may pass; an honest job of the same batch must pass.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from llm_marl_envs.sandbox import AssertTest, IOTest, Job

SECRET = "sbx-unguessable-4e1f0c"

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["ok", "names", "r", "x", "c", "o", "m",
                                                                                   "skip", "f", "g", "h", "error"]),
                                                              inner, max_size=4),
    max_leaves=12,
)


SPECIAL = [  # what got through on main: nesting, numbers beyond a float, non-finite values, control flow, names
    b"[" * 100000, b"1" + b"0" * 5000, b'{"r": 5, "c": Infinity}',
    b'{"ok": {"wall_time_s": 1' + b"0" * 400 + b'}, "names": {"f": ["c"]}}',
    b'{"x": ["StopIteration", "StopIteration", "", ""]}',
    b'{"ok": {}, "names": {"__builtins__": ["c"], "f": ["m", "unittest.__main__"], "g": ["c"]}}',
]


def _texts() -> st.SearchStrategy[bytes]:
    special = st.sampled_from(SPECIAL + [b"1e999", b"-Infinity", b"NaN", b'{"r": {"h": 99999}}', b'{"r": {"i": "zz"}}',
                                         b'{"r": {"d": [[[], 1]]}}', b'{"o": ["x", 1e400, "y", -5]}', b'{"r": ' * 50000])
    encoded = _json.map(lambda v: json.dumps(v, allow_nan=True).encode())
    return st.one_of(special, encoded, st.binary(max_size=300))


def _program(mode: str, data: bytes) -> str:
    head = (f"import os\nDATA = bytes.fromhex({data.hex()!r})\n"
            "def _frame(b):\n    return len(b).to_bytes(4, 'big') + b\n"
            "def _write(b):\n    try:\n        os.write(3, b)\n    except OSError:\n        pass\n")
    if mode == "raw":
        return head + "_write(DATA)\nos._exit(0)\n"
    if mode == "names":
        return head + "_write(_frame(DATA))\nos._exit(0)\n"
    if mode == "header":  # a frame header that claims more than comes
        return head + "_write(len(DATA).to_bytes(4, 'big') + DATA[: len(DATA) // 2])\nos._exit(0)\n"
    if mode == "io":
        return head + "_write(DATA)\nprint('x')\n"
    return head + ("_write(_frame(b'{\"ok\": {}, \"names\": {\"f\": [\"c\"], \"g\": [\"c\"]}}'))\n"
                   "for _ in range(3):\n    os.read(3, 1 << 20)\n    _write(_frame(DATA))\nos._exit(0)\n")


def _with_examples(test):
    for data in SPECIAL:
        test = example(data=data)(test)
    return test


@pytest.mark.parametrize("mode", ["raw", "names", "header", "reply", "io", "names/judge-process", "reply/judge-process"])
@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=_texts())
@_with_examples
def test_whatever_the_program_side_sends_its_job_ends_as_failed_tests(sandbox, mode, data):
    if mode == "io":
        tests = [IOTest("", SECRET + "\n"), IOTest("", SECRET + "\n")]
    elif mode.endswith("/judge-process"):  # (a comprehension: not for the fork server's judge)
        mode = mode.split("/")[0]
        tests = [AssertTest(f"assert [f() for _ in [1]] == [{SECRET!r}]"), AssertTest(f"assert g(1) == {SECRET!r}")]
    else:
        # (test code the fork server judges itself: see worker/purity.py; the integrity tests cover both judges)
        tests = [AssertTest(f"assert f() == {SECRET!r}"), AssertTest(f"assert g(1) == {SECRET!r} and f(2)")]
    honest = Job(f"def f():\n    return {SECRET!r}\nprint({SECRET!r})\n",
                 [AssertTest(f"assert f() == {SECRET!r}")] if mode != "io" else [IOTest("", SECRET + "\n")])
    results = sandbox.run_batch([Job(_program(mode, data), tests, timeout_s=0.5), honest, honest])
    hostile = results[0]
    assert hostile.ok, hostile.infra_error
    assert len(hostile.tests) == len(tests) and not any(t.passed for t in hostile.tests)
    assert all(r.ok and r.all_passed for r in results[1:]), [r.infra_error for r in results[1:]]
