"""``code/tree_search_v0``: episodes with the scripted policies, records, feedback, infra errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from llm_marl_envs.code import tree_search_v0 as ts
from llm_marl_envs.code.feedback import FeedbackConfig, parse_failures
from llm_marl_envs.code.selection import SelectionConfig
from llm_marl_envs.data.stdio_problems import load_stdio_sample
from llm_marl_envs.sandbox import Sandbox, SandboxConfig, SandboxError

HUMANEVAL_IDS = ["HumanEval/0", "HumanEval/2", "HumanEval/53"]


def play(env, policy, seed=0, problem=None):
    env.reset(seed=seed, options={} if problem is None else {"problem": problem})
    for agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else policy(env, agent))
    return env.unwrapped.record.total_reward


def test_oracle_solves_every_sample_problem_at_the_first_node():
    env = ts.env(dataset="stdio_sample", max_nodes=1)
    assert len(env.unwrapped.problems) == 8
    for i in range(8):
        assert play(env, ts.best_policy, problem=i) == 1.0
        (node,) = env.unwrapped.tree.nodes
        assert (node.score, node.status, node.hidden_score) == (1.0, "passed", 1.0)


def test_oracle_solves_humaneval_problems_with_docstring_public_tests():
    env = ts.env(dataset="humaneval", problem_ids=HUMANEVAL_IDS, max_nodes=2)
    for i, task_id in enumerate(HUMANEVAL_IDS):
        problem = env.unwrapped.problems[i]
        assert problem.task_id == task_id and problem.public_source == "examples"
        assert len(problem.public_tests) >= 1 and len(problem.hidden_tests) > len(problem.public_tests) - 1
        assert play(env, ts.best_policy, problem=i) == 1.0
        assert [n.score for n in env.unwrapped.tree.nodes] == [1.0, 1.0]


@pytest.mark.parametrize("dataset", ["stdio_sample", "humaneval"])
def test_buggy_then_fixed_repairs_exactly_when_shown_a_failing_input(dataset):
    kwargs = {"problem_ids": HUMANEVAL_IDS} if dataset == "humaneval" else {}
    env = ts.env(dataset=dataset, max_nodes=6, **kwargs)
    for i in range(len(env.unwrapped.problems)):
        reward = play(env, ts.buggy_then_fixed_policy, seed=i, problem=i)
        tree = env.unwrapped.tree
        for n in tree.nodes:
            shown_failure = n.parent_id >= 0 and tree[n.parent_id].score < 1.0
            assert n.score == (1.0 if shown_failure else 0.0), (i, n.id)
            if shown_failure:  # the repair came from the failing input in the observation
                assert "input:" in n.prompt_feedback
        repaired = any(n.score == 1.0 for n in tree.nodes)
        assert reward == (1.0 if repaired else 0.0)
    # over these problems and seeds the search refines a failing node at least once
    assert play(env, ts.buggy_then_fixed_policy, seed=0, problem=0) == 1.0


@pytest.mark.parametrize("feedback", [FeedbackConfig(mode="pass_fail"), FeedbackConfig(mode="none")])
def test_buggy_policy_cannot_repair_without_failing_inputs_in_the_feedback(feedback):
    env = ts.env(dataset="stdio_sample", max_nodes=6, feedback=feedback)
    assert play(env, ts.buggy_then_fixed_policy, seed=0, problem=0) == 0.0
    assert any(n.kind == "refine" for n in env.unwrapped.tree.nodes)
    assert all(n.score == 0.0 for n in env.unwrapped.tree.nodes)


def test_always_failing_policy_gets_zero():
    env = ts.env(dataset="stdio_sample", max_nodes=3)
    assert play(env, ts.always_fail_policy, problem=2) == 0.0


def test_refinement_observation_has_problem_parent_program_and_structured_feedback():
    env = ts.env(dataset="stdio_sample", max_nodes=8)
    env.reset(seed=0, options={"problem": 0})
    raw = env.unwrapped
    while True:
        agent = env.agent_selection
        if raw.decision.parent_id >= 0:
            break
        assert raw.observe_chat(agent)[-1]["content"].endswith("Write a new solution from scratch. Answer with one ```python code block.")
        env.step("```python\nprint(int(input().split()[0]) // 0)\n```")
    prompt = raw.observe_chat(agent)[-1]["content"]
    assert raw.problem.statement.strip() in prompt
    assert "print(int(input().split()[0]) // 0)" in prompt  # the parent's program
    assert "exception ZeroDivisionError: integer division or modulo by zero" in prompt
    assert "traceback:" in prompt and "  input: 3 4" in prompt
    assert len(raw.observe_chat(agent)) == 2  # history="node": system + this node's prompt


def test_records_in_infos_and_tree_episode_return_equals_final_reward():
    env = ts.env(dataset="stdio_sample", max_nodes=5, n_agents=3)
    env.reset(seed=4, options={"problem": 3})
    seen, rewards = [], []
    for agent in env.agent_iter():
        _, reward, term, trunc, info = env.last()
        if term or trunc:
            env.step(None)
            continue
        env.step(ts.buggy_then_fixed_policy(env, agent))
        info = env.infos[agent]
        final = info.get("final")
        seen.append(info["node"])
        rewards.append(env.unwrapped.record.turns[-1].reward)
        assert info["decision"]["agent"] == agent == info["node"]["agent"]
        assert info["reward_components"]["node_score"] == info["node"]["score"]
    raw = env.unwrapped
    records = raw.tree.to_records()
    json.dumps(records)
    assert [r["id"] for r in seen] == list(range(5))
    assert [(r["id"], r["parent_id"], r["depth"], r["agent"], r["score"]) for r in seen] == [
        (r["id"], r["parent_id"], r["depth"], r["agent"], r["score"]) for r in records
    ]
    for r in records:
        assert r["parent_id"] == -1 or r["depth"] == records[r["parent_id"]]["depth"] + 1
        assert r["prompt_feedback"] == (records[r["parent_id"]]["feedback"] if r["parent_id"] >= 0 else "")
    assert rewards[:-1] == [0.0] * 4
    best = raw.tree.best()
    assert final["best_node"] == best.id and rewards[-1] == final["hidden_score"] == raw.record.total_reward
    assert set(raw.possible_agents) == {"agent_0", "agent_1", "agent_2"}


def test_same_seed_same_tree():
    def tree_of(seed):
        env = ts.env(dataset="stdio_sample", max_nodes=6)
        play(env, ts.buggy_then_fixed_policy, seed=seed, problem=1)
        return [(n.parent_id, n.agent, n.score) for n in env.unwrapped.tree.nodes]

    assert tree_of(7) == tree_of(7)
    assert any(tree_of(s) != tree_of(7) for s in (8, 9, 10))


def test_best_node_ties_go_to_the_earliest_and_hidden_decides():
    env = ts.env(dataset="stdio_sample", max_nodes=2, selection=SelectionConfig(agent_choice="round_robin"))
    env.reset(seed=0, options={"problem": 0})  # sum of two
    # node 0 passes the public tests (3 4, -5 5) but not the hidden big-number test? No: Python ints are exact,
    # so use a program that hard-codes the public answers: public score 1, hidden score 0.
    env.step("```python\nprint({'3 4': 7, '-5 5': 0}.get(input().strip(), 0))\n```")
    env.step(ts.best_policy(env, env.agent_selection))
    raw = env.unwrapped
    assert [n.score for n in raw.tree.nodes] == [1.0, 1.0]
    assert raw.final["best_node"] == 0  # tie on public score: the earliest node
    assert raw.record.total_reward == pytest.approx(1 / 4)  # hidden tests: only "0 0" -> 0 passes


def test_stop_when_solved_terminates_early_and_binary_modes():
    env = ts.env(dataset="stdio_sample", max_nodes=5, stop_when_solved=True, final_reward="binary")
    assert play(env, ts.best_policy, problem=4) == 1.0
    assert len(env.unwrapped.tree) == 1 and env.unwrapped.record.terminated
    env = ts.env(dataset="stdio_sample", max_nodes=1, score_mode="binary", final_reward="binary")
    env.reset(seed=0, options={"problem": 0})
    env.step("```python\nprint({'3 4': 7}.get(input().strip(), -1))\n```")  # passes 1 of 2 public tests
    assert env.unwrapped.tree[0].score == 0.0 and env.unwrapped.tree[0].passed == 1


def test_no_code_and_prose_are_format_issues_and_zero_nodes():
    env = ts.env(dataset="stdio_sample", max_nodes=2, format_penalty=-0.1)
    env.reset(seed=0)
    agent = env.agent_selection
    env.step("")
    node = env.unwrapped.tree[0]
    assert (node.status, node.score, node.program) == ("no_code", 0.0, "")
    assert "No Python code was found" in node.feedback
    assert env.infos[agent]["format_issues"] == ["no Python code found in the answer"]
    agent = env.agent_selection
    env.step("I don't know.")  # prose is taken as code (see code/extract.py): it does not compile
    node = env.unwrapped.tree[1]
    assert (node.status, node.score) == ("compile_error", 0.0)
    assert env.infos[agent]["format_issues"] == ["the program does not compile"]
    assert env.unwrapped.record.total_reward == pytest.approx(-0.2)
    assert env.unwrapped.return_range() == (pytest.approx(-0.2), 1.0)


def test_hidden_eval_all_scores_every_node():
    env = ts.env(dataset="stdio_sample", max_nodes=3, hidden_eval="all")
    play(env, ts.buggy_then_fixed_policy, seed=0, problem=0)
    raw = env.unwrapped
    assert all(n.hidden_score is not None for n in raw.tree.nodes)
    assert raw.final["hidden_passed"] is not None and raw.final["hidden_total"] == 4


def test_heterogeneous_agents_and_render_draws_the_tree():
    env = ts.env(dataset="stdio_sample", max_nodes=3, agent_names=["coder", "debugger"],
                 agent_instructions=["You write code ({agent}) {like: this}.", "You fix code ({agent} of {n})."],
                 render_mode="ansi")  # fmt: skip
    play(env, ts.best_policy, problem=5)
    raw = env.unwrapped
    assert raw.observe_chat("debugger")[0]["content"] == "You fix code (debugger of 2)."
    assert raw.observe_chat("coder")[0]["content"] == "You write code (coder) {like: this}."
    text = env.render()
    assert "Search tree for stdio/palindrome (3/3 nodes):\nproblem\n" in text
    assert "#0 " in text and "<- best" in text


def test_infra_errors_are_flagged_and_excluded_never_silent_zeros():
    sandbox = Sandbox(SandboxConfig(workers=1))
    sandbox.close()  # a sandbox that cannot run anything: every run is an infrastructure error
    env = ts.env(dataset="stdio_sample", max_nodes=2, sandbox=sandbox)
    reward = play(env, ts.best_policy, problem=0)
    raw = env.unwrapped
    assert [n.status for n in raw.tree.nodes] == ["infra_error", "infra_error"]
    assert all(n.score is None and "closed" in n.infra_error for n in raw.tree.nodes)
    assert raw.tree.nodes[1].parent_id == -1  # an infra-error node is never refined
    assert reward == 0.0
    comps = raw.record.turns[-1].components
    assert comps["infra_excluded"] == 1.0 and comps["infra_error"] == 1.0
    assert raw.final["infra_error"]
    env = ts.env(dataset="stdio_sample", max_nodes=2, sandbox=sandbox, on_infra_error="raise")
    env.reset(seed=0)
    with pytest.raises(SandboxError, match="not a wrong answer"):
        env.step(ts.best_policy(env, env.agent_selection))


def test_loads_functional_and_stdio_files(tmp_path):
    path = tmp_path / "he.jsonl"
    rec = {"task_id": "T/0", "prompt": 'def inc(x):\n    """Add one.\n    >>> inc(1)\n    2\n    """\n',
           "entry_point": "inc", "test": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(-1) == 0\n",
           "canonical_solution": "    return x + 1\n"}  # fmt: skip
    path.write_text(json.dumps(rec) + "\n")
    env = ts.env(dataset=str(path), max_nodes=1)
    (p,) = env.unwrapped.problems
    assert p.kind == "function" and p.public_inputs == ("inc(1)",)
    assert [t.code for t in p.hidden_tests] == ["assert candidate(-1) == 0\n"]  # inc(1) is in the prompt: not scored
    assert p.test_split["removed_from_hidden"] == 1 and p.test_split["score_tests"] == "hidden"
    assert play(env, ts.best_policy) == 1.0
    env = ts.env(dataset=load_stdio_sample()[:2], max_nodes=1)
    assert [p.kind for p in env.unwrapped.problems] == ["stdio", "stdio"]


def test_random_policy_runs_and_bad_kwargs_are_rejected():
    env = ts.env(dataset="stdio_sample", max_nodes=3)
    rng = np.random.default_rng(0)
    r = play(env, lambda e, a: ts.random_policy(e, a, rng))
    assert 0.0 <= r <= 1.0
    for bad in ({"score_mode": "avg"}, {"max_nodes": 0}, {"history": "x"}, {"on_infra_error": "ignore"}):
        with pytest.raises(ValueError):
            ts.env(dataset="stdio_sample", **bad)


def test_parse_failures_sees_what_the_refining_agent_sees():
    env = ts.env(dataset="stdio_sample", max_nodes=1)
    env.reset(seed=0, options={"problem": 2})
    env.step(ts.best_policy(env, env.agent_selection).replace("reversed(", "list("))
    blocks = parse_failures(env.unwrapped.tree[0].feedback)
    assert blocks[0]["input"] == "hello big world" and blocks[0]["expected"] == "world big hello"
    assert blocks[0]["got"] == "hello big world"


def test_public_examples_contradicted_by_the_reference_are_dropped():
    # HumanEval/47's docstring claims median([-10, 4, 6, 1000, 10, 20]) == 15.0; the check says 8.0
    env = ts.env(dataset="humaneval", problem_ids=["HumanEval/47"], max_nodes=1)
    before = env.unwrapped.problems[0]
    assert len(before.public_tests) == 2 and not before.validated
    assert play(env, ts.best_policy, problem=0) == 1.0
    p = env.unwrapped.problem
    assert p.validated and p.dropped_public == ("public_1",)
    assert p.public_inputs == ("median([3, 1, 2, 4, 5])",) and env.unwrapped.tree[0].score == 1.0
    unvalidated = ts.env(dataset="humaneval", problem_ids=["HumanEval/47"], max_nodes=1, validate_public=False)
    play(unvalidated, ts.best_policy, problem=0)
    assert unvalidated.unwrapped.tree[0].score == 0.5


def test_full_history_keeps_every_prompt_of_an_agent():
    env = ts.env(dataset="stdio_sample", max_nodes=4, n_agents=1, history="full")
    play(env, ts.always_fail_policy, problem=0)
    chat = env.unwrapped.observe_chat("agent_0")
    assert [m["role"] for m in chat] == ["system"] + ["user", "assistant"] * 4


def test_oracle_passes_every_humaneval_problem_at_the_first_node():
    env = ts.env(dataset="humaneval", max_nodes=1)
    raw = env.unwrapped
    for i in range(len(raw.problems)):
        assert play(env, ts.best_policy, problem=i) == 1.0, raw.problem.task_id
        # HumanEval/32, /38, /50: one looped check test and no literal example -> no public test, node score 0
        assert raw.tree[0].score == (1.0 if raw.problem.public_tests else 0.0), raw.problem.task_id
        assert raw.final["test_split"]["n_hidden"] == len(raw.problem.hidden_tests) >= 1


def test_validate_problems_up_front():
    env = ts.env(dataset="humaneval", problem_ids=["HumanEval/0", "HumanEval/47"], max_nodes=1)
    assert env.unwrapped.validate_problems() == 1
    assert [p.validated for p in env.unwrapped.problems] == [True, True]


def test_documented_example_tree_is_reproduced():
    # docs/tasks/tree_search.md draws this tree: buggy_then_fixed_policy, HumanEval/12, 6 nodes, seed 3
    env = ts.env(dataset="humaneval", problem_ids=["HumanEval/12"], max_nodes=6, render_mode="ansi")
    assert play(env, ts.buggy_then_fixed_policy, seed=3, problem=0) == 1.0
    raw = env.unwrapped
    assert [(d.parent_id, d.agent) for d in raw.decisions] == [
        (-1, "agent_1"), (0, "agent_1"), (0, "agent_1"), (2, "agent_1"), (1, "agent_1"), (0, "agent_0"),
    ]  # fmt: skip
    assert env.render().endswith(
        "problem\n"
        "`-- #0 agent_1 score=0.00 (0/3) failed\n"
        "    |-- #1 agent_1 score=1.00 (3/3) passed hidden=1.00  <- best\n"
        "    |   `-- #4 agent_1 score=0.00 (0/3) failed\n"
        "    |-- #2 agent_1 score=1.00 (3/3) passed\n"
        "    |   `-- #3 agent_1 score=0.00 (0/3) failed\n"
        "    `-- #5 agent_0 score=1.00 (3/3) passed"
    )
