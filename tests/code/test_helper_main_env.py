"""``code/helper_main_v0`` end to end, with the real subprocess sandbox."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest

from llm_marl_envs.code import helper_main_v0 as task
from llm_marl_envs.code.helper_main_policies import main_only_answers, oracle_answers
from llm_marl_envs.code.helper_main_reward import SandboxInfraError
from llm_marl_envs.code.helper_main_scoring import HelperMainScorer, Submission
from llm_marl_envs.data import load_humaneval
from tests.conftest import play_episode

FEW = ["HumanEval/0", "HumanEval/2", "HumanEval/32", "HumanEval/53"]


@pytest.fixture(scope="module")
def humaneval():
    return load_humaneval()


@pytest.fixture(scope="module")
def few(humaneval):
    return [p for p in humaneval if p.task_id in FEW]


def play(env, policy, task_id=None, seed=0):
    env.reset(seed=seed, options={"task_id": task_id} if task_id else None)
    for agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else policy(env, agent))
    return env.unwrapped.record.total_reward


def scripted(answers_by_turn):
    """A policy answering ``answers_by_turn[turn][agent]`` (a callable of the problem or text)."""

    def policy(env, agent):
        inner = env.unwrapped
        answer = answers_by_turn[min(inner.turn, len(answers_by_turn) - 1)][agent]
        return answer(inner.problem) if callable(answer) else answer

    return policy


def test_oracle_reaches_the_maximum_on_all_164_problems(humaneval):
    for helpers in ({"helper": "aux"}, {"helper_0": "aux_0", "helper_1": "aux_1"}):
        scorer = HelperMainScorer(helpers)
        problems = humaneval if len(helpers) == 1 else humaneval[::8]
        scored = scorer.score_many([Submission(p, oracle_answers(p, helpers)) for p in problems])
        bad = {p.task_id: s.score.components for p, s in zip(problems, scored) if s.score.total != 4.0}
        assert not bad, bad
        assert all(s.score.passed == s.score.n_tests > 0 for s in scored)


def test_empty_below_main_only_below_oracle(few):
    env = task.env(problems=few)
    for p in few:
        oracle = play(env, task.best_policy, p.task_id)
        alone = play(env, task.main_only_policy, p.task_id)
        empty = play(env, lambda e, a: "", p.task_id)
        assert (empty, oracle) == env.unwrapped.return_range() == (0.0, 4.0)
        assert empty < alone < oracle
        assert alone == pytest.approx(2.5)  # structure 1.0 + syntax 0.5 + tests 1.0, no cooperation


def test_every_component_is_reported_in_infos(few):
    env = task.env(problems=few)
    play(env, task.best_policy, "HumanEval/0")
    comps = env.unwrapped.record.steps_of("main")[-1].reward_components
    for key in ("structure_helper", "structure_main", "syntax", "tests", "coop_calls_helper",
                "coop_not_thin", "coop_result_ignored", "score", "tests_passed", "tests_total",
                "visible_test_score"):  # fmt: skip
        assert key in comps
    assert comps["tests_passed"] == comps["tests_total"] == 7
    assert comps["score"] == 4.0


def test_multi_turn_delta_rewards_feedback_and_early_end(few):
    broken = {"helper": "```python\ndef aux(x):\n    return x\n```", "main": "```python\ndef has_close_elements(numbers, t:\n```"}
    wrong = {"helper": "def aux(n):\n    return n * 2", "main": "def has_close_elements(numbers, threshold):\n    return aux(len(numbers)) > 100"}
    fix = {a: (lambda p, a=a: oracle_answers(p, {"helper": "aux"})[a]) for a in ("helper", "main")}
    env = task.env(problems=few, max_turns=4, feedback="full")
    assert play(env, scripted([broken, wrong, fix, fix]), "HumanEval/0") == pytest.approx(4.0)
    turns = env.unwrapped.record.turns
    assert len(turns) == 3 and env.unwrapped.record.terminated  # ended early once all tests pass
    scores = [t.components["score"] for t in turns]
    assert scores[0] == pytest.approx(0.4)  # main's `def` does not parse: not a definition
    assert [t.reward for t in turns] == pytest.approx([scores[0], scores[1] - scores[0], scores[2] - scores[1]])
    helper_chat = env.unwrapped.observe_chat("helper")
    feedback_1, feedback_2 = [m["content"] for m in helper_chat if m["content"].startswith("Turn ")]
    assert "does not parse" in feedback_1 and "line 1, column" in feedback_1
    assert "Tests: 3/7 passed" in feedback_2 and "Test 1 " in feedback_2
    assert "input: has_close_elements([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3)\n  expected: True\n  got: False" in feedback_2
    # each agent sees only its own answers plus feedback (blind): main's code is not in helper's chat
    assert not any("threshold):" in m["content"] for m in helper_chat if m["role"] != "assistant")


@pytest.mark.parametrize("mode", ["pass_fail", "none"])
def test_feedback_modes(few, mode):
    wrong = {"helper": "def aux(n):\n    return n * 2", "main": "def has_close_elements(numbers, threshold):\n    return aux(len(numbers)) > 100"}
    env = task.env(problems=few, max_turns=2, feedback=mode, turn_reward="final")
    assert play(env, scripted([wrong]), "HumanEval/0") == pytest.approx(env.unwrapped.history[-1].score.total)
    assert env.unwrapped.record.turns[0].reward == 0.0  # "final": only the last turn pays
    text = env.unwrapped.observe_chat("main")[3]["content"]
    visible = [t.components["visible_test_score"] for t in env.unwrapped.record.turns]
    assert visible == ([0.0, 1.0] if mode == "pass_fail" else [0.0, 0.0])  # turn 2 is scored on shown tests
    if mode == "pass_fail":
        assert "Tests: 3/7 passed. Failing tests: 1, 3, 5, 6." in text
        assert "Structure" not in text
    else:
        assert "Tests" not in text and "Turn 1 of 2 is over." in text


def test_sequential_visibility_shows_helper_code_and_is_not_parallel(few):
    env = task.env(problems=few, visibility="sequential")
    play(env, task.best_policy, "HumanEval/2")
    main_chat = env.unwrapped.observe_chat("main")
    assert any("def aux(number: float)" in m["content"] for m in main_chat if m["role"] == "user")
    assert env.unwrapped.record.total_reward == 4.0
    # not parallelizable: its parallel_env steps one agent at a time (the other's action is a no-op)
    _, infos = task.parallel_env(problems=few, visibility="sequential").reset(seed=0)
    assert sum(info["acting"] for info in infos.values()) == 1
    blind = task.env(problems=few)
    play(blind, task.best_policy, "HumanEval/2")
    assert not any("def aux" in m["content"] for m in blind.unwrapped.observe_chat("main") if m["role"] == "user")


def test_parallel_env_blind(few):
    penv = task.parallel_env(problems=few, max_turns=2)
    obs, infos = penv.reset(seed=0)
    assert set(obs) == {"helper", "main"}
    inner = penv.aec_env.unwrapped
    actions = oracle_answers(inner.problem, inner.helper_functions)
    _, rewards, terms, _, infos = penv.step(actions)
    assert rewards == {"helper": 4.0, "main": 4.0} and all(terms.values())


def test_messy_answers_are_handled_and_reported(few):
    helper = "Here is my helper.\n```python\ndef aux(numbers, threshold):\n    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n\ndef has_close_elements(numbers, threshold):\n    return True\n```"
    main = "I'll also write aux just in case:\ndef aux(numbers, threshold):\n    return False\n\ndef has_close_elements(numbers, threshold):\n    found = aux(numbers, threshold)\n    return bool(found) and len(numbers) > 1\n\nprint(has_close_elements([1.0], 0.5))\nThat's it."
    env = task.env(problems=few)
    assert play(env, scripted([{"helper": helper, "main": main}]), "HumanEval/0") == pytest.approx(4.0)
    issues = {a: env.unwrapped.record.steps_of(a)[-1].format_issues for a in ("helper", "main")}
    assert any("entry point belongs to the main agent" in x for x in issues["helper"])
    assert any("helper's is used" in x for x in issues["main"])
    assert any("top-level statement dropped" in x for x in issues["main"])
    # the same with a format penalty: both agents flagged once
    env = task.env(problems=few, format_penalty=-0.1)
    assert play(env, scripted([{"helper": helper, "main": main}]), "HumanEval/0") == pytest.approx(3.8)


def test_thin_wrapper_and_ignored_result_are_scored(few):
    aux = "def aux(numbers, threshold):\n    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])"
    thin = "def has_close_elements(numbers, threshold):\n    return aux(numbers, threshold)"
    ignored = "def has_close_elements(numbers, threshold):\n    aux(numbers, threshold)\n    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])"
    env = task.env(problems=few)
    assert play(env, scripted([{"helper": aux, "main": thin}]), "HumanEval/0") == pytest.approx(3.0)
    assert play(env, scripted([{"helper": aux, "main": ignored}]), "HumanEval/0") == pytest.approx(3.5)  # 2.5 +0.5 +1.0 -0.5
    assert env.unwrapped.record.turns[-1].components["coop_result_ignored"] == -0.5


def test_coalition_values_and_shapley_credit(few):
    env = task.env(problems=few)
    play(env, task.best_policy, "HumanEval/53")
    inner = env.unwrapped
    agents = inner.possible_agents
    v = {frozenset(s): inner.coalition_value(frozenset(s)) for r in range(3) for s in itertools.combinations(agents, r)}
    assert v[frozenset(agents)] == 4.0
    assert v[frozenset({"main"})] == pytest.approx(0.6) and v[frozenset({"helper"})] == pytest.approx(0.4)
    assert v[frozenset()] == 0.0
    n = len(agents)
    phi = {
        k: sum(
            math.factorial(len(s)) * math.factorial(n - len(s) - 1) / math.factorial(n) * (v[s | {k}] - v[s])
            for s in v if k not in s
        )
        for k in agents
    }
    assert sum(phi.values()) == pytest.approx(4.0)
    assert phi["main"] == pytest.approx(2.1) and phi["helper"] == pytest.approx(1.9)
    with pytest.raises(ValueError):
        inner.coalition_value(frozenset(agents), mode="regenerate")


def test_ungated_coalition_value_runs_the_masked_program(few):
    from llm_marl_envs.code.helper_main_reward import RewardConfig

    env = task.env(problems=few, reward=RewardConfig(gated=False))
    play(env, task.main_only_policy, "HumanEval/53")
    inner = env.unwrapped
    # main solved alone, so masking the helper keeps every test passing: 0.6 + 0.5 + 1.0
    assert inner.coalition_value(frozenset({"main"})) == pytest.approx(2.1)
    assert inner.coalition_value(frozenset({"helper"})) == pytest.approx(0.4 + 0.5)


def test_problem_choice_is_seeded_and_can_be_forced(humaneval):
    env = task.env(split="eval", eval_fraction=0.1, split_seed=3)
    draws = []
    for seed in (0, 1, 0):
        env.reset(seed=seed)
        draws.append(env.unwrapped.problem.task_id)
    assert draws[0] == draws[2]
    assert len(env.unwrapped.problems) == 16
    env.reset(seed=0, options={"task_id": env.unwrapped.problems[5].task_id})
    assert env.unwrapped.problem == env.unwrapped.problems[5]
    with pytest.raises(KeyError):
        env.reset(seed=0, options={"task_id": "nope"})
    with pytest.raises(ValueError):
        task.env(visibility="peeking")


def test_several_helpers(few):
    env = task.env(problems=few, n_helpers=2, max_turns=2)
    assert env.unwrapped.possible_agents == ["helper_0", "helper_1", "main"]
    assert play(env, task.best_policy, "HumanEval/32") == 4.0
    text = env.unwrapped.observe_chat("main")[1]["content"]
    assert "`aux_0(...)`" in text and "`aux_1(...)`" in text
    # helper_1 answers nothing: structure gives 0.4 * 1/2 + 0.6 and the level fails
    answers = {"helper_0": lambda p: oracle_answers(p, env.unwrapped.helper_functions)["helper_0"],
               "helper_1": "", "main": lambda p: oracle_answers(p, env.unwrapped.helper_functions)["main"]}  # fmt: skip
    assert play(env, scripted([answers]), "HumanEval/32") == pytest.approx(0.8)


class _BrokenSandbox:
    """A sandbox whose infrastructure fails (the real result type, with infra_error set)."""

    def __init__(self):
        from llm_marl_envs.sandbox import default_sandbox

        self.real = default_sandbox()

    def run(self, program, tests, **kwargs):
        res = self.real.run(program, tests, **kwargs)
        return dataclasses.replace(res, tests=[], infra_error="worker pool crashed")

    def run_batch(self, jobs):
        return [self.run(j.program, j.tests, setup=j.setup) for j in jobs]


def test_sandbox_infra_error_raises_instead_of_scoring_zero(few):
    env = task.env(problems=few, sandbox=_BrokenSandbox())
    with pytest.raises(SandboxInfraError, match="worker pool crashed"):
        play(env, task.best_policy, "HumanEval/0")


def test_compliance_settings_small(humaneval):
    env = task.env(dataset="humaneval", max_turns=2, split="eval", eval_fraction=0.05)
    assert play_episode(env, task.best_policy, seed=0) == 4.0
    assert len(env.unwrapped.problems) == 8
    assert main_only_answers(humaneval[0], {"helper": "aux"})["main"].count("aux") == 0


def test_cooperation_sees_through_mains_own_functions(few):
    aux = "def aux(numbers, threshold):\n    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])"
    via_private = (
        "def _core(numbers, threshold):\n    found = aux(numbers, threshold)\n    return bool(found) and len(numbers) > 1\n\n"
        "def has_close_elements(numbers, threshold):\n    return _core(numbers, threshold)"
    )
    double_wrap = (
        "def _core(numbers, threshold):\n    return aux(numbers, threshold)\n\n"
        "def has_close_elements(numbers, threshold):\n    return _core(numbers, threshold)"
    )
    env = task.env(problems=few)
    assert play(env, scripted([{"helper": aux, "main": via_private}]), "HumanEval/0") == pytest.approx(4.0)
    assert play(env, scripted([{"helper": aux, "main": double_wrap}]), "HumanEval/0") == pytest.approx(3.0)
    assert env.unwrapped.record.turns[-1].components["coop_not_thin"] == 0.0


def test_full_feedback_shows_exceptions_with_traceback(few):
    crash = {"helper": "def aux(numbers):\n    return 1 / 0", "main": "def has_close_elements(numbers, threshold):\n    return aux(numbers) < threshold"}
    env = task.env(problems=few, max_turns=2)
    play(env, scripted([crash]), "HumanEval/0")
    text = env.unwrapped.observe_chat("helper")[3]["content"]
    assert "Tests: 0/7 passed." in text
    assert "exception ZeroDivisionError: division by zero" in text and "traceback:" in text


def test_instrumented_tests_keep_pass_fail_unchanged(humaneval):
    """The failure-reporting rewrite of the asserts never changes which tests pass."""
    from llm_marl_envs.sandbox import Job, default_sandbox, tests_from_check

    scorer = HelperMainScorer({"helper": "aux"})
    problems = humaneval[:40]
    wrong = [p.prompt + "    return None\n" for p in problems]
    jobs_plain, jobs_instr = [], []
    for p, prog in zip(problems, wrong):
        setup, tests = tests_from_check(p.test, p.entry_point, prompt=p.prompt)
        jobs_plain.append(Job(prog, tests, setup=setup))
        isetup, itests = scorer.tests_for(p)
        jobs_instr.append(Job(prog, itests, setup=isetup))
    plain = default_sandbox().run_batch(jobs_plain)
    instr = default_sandbox().run_batch(jobs_instr)
    for a, b in zip(plain, instr):
        assert [t.passed for t in a.tests] == [t.passed for t in b.tests]
    assert sum(t.code.startswith("_hm_got = ") for p in problems for t in scorer.tests_for(p)[1]) > 100
