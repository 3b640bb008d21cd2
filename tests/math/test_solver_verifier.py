"""math/solver_verifier_v0: answer checking, generators, loaders, the verify loop, rewards, credit."""

from __future__ import annotations

import json
import re
from fractions import Fraction

import numpy as np
import pytest

from llm_marl_envs.data.seed_splits import SPLIT_SIZE, TEST_OFFSET, instance_seed, split_of_seed
from llm_marl_envs.math import solver_verifier_v0 as sv
from llm_marl_envs.math.answers import answers_match, last_boxed, parse_verdict
from llm_marl_envs.math.problems import MathProblem, generate_problem, load_gsm8k, load_math, load_math_jsonl

APPROVE, REJECT = "<verify>approve</verify>", "<verify>reject</verify> the sum is wrong"


@pytest.mark.parametrize(("gold", "pred", "same"), [
    ("1/2", r"\frac{1}{2}", True), ("1/2", "0.5", True), ("20", "20.0", True), ("-7/3", r"-\dfrac{7}{3}", True),
    ("20", "21", False), ("5", "five-ish", False), ("5", None, False), ("5", "", False), ("5", "5" * 500, False),
])
def test_answers_are_compared_mathematically(gold, pred, same):
    assert answers_match(gold, pred) is same


def test_last_boxed_and_verdicts():
    assert last_boxed(r"first \boxed{1} then \boxed{\frac{1}{2}}") == r"\frac{1}{2}"
    assert last_boxed(r"\boxed{12") is None and last_boxed("no box") is None
    assert parse_verdict(REJECT).decision == "reject" and parse_verdict(REJECT).reason == "the sum is wrong"
    assert parse_verdict("<VERIFY> approve </VERIFY>").decision == "approve"
    assert parse_verdict("<verify>maybe</verify>").decision is None
    assert parse_verdict("<verify>approve</verify><verify>reject</verify>").decision is None
    bare = parse_verdict("<verify>reject</verify>")
    assert bare.decision == "reject" and bare.issue == "reject without a reason"


def _evaluate(question: str) -> Fraction:
    expr = question.removeprefix("Compute ").removesuffix(". Give the exact value.")
    return eval(re.sub(r"(\d+)", r"Fraction(\1)", expr), {"Fraction": Fraction})  # our own generated text


def test_generators_are_seeded_and_correct():
    for seed in range(200):
        p = generate_problem("arithmetic", seed)
        assert p == generate_problem("arithmetic", seed)
        assert answers_match(p.answer, str(_evaluate(p.question))), p
    words = [generate_problem("word", s) for s in range(50)]
    assert len({p.question for p in words}) > 40 and all(p.answer.lstrip("-").isdigit() for p in words)
    with pytest.raises(ValueError, match="unknown generator"):
        generate_problem("calculus", 0)


def test_train_and_test_seed_ranges_are_disjoint():
    rng = np.random.default_rng(0)
    train = {instance_seed(rng, "train") for _ in range(500)}
    test = {instance_seed(rng, "test") for _ in range(500)}
    assert max(train) < SPLIT_SIZE <= TEST_OFFSET <= min(test)
    assert {split_of_seed(s) for s in train} == {"train"} and {split_of_seed(s) for s in test} == {"test"}
    env = sv.env(split="test")
    env.reset(seed=3)
    assert split_of_seed(int(env.unwrapped.problem.task_id.split("/")[1])) == "test"


def _play(env, answers: dict[str, list[str]], seed: int = 0) -> None:
    env.reset(seed=seed)
    queues = {a: list(v) for a, v in answers.items()}
    for agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else queues[agent].pop(0))


def test_rejection_returns_the_reason_and_the_second_answer_counts():
    env = sv.env(max_loops=2)
    env.reset(seed=0)
    gold = env.unwrapped.problem.answer
    _play(env, {"solver": ["\\boxed{123456}", f"\\boxed{{{gold}}}"], "verifier": [REJECT, APPROVE]})
    inner = env.unwrapped
    assert [t.reward for t in inner.record.turns] == [0.0, 1.0] and inner.record.terminated
    solver_chat = env.observe_chat("solver")
    assert any("rejected" in m["content"] and "the sum is wrong" in m["content"] for m in solver_chat)
    first = inner.record.turns[0].agent_components
    assert first["verifier"]["verifier_correct"] == 1.0 and first["solver"]["solver_correct"] == 0.0


