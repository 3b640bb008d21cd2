"""Visible and hidden tests are disjoint for every shipped and supported dataset format.

Each format is loaded from a small hand-written file (tests/data/records.py) or the shipped
data, turned into tree-search problems, and checked: the public tests (shown to agents as
examples or feedback) and the prompt's literal examples share no test with the hidden
tests that score -- or the problem's recorded split says the score is a visible-test score.
"""

from __future__ import annotations

import pytest

from llm_marl_envs.code import tree_search_v0 as ts
from llm_marl_envs.code.problem_tests import example_assert, parse_examples, prompt_asserts
from llm_marl_envs.code.test_sets import case_key
from llm_marl_envs.data.test_split import SplitConfig, TestLeakError, assert_disjoint, split_tests
from llm_marl_envs.sandbox import AssertTest, IOTest
from tests.data import records as R

FILE_FORMATS = {
    "mbpp": ([R.mbpp_record()], "mbpp"),
    "mbpp_sanitized": ([R.mbpp_sanitized_record()], "mbpp"),
    "coop_humaneval": ([R.coop_humaneval_record()], "humaneval"),
    "humaneval_plus": ([R.humaneval_plus_record()], "auto"),
    "mbpp_plus": ([R.mbpp_plus_record()], "auto"),
    "bigcodebench": ([R.bigcodebench_record()], "auto"),
    "livecodebench": ([R.lcb_stdin_record(), R.lcb_functional_record()], "livecodebench"),
    "apps": (R.apps_records(), "apps"),
    "taco": (R.taco_records(), "taco"),
    "code_contests": ([R.code_contests_record()], "code_contests"),
    "native": (R.native_records(), "native"),
}


def _content(test):
    return (test.stdin, test.expected_stdout) if isinstance(test, IOTest) else test.code


def _check(problem):
    split = problem.test_split
    assert split["n_visible"] == len(problem.public_tests) and split["n_hidden"] == len(problem.hidden_tests)
    assert problem.hidden_tests, problem.task_id
    if split["score_tests"] == "visible":
        assert split["visible_source"] == "shared"
        return "visible"
    hidden = {case_key(t) for t in problem.hidden_tests}
    assert not {case_key(t) for t in problem.public_tests} & hidden, problem.task_id
    assert not {_content(t) for t in problem.public_tests} & {_content(t) for t in problem.hidden_tests}
    if problem.kind == "function":  # what the prompt shows is never scored either
        shown = {case_key(AssertTest(example_assert(ex, problem.entry_point))) for ex in
                 parse_examples(problem.statement, problem.entry_point)}  # fmt: skip
        shown |= {case_key(AssertTest(a)) for a in prompt_asserts(problem.statement, problem.entry_point)}
        assert not shown & hidden, problem.task_id
    return "hidden"


@pytest.mark.parametrize("name", sorted(FILE_FORMATS))
def test_every_file_format_splits_disjointly(tmp_path, name):
    recs, fmt = FILE_FORMATS[name]
    path = R.write_jsonl(tmp_path / f"{name}.jsonl", recs)
    problems = ts.load_search_problems(path, dataset_format=fmt)
    assert len(problems) == len(recs)
    kinds = {p.task_id: _check(p) for p in problems}
    if name == "native":  # n/2 has no private test: its score is (honestly) a visible-test score
        assert kinds == {"n/1": "hidden", "n/2": "visible"}
    elif name in ("apps", "taco"):  # the single-test stdin problem cannot be split
        assert sorted(kinds.values()) == ["hidden", "hidden", "visible"]
    else:
        assert set(kinds.values()) == {"hidden"}


def test_shipped_datasets_split_disjointly():
    for dataset in ("humaneval", "stdio_sample"):
        results = [_check(p) for p in ts.load_search_problems(dataset)]
        assert results.count("visible") == (1 if dataset == "humaneval" else 0)  # HumanEval/34, see test_sets


