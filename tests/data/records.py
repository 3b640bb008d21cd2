"""Small records in each public code-dataset format, written from the formats' published schemas.

Nothing is downloaded: every record here is hand-written with the fields (and quirks) of
the released files, e.g. LiveCodeBench's compressed private tests, APPS' wrapped outputs,
MBPP's ``challenge_test_list``, EvalPlus' ``inputs`` / ``results`` check.
"""

from __future__ import annotations

import base64
import json
import pickle
import zlib


def write_jsonl(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def mbpp_record():
    """MBPP (original release): 3 tests, one challenge test."""
    return {
        "task_id": 11, "text": "Write a python function to remove first and last occurrence of a given character from the string.",
        "code": "def remove_Occ(s, ch):\n    i = s.find(ch)\n    if i >= 0:\n        s = s[:i] + s[i + 1:]\n    j = s.rfind(ch)\n"
                "    if j >= 0:\n        s = s[:j] + s[j + 1:]\n    return s",
        "test_list": ['assert remove_Occ("hello","l") == "heo"', 'assert remove_Occ("abcda","a") == "bcd"',
                      'assert remove_Occ("PHP","P") == "H"'],
        "test_setup_code": "", "challenge_test_list": ['assert remove_Occ("hellolloll","l") == "helollol"',
                                                       'assert remove_Occ("","l") == ""'],
    }  # fmt: skip


def mbpp_sanitized_record():
    return {
        "source_file": "Benchmark Questions Verification V2.ipynb", "task_id": 2,
        "prompt": "Write a function to find the shared elements from the given two lists.",
        "code": "def similar_elements(test_tup1, test_tup2):\n  res = tuple(set(test_tup1) & set(test_tup2))\n  return (res) ",
        "test_imports": [],
        "test_list": ["assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))",
                      "assert set(similar_elements((1, 2, 3, 4),(5, 4, 3, 7))) == set((3, 4))",
                      "assert set(similar_elements((11, 12, 14, 13),(17, 15, 14, 13))) == set((13, 14))"],
    }  # fmt: skip


def coop_humaneval_record():
    """CoopHumanEval: HumanEval shape without a canonical solution."""
    return {
        "task_id": "CoopHumanEval/0", "entry_point": "double_all",
        "prompt": 'def double_all(xs: list) -> list:\n    """Double every number.\n    >>> double_all([1, 2])\n    [2, 4]\n    """\n',
        "test": "def check(candidate):\n    assert candidate([1, 2]) == [2, 4]\n    assert candidate([]) == []\n"
                "    assert candidate([-3]) == [-6]\n",
    }  # fmt: skip


HE_PLUS_PROMPT = 'def add(x: int, y: int):\n    """Add two numbers x and y\n    >>> add(2, 3)\n    5\n    >>> add(5, 7)\n    12\n    """\n'


def humaneval_plus_record(with_results=True):
    """HumanEval+: the Hugging Face layout has a ``test`` with literal inputs/results; the
    release JSONL has only ``base_input`` / ``plus_input`` (expected values computed)."""
    base, plus = [[0, 1], [1, 0], [2, 3], [5, 7]], [[-4, 9], [1000, 2000], [7, -7]]
    rec = {
        "task_id": "HumanEval/53", "prompt": HE_PLUS_PROMPT, "entry_point": "add",
        "canonical_solution": "    return x + y\n", "base_input": base, "plus_input": plus, "atol": 0, "contract": "",
    }  # fmt: skip
    if with_results:
        inputs = base + plus
        rec["test"] = (
            "import math\n\ndef assertion(out, exp, atol):\n    assert out == exp\n\n\ndef check(candidate):\n"
            f"    inputs = {inputs!r}\n    results = {[a + b for a, b in inputs]!r}\n"
            "    for i, (inp, exp) in enumerate(zip(inputs, results)):\n        assertion(candidate(*inp), exp, 0)\n"
        )
    return rec


def mbpp_plus_record():
    """MBPP+ (release layout): the prompt is the task text in a docstring with one assert."""
    return {
        "task_id": "Mbpp/4", "entry_point": "heap_queue_largest",
        "prompt": '"""\nWrite a function to find the n largest integers from a given list of numbers, returned in '
                  'descending order.\nassert heap_queue_largest( [25, 35, 22, 85, 14, 65, 75, 22, 58],3)==[85, 75, 65]\n"""\n',
        "canonical_solution": "import heapq as hq\ndef heap_queue_largest(nums: list,n: int) -> list:\n"
                              "  largest_nums = hq.nlargest(n, nums)\n  return largest_nums\n",
        "base_input": [[[25, 35, 22, 85, 14, 65, 75, 22, 58], 3], [[25, 35, 22, 85, 14, 65, 75, 22, 58], 2]],
        "plus_input": [[[1, 2, 3], 1], [[9, 8, 7, 6], 4], [[0.5, 1.5], 1]], "atol": 0,
    }  # fmt: skip


BCB_TEST = """import unittest


class TestCases(unittest.TestCase):
    def test_case_1(self):
        self.assertEqual(task_func("a b a"), {"a": 2, "b": 1})

    def test_case_2(self):
        self.assertEqual(task_func(""), {})

    def test_case_3(self):
        self.assertEqual(task_func("x  x"), {"x": 2})

    def test_case_4(self):
        with self.assertRaises(AttributeError):
            task_func(None)
"""


def bigcodebench_record():
    prompt = (
        'import collections\n\n\ndef task_func(text):\n    """\n    Count the words of a text.\n\n'
        "    Parameters:\n    text (str): the text.\n\n    Returns:\n    dict: word -> count.\n\n"
        '    Requirements:\n    - collections\n    """\n'
    )
    return {
        "task_id": "BigCodeBench/900", "complete_prompt": prompt,
        "instruct_prompt": "Count the words of a text.", "code_prompt": "import collections\ndef task_func(text):\n",
        "canonical_solution": "    return dict(collections.Counter(text.split()))\n", "test": BCB_TEST,
        "entry_point": "task_func", "doc_struct": "{}", "libs": "['collections']",
    }  # fmt: skip


def lcb_stdin_record(qid="abc001_a"):
    private = json.dumps([{"input": "5 6\n", "output": "11\n", "testtype": "stdin"},
                          {"input": "1 2\n", "output": "3\n", "testtype": "stdin"}])  # fmt: skip
    return {
        "question_title": "Add", "question_content": "Print a+b.", "platform": "atcoder",
        "question_id": qid, "contest_id": "abc001", "contest_date": "2023-01-01T00:00:00",
        "starter_code": "", "difficulty": "easy", "metadata": "{}",
        "public_test_cases": json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]),
        "private_test_cases": base64.b64encode(zlib.compress(pickle.dumps(private))).decode("utf-8"),
    }  # fmt: skip


