"""code/coder_tester_v0: tester tests parsed and run in the sandbox, per-agent rewards, feedback."""

from __future__ import annotations

import pytest

from llm_marl_envs.code import coder_tester_v0 as ct
from llm_marl_envs.code.coder_tester_problems import load_coder_tester_problems
from llm_marl_envs.code.coder_tester_scoring import parse_tester_tests
from llm_marl_envs.data.humaneval import CodeProblem

ADD = CodeProblem(
    task_id="toy/add",
    prompt='def add(a, b):\n    """Return a + b."""\n',
    entry_point="add",
    test="def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(0, 0) == 0\n"
         "    assert candidate(-1, 1) == 0\n    assert candidate(2, 2) == 4\n",
    reference_program='def add(a, b):\n    """Return a + b."""\n    return a + b\n',
)
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "```python\ndef add(a, b):\n    return a * b\n```"  # right on (0, 0) and (2, 2) only


def _play(env, answers, seed=0):
    env.reset(seed=seed)
    queues = {a: list(v) for a, v in answers.items()}
    for agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else queues[agent].pop(0))
    return env.unwrapped.record


def test_a_good_tester_catches_a_wrong_coder():
    env = ct.env(problems=[ADD], max_turns=1)
    record = _play(env, {"coder": [WRONG], "tester": ["```python\nassert add(1, 2) == 3\nassert add(2, 2) == 4\n```"]})
    turn = record.turns[0]
    assert turn.reward == pytest.approx(0.5)  # golden: 2 of 4
    assert turn.agent_components["tester"] == {"tester_valid": 1.0, "tester_agreement": 1.0}
    assert turn.agent_components["coder"] == {"coder_golden_pass": 0.5, "coder_tester_pass": 0.5}


def test_weak_and_invalid_tests_are_scored_as_such():
    env = ct.env(problems=[ADD], max_turns=1)
    weak = "```python\nassert add(2, 2) == 4\nassert add(1, 1) == 3\n```"  # 2nd is wrong: invalid
    turn = _play(env, {"coder": [WRONG], "tester": [weak]}).turns[0]
    assert turn.agent_components["tester"]["tester_valid"] == 0.5
    assert turn.agent_components["tester"]["tester_agreement"] == 0.0  # its valid test passes a wrong program
    turn = _play(env, {"coder": [RIGHT], "tester": [weak]}).turns[0]
    assert turn.reward == 1.0 and turn.agent_components["tester"]["tester_agreement"] == 1.0


def test_the_tester_cannot_redefine_the_entry_point():
    cheat = "```python\ndef add(a, b):\n    return 0\nassert add(0, 0) == 0\n```"
    problem = load_coder_tester_problems([ADD])[0]
    parsed = parse_tester_tests(problem, cheat, 10)
    assert len(parsed.tests) == 1 and "def add" not in parsed.setup
    assert any("dropped" in issue for issue in parsed.issues)


def test_feedback_on_the_second_turn_and_the_return_is_the_final_pass_ratio():
    env = ct.env(problems=[ADD], max_turns=2)
    tester = "```python\ndef check(candidate):\n    assert candidate(1, 2) == 3\ncheck(add)\n```"
    record = _play(env, {"coder": [WRONG, RIGHT], "tester": [tester, tester]})
    coder_seen = env.observe_chat("coder")[-2]["content"]
    assert "passes 0 of the tester's 1 tests" in coder_seen and "AssertionError" in coder_seen
    assert "return a * b" in env.observe_chat("tester")[-2]["content"]
    assert [t.reward for t in record.turns] == [pytest.approx(0.5), pytest.approx(0.5)]
    assert record.total_reward == 1.0 and record.terminated


def test_stdio_problems_use_input_output_pairs():
    env = ct.env(dataset="stdio_sample", max_turns=1)
    env.reset(seed=0)
    problem = env.unwrapped.problem
    assert problem.kind == "stdio" and problem.reference
    case = problem.golden_tests[0]
    tests = f"<input>\n{case.stdin}</input>\n<output>\n{case.expected_stdout}</output>\n<input>\n{case.stdin}</input><output>\nsurely wrong\n</output>"
    env.step(f"```python\n{problem.reference}\n```")
    env.step(tests)
    turn = env.unwrapped.record.turns[0]
    assert turn.reward == 1.0 and turn.agent_components["tester"]["tester_valid"] == 0.5
    assert turn.agent_components["tester"]["tester_agreement"] == 1.0


def test_no_tests_and_no_code_are_format_issues():
    env = ct.env(problems=[ADD], max_turns=1)
    record = _play(env, {"coder": [""], "tester": ["Looks fine to me."]})
    issues = {s.agent: s.format_issues for s in record.steps}
    assert issues["tester"] == ["the tests do not parse as Python", "no tests found (expected Python asserts)"]
    assert issues["coder"] == ["no code found in the answer"]
    assert record.total_reward == 0.0


def test_parallel_env_plays_both_agents_at_once():
    par = ct.parallel_env(problems=[ADD], max_turns=1)
    par.reset(seed=0)
    _, rewards, terms, _, _ = par.step({"coder": RIGHT, "tester": "```python\nassert add(1, 2) == 3\n```"})
    assert rewards == {"coder": 1.0, "tester": 1.0} and all(terms.values())


def test_datasets_load_from_files_by_format(tmp_path):
    from llm_marl_envs.data.stdio_problems import SAMPLE_PATH

    stdio = load_coder_tester_problems(SAMPLE_PATH)  # "auto": no entry_point field -> stdio (native)
    assert stdio and all(p.kind == "stdio" and p.golden_tests for p in stdio)
    contests = tmp_path / "cc.jsonl"
    contests.write_text(
        '{"name": "double", "description": "Print twice the input.", '
        '"public_tests": {"input": ["2\\n"], "output": ["4\\n"]}, '
        '"private_tests": {"input": ["3\\n", "5\\n"], "output": ["6\\n", "10\\n"]}, '
        '"solutions": {"language": [3], "solution": ["print(2 * int(input()))"]}}\n'
    )
    problem = load_coder_tester_problems(contests, format="code_contests")[0]
    assert len(problem.golden_tests) == 2 and problem.reference  # the private tests are golden
    env = ct.env(dataset=str(contests), format="code_contests", max_turns=1)
    record = _play(env, {"coder": [f"```python\n{problem.reference}\n```"], "tester": ["<input>\n7\n</input><output>\n14\n</output>"]})
    assert record.total_reward == 1.0 and record.turns[0].agent_components["tester"]["tester_valid"] == 1.0
    mbpp = tmp_path / "mbpp.jsonl"
    mbpp.write_text('{"task_id": 1, "text": "Add two numbers.", "code": "def add(a, b):\\n    return a + b", '
                    '"test_list": ["assert add(1, 2) == 3"]}\n')
    assert load_coder_tester_problems(mbpp)[0].kind == "function"
    with pytest.raises(ValueError, match="format"):
        load_coder_tester_problems(mbpp, format="csv")
