"""Stdin/stdout problem loaders (data/stdio_problems.py) on small files in each public format."""

from __future__ import annotations

import base64
import json
import pickle
import zlib

import pytest

from llm_marl_envs.data.problems import CodeProblem
from llm_marl_envs.data.stdio_problems import (
    IOCase,
    StdioProblem,
    load_apps,
    load_code_contests,
    load_livecodebench,
    load_stdio_problems,
    load_stdio_sample,
)


def _write(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def _lcb_record(qid="abc001_a", testtype="stdin", compress=True):
    private = json.dumps([{"input": "5 6\n", "output": "11\n", "testtype": testtype}])
    if compress:  # the released code_generation_lite files store private tests like this
        private = base64.b64encode(zlib.compress(pickle.dumps(private))).decode("utf-8")
    return {
        "question_title": "Add", "question_content": "Print a+b.", "platform": "atcoder",
        "question_id": qid, "contest_id": "abc001", "contest_date": "2023-01-01T00:00:00",
        "starter_code": "", "difficulty": "easy",
        "public_test_cases": json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": testtype}]),
        "private_test_cases": private, "metadata": "{}",
    }  # fmt: skip


def test_shipped_sample_has_eight_problems_with_references_and_both_test_sets():
    problems = load_stdio_sample()
    assert len(problems) == 8
    assert len({p.task_id for p in problems}) == 8
    for p in problems:
        assert p.reference_solution and p.statement
        assert len(p.public_tests) >= 2 and len(p.private_tests) >= 4
        assert all(isinstance(c, IOCase) and c.output.endswith("\n") for c in p.public_tests + p.private_tests)


def test_livecodebench_plain_and_compressed_private_tests(tmp_path):
    path = _write(tmp_path / "lcb.jsonl", [_lcb_record("q1", compress=True), _lcb_record("q2", compress=False)])
    for p in (load_livecodebench(path), load_stdio_problems(path)):  # explicit and auto-detected
        assert [x.task_id for x in p] == ["q1", "q2"]
        assert p[0].public_tests == (IOCase("1 2\n", "3\n"),)
        assert p[0].private_tests == (IOCase("5 6\n", "11\n"),) == p[1].private_tests
        assert p[0].source == "livecodebench" and p[0].metadata["platform"] == "atcoder"


def test_livecodebench_functional_problems_are_converted_skipped_or_rejected(tmp_path):
    functional = dict(_lcb_record("q2", testtype="functional"), metadata=json.dumps({"func_name": "add"}))
    functional["public_test_cases"] = json.dumps([{"input": "1\n2", "output": "3", "testtype": "functional"}])
    functional["private_test_cases"] = json.dumps([{"input": "5\n6", "output": "11", "testtype": "functional"}])
    path = _write(tmp_path / "lcb.jsonl", [_lcb_record("q1"), functional])
    stdio, call = load_livecodebench(path)
    assert isinstance(stdio, StdioProblem) and isinstance(call, CodeProblem)
    assert call.task_id == "q2" and call.entry_point == "add" and call.metadata["call_based"]
    assert [p.task_id for p in load_livecodebench(path, functional="skip")] == ["q1"]
    with pytest.raises(ValueError, match="lcb.jsonl:2: .*functional"):
        load_livecodebench(path, functional="raise")
    with pytest.raises(ValueError, match="functional must be one of"):
        load_livecodebench(path, functional="maybe")


def test_livecodebench_pickle_with_code_is_refused(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    rec = _lcb_record()
    rec["private_test_cases"] = base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode()
    path = _write(tmp_path / "lcb.jsonl", [rec])
    with pytest.raises(ValueError, match="refusing to load"):
        load_livecodebench(path)


def test_apps_first_tests_public_the_others_private(tmp_path):
    rec = {
        "problem_id": 7, "question": "Double it.", "difficulty": "introductory", "starter_code": "",
        "solutions": json.dumps(["print(2 * int(input()))"]),
        "input_output": json.dumps({"inputs": ["1\n", "2\n", "3\n"], "outputs": ["2\n", "4\n", "6\n"]}),
    }  # fmt: skip
    call_based = dict(rec, problem_id=8, input_output=json.dumps({"inputs": [[1]], "outputs": [2], "fn_name": "f"}))
    path = _write(tmp_path / "apps.jsonl", [rec, call_based])
    p, call = load_apps(path, n_public=2)
    assert p.task_id == "apps/7" and p.reference_solution == "print(2 * int(input()))"
    assert [c.input for c in p.public_tests] == ["1\n", "2\n"]
    assert [c.output for c in p.private_tests] == ["6\n"]
    assert isinstance(call, CodeProblem) and call.task_id == "apps/8" and call.entry_point == "f"
    assert [x.task_id for x in load_apps(path, functional="skip")] == ["apps/7"]
    assert load_stdio_problems(path, format="auto")[0].task_id == "apps/7"


def test_code_contests_private_and_generated_tests_and_python3_solution(tmp_path):
    rec = {
        "name": "1000_A. Sum", "description": "Sum two numbers.", "difficulty": 7, "source": 2,
        "public_tests": {"input": ["1 1\n"], "output": ["2\n"]},
        "private_tests": {"input": ["2 2\n"], "output": ["4\n"]},
        "generated_tests": {"input": ["3 3\n"], "output": ["6\n"]},
        "solutions": {"language": [2, 3], "solution": ["// c++", "print(sum(map(int, input().split())))"]},
    }  # fmt: skip
    path = _write(tmp_path / "cc.jsonl", [rec])
    (p,) = load_code_contests(path)
    assert p.private_tests == (IOCase("2 2\n", "4\n"),)
    assert p.reference_solution == "print(sum(map(int, input().split())))"
    assert len(load_code_contests(path, include_generated=True)[0].private_tests) == 2
    assert load_stdio_problems(path)[0].title == "1000_A. Sum"


def test_malformed_files_raise_clear_errors(tmp_path):
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"statement": "x", "public_tests": []}\n{not json\n')
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        load_stdio_problems(bad_json, format="native")  # record 1 lacks task_id
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(_lcb_record()) + "\n{not json\n")
    with pytest.raises(ValueError, match="broken.jsonl:2: not valid JSON"):
        load_stdio_problems(broken, format="livecodebench")
    unknown = _write(tmp_path / "u.jsonl", [{"foo": 1}])
    with pytest.raises(ValueError, match="cannot tell the format"):
        load_stdio_problems(unknown)
    with pytest.raises(FileNotFoundError):
        load_stdio_problems(tmp_path / "missing.jsonl")
    with pytest.raises(ValueError, match="format must be one of"):
        load_stdio_problems(unknown, format="csv")