def lcb_functional_record():
    case = lambda i, o: {"input": i, "output": o, "testtype": "functional"}  # noqa: E731
    return {
        "question_title": "Two sum", "question_content": "Return the sum of a and b.", "platform": "leetcode",
        "question_id": "2999", "contest_id": "weekly-0", "contest_date": "2023-07-01", "difficulty": "easy",
        "starter_code": "class Solution:\n    def addTwo(self, a: int, b: int) -> int:\n        ",
        "metadata": json.dumps({"func_name": "addTwo"}),
        "public_test_cases": json.dumps([case("1\n2", "3")]),
        "private_test_cases": json.dumps([case("1\n2", "3"), case("-1\n1", "0"), case("10\n5", "15")]),
    }  # fmt: skip


def apps_records():
    stdio = {
        "problem_id": 7, "question": "Double it.", "difficulty": "introductory", "starter_code": "",
        "solutions": json.dumps(["print(2 * int(input()))"]),
        "input_output": json.dumps({"inputs": ["1\n", "2\n", "3\n"], "outputs": ["2\n", "4\n", "6\n"]}),
    }  # fmt: skip
    single = dict(stdio, problem_id=9, input_output=json.dumps({"inputs": ["4\n"], "outputs": ["8\n"]}))
    call = {
        "problem_id": 4100, "question": "Return a + b.", "difficulty": "introductory", "starter_code": "def add(a, b):\n\t",
        "solutions": json.dumps(["def add(a, b):\n    return a + b\n"]),
        "input_output": json.dumps({"fn_name": "add", "inputs": [[1, 2], [3, 4], [0, 0]], "outputs": [[3], [7], [0]]}),
    }  # fmt: skip
    return [stdio, single, call]


def taco_records():
    out = []
    for rec in apps_records():
        rec = dict(rec, name=f"p{rec['problem_id']}", source="codewars", tags=[], skill_types=[])
        del rec["problem_id"]
        out.append(rec)
    return out


def code_contests_record():
    return {
        "name": "1000_A. Sum", "description": "Sum two numbers.", "difficulty": 7, "source": 2,
        "public_tests": {"input": ["1 1\n"], "output": ["2\n"]},
        "private_tests": {"input": ["2 2\n", "1 1\n"], "output": ["4\n", "2\n"]},
        "generated_tests": {"input": ["3 3\n"], "output": ["6\n"]},
        "solutions": {"language": [3], "solution": ["print(sum(map(int, input().split())))"]},
    }  # fmt: skip


def native_records():
    return [{"task_id": "n/1", "statement": "Echo.", "reference_solution": "print(input())",
             "public_tests": [{"input": "a\n", "output": "a\n"}],
             "private_tests": [{"input": "a\n", "output": "a\n"}, {"input": "b\n", "output": "b\n"}]},
            {"task_id": "n/2", "statement": "Echo twice.", "reference_solution": "s = input()\nprint(s + s)",
             "public_tests": [{"input": "a\n", "output": "aa\n"}], "private_tests": []}]  # fmt: skip
