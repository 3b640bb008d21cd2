"""MBPP (challenge tests), EvalPlus and BigCodeBench loaders, scored for real in the sandbox."""

from __future__ import annotations

import pytest

from llm_marl_envs.code import tree_search_v0 as ts
from llm_marl_envs.data import load_code_jsonl
from llm_marl_envs.data.bigcodebench import unittest_methods
from llm_marl_envs.data.evalplus import evalplus_record_to_problem
from tests.data import records as R


def _final(problem, code):
    env = ts.env(dataset=[problem], max_nodes=1, validate_public=False)
    env.reset(seed=0)
    env.step(f"```python\n{code}\n```")
    return env.unwrapped.final


def test_mbpp_challenge_tests_are_scored(tmp_path):
    (p,) = load_code_jsonl(R.write_jsonl(tmp_path / "m.jsonl", [R.mbpp_record()]))
    assert p.metadata["n_challenge_tests"] == 2 and '>>> assert remove_Occ("hello","l") == "heo"' in p.prompt
    assert _final(p, p.reference_program)["hidden_score"] == 1.0
    # removing every occurrence agrees with the shown example and the three-occurrence-free tests,
    # and fails only the challenge test "hellolloll":
    every = "def remove_Occ(s, ch):\n    return s.replace(ch, '')\n"
    final = _final(p, every)
    assert final["hidden_total"] == 4 and final["hidden_passed"] == 3


@pytest.mark.parametrize("with_results", [True, False])
def test_humaneval_plus_base_and_plus_inputs_become_hidden_tests(with_results):
    p = evalplus_record_to_problem(R.humaneval_plus_record(with_results))
    assert (p.metadata["n_base"], p.metadata["n_plus"], p.metadata["n_tests"]) == (4, 3, 7)
    assert (
        "assert candidate(1000, 2000) == 3000" in p.test
    )  # expected value read or computed by the reference
    final = _final(p, p.reference_program)
    assert (
        final["hidden_score"] == 1.0 and final["hidden_total"] == 5
    )  # add(2, 3), add(5, 7) are in the prompt
    final = _final(p, "def add(x, y):\n    return x + y if x >= 0 else 0\n")  # wrong on a plus input only
    assert final["hidden_passed"] == 4


def test_mbpp_plus_prompt_built_like_mbpp_and_floats_compared_within_tolerance():
    p = evalplus_record_to_problem(R.mbpp_plus_record())
    assert p.task_id == "Mbpp/4" and p.entry_point == "heap_queue_largest"
    assert p.entry_signature() == "def heap_queue_largest(nums: list, n: int) -> list:"
    assert "_ep_close(candidate([0.5, 1.5], 1), [1.5], 1e-06)" in p.test
    assert _final(p, p.reference_program)["hidden_score"] == 1.0
    assert _final(p, "def heap_queue_largest(nums, n):\n    return sorted(nums)[:n]\n")["hidden_score"] < 0.5


def test_bigcodebench_unittest_methods_are_tests(tmp_path):
    (p,) = load_code_jsonl(R.write_jsonl(tmp_path / "bcb.jsonl", [R.bigcodebench_record()]))
    assert unittest_methods(R.BCB_TEST) == [("TestCases", f"test_case_{i}") for i in range(1, 5)]
    final = _final(p, p.reference_program)
    assert final["hidden_score"] == 1.0 and final["hidden_total"] == 2  # 2 of 4 held out as public tests
    env = ts.env(dataset=[p], max_nodes=1, validate_public=False)
    env.reset(seed=0)
    env.step("```python\ndef task_func(text):\n    return {}\n```")
    node = env.unwrapped.tree[0]
    assert (
        node.passed < node.total == 2 and "AssertionError" in node.feedback
    )  # the unittest failure is shown


def test_malformed_evalplus_and_bigcodebench_records_raise(tmp_path):
    rec = R.bigcodebench_record()
    rec["test"] = "import unittest\n"
    with pytest.raises(ValueError, match="bcb.jsonl:1: .*no unittest test method"):
        load_code_jsonl(R.write_jsonl(tmp_path / "bcb.jsonl", [rec]))
    bad = dict(R.humaneval_plus_record(False), canonical_solution="    raise ValueError\n")
    with pytest.raises(ValueError, match="no usable test input"):
        evalplus_record_to_problem(bad)