def test_approval_ends_early_and_wrong_final_answer_scores_zero():
    env = sv.env(max_loops=2)
    _play(env, {"solver": ["\\boxed{123456}"], "verifier": [APPROVE]})
    assert env.unwrapped.record.total_reward == 0.0 and len(env.unwrapped.record.turns) == 1
    turn = env.unwrapped.record.turns[0]
    assert turn.agent_components["verifier"]["verifier_correct"] == 0.0


def test_invalid_format_is_a_per_agent_component():
    env = sv.env(max_loops=1, invalid_format_cost=0.25)
    _play(env, {"solver": ["I think it is 4"], "verifier": ["looks good"]})
    turn = env.unwrapped.record.turns[0]
    assert turn.reward == 0.0
    assert turn.agent_components["solver"]["solver_invalid_format"] == -0.25
    assert turn.agent_components["verifier"]["verifier_invalid_format"] == -0.25
    assert env.unwrapped.record.steps[0].format_issues == ["no final answer in \\boxed{...}"]
    assert set(sv.LOCAL_REWARD_COMPONENTS["verifier"]) <= set(turn.agent_components["verifier"])


def test_coalition_value_masks_the_verifier_to_the_first_answer():
    env = sv.env(max_loops=2)
    env.reset(seed=1)
    gold = env.unwrapped.problem.answer
    _play(env, {"solver": ["\\boxed{123456}", f"\\boxed{{{gold}}}"], "verifier": [REJECT, APPROVE]}, seed=1)
    inner = env.unwrapped
    assert inner.coalition_value(frozenset({"solver", "verifier"})) == 1.0
    assert inner.coalition_value(frozenset({"solver"})) == 0.0  # the first answer was wrong
    assert inner.coalition_value(frozenset({"verifier"})) == 0.0
    with pytest.raises(ValueError):
        inner.coalition_value(frozenset({"solver"}), mode="regenerate")


def test_tool_output_reaches_the_solver_only():
    env = sv.env(tool=True, max_loops=1, timeout_s=2.0)
    _play(env, {"tool": ["```python\nprint(6 * 7)\n```"], "solver": ["\\boxed{1}"], "verifier": [APPROVE]})
    assert any("printed:\n42" in m["content"] for m in env.observe_chat("solver"))
    assert not any("42" in m["content"] for m in env.observe_chat("verifier"))
    assert env.unwrapped.record.turns[0].agent_components["tool"]["tool_ran"] == 1.0
    _play(env, {"tool": ["```python\n1 / 0\n```"], "solver": ["\\boxed{1}"], "verifier": [APPROVE]})
    assert any("ZeroDivisionError" in m["content"] for m in env.observe_chat("solver"))
    assert env.unwrapped.record.turns[0].agent_components["tool"]["tool_ran"] == 0.0


def test_loaders_read_gsm8k_and_math(tmp_path):
    gsm = tmp_path / "gsm.jsonl"
    gsm.write_text(json.dumps({"question": "2+2?", "answer": "2+2=4\n#### 4"}) + "\n"
                   + json.dumps({"question": "big?", "answer": "#### 1,000"}) + "\n")
    math_file = tmp_path / "math.jsonl"
    math_file.write_text(json.dumps({"problem": "half?", "solution": r"It is $\boxed{\frac{1}{2}}$."}) + "\n")
    assert [p.answer for p in load_gsm8k(gsm)] == ["4", "1000"]
    assert load_math(math_file)[0].answer == r"\frac{1}{2}"
    assert load_math_jsonl(gsm)[0].source == "gsm8k" and load_math_jsonl(math_file)[0].source == "math"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"problem": "no answer", "solution": "none"}) + "\n")
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        load_math(bad)


def test_file_problems_split_deterministically_and_disjointly():
    problems = [MathProblem(f"p{i}", f"what is {i}?", str(i)) for i in range(20)]
    train = sv.raw_env(problems=problems, split="train", test_fraction=0.25).problems
    test = sv.raw_env(problems=problems, split="test", test_fraction=0.25).problems
    assert len(test) == 5 and not {p.task_id for p in train} & {p.task_id for p in test}
    env = sv.env(problems=problems, split="test", test_fraction=0.25)
    env.reset(seed=0, options={"task_id": test[0].task_id})
    assert env.unwrapped.problem == test[0]


def test_answers_are_checked_off_the_main_thread_too():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:  # rollout threads: math-verify's SIGALRM limit is skipped there
        assert list(pool.map(lambda p: answers_match(*p), [("3/4", "0.75"), ("2", "3")])) == [True, False]