def test_mbpp_hidden_tests_are_the_unshown_asserts_and_the_challenge_tests(tmp_path):
    (p,) = ts.load_search_problems(R.write_jsonl(tmp_path / "m.jsonl", [R.mbpp_record()]))
    assert p.public_inputs == ("remove_Occ('hello', 'l')",) and p.public_source == "examples"
    codes = [t.code for t in p.hidden_tests]
    assert len(codes) == 4 and not any("'hello', 'l'" in c for c in codes)
    assert any("hellolloll" in c for c in codes)  # challenge_test_list is scored
    (sanitized,) = ts.load_search_problems(R.write_jsonl(tmp_path / "s.jsonl", [R.mbpp_sanitized_record()]))
    shown = "assert set(candidate((3, 4, 5, 6), (5, 7, 4, 10))) == set((4, 5))"  # not a literal example
    assert [t.code for t in sanitized.public_tests] == [shown] and len(sanitized.hidden_tests) == 2
    assert shown not in {case_key(t)[1] for t in sanitized.hidden_tests}
    (no_challenge,) = ts.load_search_problems(
        [
            __import__("llm_marl_envs.data.mbpp", fromlist=["x"]).mbpp_record_to_problem(
                R.mbpp_record(), 1, False
            )
        ]
    )
    assert len(no_challenge.hidden_tests) == 2


def test_the_rule_raises_on_a_leak_and_holds_out_when_nothing_is_visible():
    key = case_key
    a, b = AssertTest("assert candidate(1) == 2"), AssertTest("assert candidate(2) == 3")
    with pytest.raises(TestLeakError):
        assert_disjoint([a], [b, AssertTest("assert  candidate(1)==2")], key)
    vis, hid, rec = split_tests([], [a, b], key, "t", "examples")
    assert (len(vis), len(hid), rec.visible_source, rec.score_tests) == (1, 1, "held_out", "hidden")
    vis, hid, rec = split_tests([], [a], key, "t", "examples")
    assert (vis, hid, rec.visible_source) == ((), (a,), "none")
    vis, hid, rec = split_tests([], [a], key, "t", "examples", SplitConfig(too_few="share"))
    assert (vis, hid, rec.visible_source, rec.score_tests) == ((a,), (a,), "shared", "visible")
    seeds = {split_tests([], [AssertTest(f"assert f({i})") for i in range(10)], key, "t", "x",
                         SplitConfig(seed=s))[2].held_out for s in range(5)}  # fmt: skip
    assert len(seeds) > 1  # the seed picks which tests are held out
    with pytest.raises(ValueError, match="too_few"):
        SplitConfig(too_few="reuse")


def test_wrong_public_tests_are_replaced_by_held_out_hidden_ones_not_shared():
    from llm_marl_envs.data.stdio_problems import IOCase, StdioProblem

    wrong = StdioProblem(
        task_id="w/1", statement="Print n + 1.", reference_solution="print(int(input()) + 1)",
        public_tests=(IOCase("1\n", "3\n"),),  # a wrong example: the reference fails it
        private_tests=tuple(IOCase(f"{i}\n", f"{i + 1}\n") for i in range(5)),
    )  # fmt: skip
    env = ts.env(dataset=[wrong], max_nodes=1)
    assert env.unwrapped.validate_problems() == 1
    (p,) = env.unwrapped.problems
    assert p.dropped_public == ("public_0",) and p.public_source == "held_out"
    assert len(p.public_tests) == 2 and len(p.hidden_tests) == 3 and _check(p) == "hidden"
    env.reset(seed=0)
    env.step(ts.best_policy(env, env.agent_selection))
    assert env.unwrapped.final["hidden_score"] == 1.0 and env.unwrapped.final["test_split"]["n_hidden"] == 3


def test_the_split_seed_reaches_the_hold_out_after_validation():
    from llm_marl_envs.data.stdio_problems import IOCase, StdioProblem

    wrong = StdioProblem(
        task_id="w/2", statement="Print n + 1.", reference_solution="print(int(input()) + 1)",
        public_tests=(IOCase("1\n", "3\n"),), private_tests=tuple(IOCase(f"{i}\n", f"{i + 1}\n") for i in range(12)),
    )  # fmt: skip
    held = set()
    for seed in range(4):
        env = ts.env(dataset=[wrong], max_nodes=1, test_split=SplitConfig(seed=seed), fallback_asserts=2)
        env.unwrapped.validate_problems()
        (p,) = env.unwrapped.problems
        assert p.test_split["seed"] == seed and len(p.public_tests) == 2
        held.add(tuple(p.test_split["held_out"]))
    assert len(held) > 1
