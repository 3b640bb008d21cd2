"""Call-based (functional) problems: LiveCodeBench LeetCode-style and APPS fn_name, run for real."""

from __future__ import annotations

import json

import pytest

from llm_marl_envs.code import tree_search_v0 as ts
from llm_marl_envs.code.test_sets import case_key, function_test_sets
from llm_marl_envs.data.stdio_problems import load_apps, load_livecodebench, load_taco

STARTER = "class Solution:\n    def maxSum(self, nums: List[int], k: int) -> int:\n        "
SOLUTION = (
    "class Solution:\n    def maxSum(self, nums: List[int], k: int) -> int:\n"
    "        return max(sum(nums[i:i + k]) for i in range(len(nums) - k + 1))\n"
)


def _write(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def _lcb_functional():
    case = lambda i, o: {"input": i, "output": o, "testtype": "functional"}  # noqa: E731
    return {
        "question_title": "Max window", "question_content": "Return the largest sum of k consecutive numbers.",
        "platform": "leetcode", "question_id": "3000", "contest_id": "weekly-1", "contest_date": "2023-08-01",
        "starter_code": STARTER, "difficulty": "easy", "metadata": json.dumps({"func_name": "maxSum"}),
        "public_test_cases": json.dumps([case("[1, 5, 2, 7]\n2", "9")]),
        "private_test_cases": json.dumps([case("[3, -1, 4]\n1", "4"), case("[-2, -3]\n2", "-5"),
                                          case("[1, 5, 2, 7]\n3", "14")]),
    }  # fmt: skip


def _apps_call_based():
    return {
        "problem_id": 4100, "question": "Return the two numbers sorted, as a pair.", "difficulty": "introductory",
        "starter_code": "def pair(a, b):\n\t", "solutions": json.dumps(["def pair(a, b):\n    return (min(a, b), max(a, b))\n"]),
        "input_output": json.dumps({"fn_name": "pair", "inputs": [[2, 1], [5, 9], [0, 0]],
                                    "outputs": [[[1, 2]], [[5, 9]], [[0, 0]]]}),
    }  # fmt: skip


def _run(problem, code):
    env = ts.env(dataset=[problem], max_nodes=1, validate_public=False)
    env.reset(seed=0)
    env.step(f"```python\n{code}\n```")
    raw = env.unwrapped
    return raw.tree[0], raw.final


def test_livecodebench_solution_method_is_called_and_compared(tmp_path):
    (problem,) = load_livecodebench(_write(tmp_path / "lcb.jsonl", [_lcb_functional()]))
    assert problem.entry_class() == "Solution" and "from typing import *" in problem.prelude()
    sets = function_test_sets(problem)
    assert sets.public_source == "examples" and sets.public_inputs == ("maxSum([1, 5, 2, 7], 2)",)
    assert len(sets.hidden_tests) == 3  # the private cases only: the public case is in the prompt
    assert not {case_key(t) for t in sets.public_tests} & {case_key(t) for t in sets.hidden_tests}
    node, final = _run(problem, SOLUTION)  # uses List from the prelude, as LiveCodeBench's harness allows
    assert (node.score, final["hidden_score"], final["hidden_total"]) == (1.0, 1.0, 3)
    clamped = SOLUTION.replace("return max(", "return max(0, max(").replace("+ 1))", "+ 1)))")
    node, final = _run(problem, clamped)  # never below 0: passes the public case, fails [-2, -3]
    assert node.score == 1.0 and final["hidden_score"] == pytest.approx(2 / 3)
    node, final = _run(problem, "def maxSum(nums, k):\n    return 9\n")  # no Solution class: every test fails
    assert node.score == 0.0 and final["hidden_score"] == 0.0


def test_apps_call_based_accepts_wrapped_outputs_and_tuples(tmp_path):
    (problem,) = load_apps(_write(tmp_path / "apps.jsonl", [_apps_call_based()]))
    assert problem.task_id == "apps/4100" and problem.entry_class() is None
    node, final = _run(problem, problem.reference_program)  # returns a tuple: compared as a list, like APPS
    assert (node.score, final["hidden_score"], final["hidden_total"]) == (1.0, 1.0, 2)
    node, final = _run(problem, "def pair(a, b):\n    return [a, b]\n")  # right only when already sorted
    assert (
        node.score == 0.0 and final["hidden_score"] == 1.0
    )  # public (2, 1) fails; hidden (5, 9), (0, 0) pass
    node, final = _run(problem, "def pair(a, b):\n    return a + b\n")
    assert final["hidden_score"] == 0.0


def test_taco_records_load_like_apps(tmp_path):
    stdio = {"question": "Print n + 1.", "solutions": json.dumps(["print(int(input()) + 1)"]), "starter_code": "",
             "input_output": json.dumps({"inputs": ["1\n", "7\n"], "outputs": ["2\n", "8\n"]}),
             "name": "inc", "source": "codechef", "tags": ["math"], "skill_types": [], "difficulty": "EASY"}  # fmt: skip
    call = dict(_apps_call_based(), name="pair", source="codewars")
    del call["problem_id"]
    problems = load_taco(_write(tmp_path / "taco.jsonl", [stdio, call]))
    assert [p.task_id for p in problems] == ["taco/0", "taco/1"]
    assert problems[0].public_tests[0].input == "1\n" and problems[0].private_tests[0].output == "8\n"
    assert problems[1].entry_point == "pair" and problems[1].source == "taco"
    node, final = _run(problems[1], problems[1].reference_program)
    assert final["hidden_score"] == 1.0


def test_helper_main_takes_call_based_functions_and_refuses_class_methods(tmp_path):
    from llm_marl_envs.code import helper_main_v0 as hm

    (apps,) = load_apps(_write(tmp_path / "apps.jsonl", [_apps_call_based()]))
    env = hm.env(problems=[apps])
    env.reset(seed=0)
    answers = {"helper": "def aux(a, b):\n    return sorted([a, b])\n",
               "main": "def pair(a, b):\n    lo, hi = aux(a, b)\n    return (lo, hi)\n"}  # fmt: skip
    for agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else f"```python\n{answers[agent]}\n```")
    comps = env.unwrapped.record.turns[-1].components
    assert comps["tests_passed"] == comps["tests_total"] == 3  # public and private cases, tuples as lists
    (lcb,) = load_livecodebench(_write(tmp_path / "lcb.jsonl", [_lcb_functional()]))
    with pytest.raises(ValueError, match="not a class method"):
        hm.env(problems=[lcb])
