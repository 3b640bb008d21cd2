"""The planner/worker search environment: protocol, partial observability, rewards, scripted teams, credit."""

import numpy as np
import pytest

from llm_marl_envs.data.qa_formats import QAExample
from llm_marl_envs.retrieval import Document, RetrievalError
from llm_marl_envs.search import planner_worker_v0 as pw
from llm_marl_envs.search.reward import shapley_values


def make(**kw):
    base = dict(n_entities=120, n_questions=60, cache_dir=False)
    return pw.env(**{**base, **kw})


def play(env, policy, question_index=None, seed=0):
    env.reset(seed=seed, options={} if question_index is None else {"question_index": question_index})
    for agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else policy(env, agent))
    return env.unwrapped.record.total_reward


def comps(inner, agent):
    """The reward components ``agent`` got at the last turn (what its infos held then)."""
    last = inner.record.turns[-1]
    return last.components | last.agent_components.get(agent, {})


def drive(env, actions, question_index=0):
    """Play a fixed list of actions (then "" for anything after)."""
    env.reset(seed=0, options={"question_index": question_index})
    it = iter(actions)
    for _agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else next(it, ""))
    return env.unwrapped


@pytest.mark.parametrize("kw", [dict(n_workers=2), dict(n_workers=1, answer_by="answerer"), dict(n_workers=3, top_k=5)])
def test_scripted_team_reaches_em_1_by_really_searching(kw):
    env = make(**kw)
    n = len(env.unwrapped.examples)
    by_hops = {}
    for i in range(n):
        r = play(env, pw.best_policy, i)
        inner = env.unwrapped
        by_hops.setdefault(inner.example.hops, []).append(r)
        calls = [c for w in inner.workers for c in inner.tool_calls[w]]
        assert len(calls) >= inner.example.hops and all(c.valid for c in calls)
        infos = comps(inner, "planner")
        assert infos["supporting_recall"] == 1.0 and infos["answer_em"] == 1.0
    assert set(by_hops) == {1, 2, 3, 4}
    assert all(np.mean(v) == 1.0 for v in by_hops.values())


def test_scripted_workers_fail_when_the_index_lacks_the_chain():
    world_env = make().unwrapped
    gold = {i for q in world_env.examples for i in q.supporting_ids}
    corpus = [d for d in world_env.world.documents if d.id not in gold]
    env = pw.env(examples=world_env.examples, corpus=corpus, cache_dir=False)
    assert all(play(env, pw.best_policy, i) == 0.0 for i in range(20))


def test_random_team_is_near_zero_and_no_search_team_is_zero():
    env = make()
    rng = np.random.default_rng(0)
    rand = [play(env, lambda e, a: pw.random_policy(e, a, rng), i % 60, seed=i) for i in range(60)]
    assert np.mean(rand) <= 0.05
    no_search = {}
    for i in range(60):
        r = play(env, pw.no_search_policy, i)
        no_search.setdefault(env.unwrapped.example.hops, []).append(r)
        assert all(not env.unwrapped.tool_calls[w] for w in env.unwrapped.workers)
    # No question contains its answer (a generator guarantee), so without retrieval nothing is
    # solvable -- on 1-hop questions too: the no-search team scores exactly 0 at every hop count.
    assert set(no_search) == {1, 2, 3, 4}
    assert all(max(v) == 0.0 for v in no_search.values())


def test_partial_observability():
    env = make(n_workers=2, answer_by="answerer")
    idx = next(i for i, q in enumerate(env.unwrapped.examples) if q.hops == 3)
    play(env, pw.best_policy, idx)
    inner = env.unwrapped
    chats = {a: "\n".join(m["content"] for m in inner.observe_chat(a)) for a in inner.possible_agents}
    ids = {w: {pid for c in inner.tool_calls[w] for pid in c.passage_ids} for w in inner.workers}
    assert ids["worker_0"] and ids["worker_1"]
    for pid in ids["worker_0"] - ids["worker_1"]:
        assert f'id="{pid}"' in chats["worker_0"] and f'id="{pid}"' not in chats["worker_1"]
    assert "<passage" not in chats["planner"] and "<passage" not in chats["answerer"]
    for w in inner.workers:  # workers see sub-questions, never the full question nor the gold
        assert inner.example.question not in chats[w]
    assert "Reports:" not in chats["answerer"] and "Notes from the planner" in chats["answerer"]
    assert "reported:" in chats["planner"]


def test_malformed_output_gets_flagged_and_penalized_never_raises():
    env = make(n_workers=2, max_tool_calls=2, format_penalty=-0.1, max_turns=6)
    inner = drive(
        env,
        [
            "",  # planner: nothing usable
            '<dispatch worker="7">q</dispatch><dispatch worker="0"></dispatch><dispatch worker="1">Who?</dispatch>'
            '<dispatch worker="1">again</dispatch>',
            "<search>   </search>",  # worker_1: empty query
            "<search>zzzqqq</search>",  # no results
            "<search>city</search>",  # over the limit of 2 -> not run, empty report
            "<answer>x</answer><dispatch>y</dispatch>",
        ],
    )
    steps = inner.record.steps
    issues = {i: s.format_issues for i, s in enumerate(steps)}
    assert "nothing happens" in issues[0][0]
    assert any("unknown worker" in x for x in issues[1]) and any("empty sub-question" in x for x in issues[1])
    assert any("second dispatch" in x for x in issues[1])
    assert issues[2] == ["empty search query"] and issues[3] == []
    assert "limit" in issues[4][0]
    assert any("ignored" in x for x in issues[5])
    assert [c.status for c in inner.tool_calls["worker_1"]] == ["empty_query", "no_results", "over_limit"]
    assert inner.record.turns[0].reward == pytest.approx(-0.1)
    assert inner.record.turns[1].reward == pytest.approx(-0.2)  # planner and worker_1 flagged
    assert inner.record.turns[2].reward == pytest.approx(-0.1)  # the planner again; the answer "x" is wrong
    assert comps(inner, "worker_1")["tool_validity"] == 0.0
    assert comps(inner, "worker_1")["agent_tool_calls"] == 3.0
    assert inner.record.terminated


def test_tool_validity_is_the_fraction_of_good_calls_and_long_text_is_cut():
    env = make(n_workers=1, max_tool_calls=3, max_report_chars=50)
    q = env.unwrapped.examples[0]
    inner = drive(env, ['<dispatch worker="0">look</dispatch>', "<search>!!!</search>",
                        f"<search>{q.question}</search>", "<report>" + "y" * 500 + "</report>"])  # fmt: skip
    assert [c.status for c in inner.tool_calls["worker_0"]] == ["empty_query", "ok"]
    assert comps(inner, "worker_0")["tool_validity"] == 0.5
    assert comps(inner, "planner")["agent_tool_calls"] == 0.0
    assert inner.reports[0][3] == "y" * 50
    assert any("cut to 50" in x for x in inner.record.steps[3].format_issues)
    huge = drive(make(), ["<answer>" + "z" * 100_000 + "</answer>"])
    assert any("truncated" in x for x in huge.record.steps[0].format_issues)
    empty = drive(make(), ["<answer>  </answer>"])
    assert empty.record.steps[0].format_issues == ["empty <answer>"] and empty.record.terminated


def test_retriever_failure_is_reported_as_infrastructure_not_as_a_bad_call():
    class Broken:
        def search(self, query, k):
            raise RetrievalError("index server down")

        def batch_search(self, queries, k):
            raise RetrievalError("index server down")

    world = make().unwrapped
    env = pw.env(examples=world.examples, retriever=Broken())
    inner = drive(env, ['<dispatch worker="0">q</dispatch>', "<search>Korvath</search>", "<report>?</report>"])
    assert [c.status for c in inner.tool_calls["worker_0"]] == ["retrieval_error"]
    assert comps(inner, "planner")["retrieval_errors"] == 1.0
    assert "retrieval failed" in inner.observe_chat("worker_0")[-2]["content"]


def test_f1_metric_and_answerer_layout_rules():
    env = make(metric="f1", answer_by="answerer")
    org_q = next(i for i, q in enumerate(env.unwrapped.examples) if len(q.answers[0].split()) == 2)
    gold = env.unwrapped.examples[org_q].answers[0]
    inner = drive(env, ["<answer>guess</answer>", f"<handoff>{gold}</handoff>", f"<answer>{gold.split()[0]}</answer>"], org_q)
    assert any("cannot <answer>" in x for x in inner.record.steps[0].format_issues)
    assert inner.record.total_reward == pytest.approx(2 * 0.5 / 1.5)
    assert comps(inner, "answerer")["answer_em"] == 0.0


def test_options_validation_and_metadata():
    with pytest.raises(ValueError):
        make(max_turns=4, max_hops=4)
    with pytest.raises(ValueError):
        make(answer_by="router")
    env = make()
    assert not env.unwrapped.metadata["is_parallelizable"]
    env.reset(seed=0, options={"question_id": "q5"})
    assert env.unwrapped.example.id == "q5"
    clone = env.clone()
    assert clone.unwrapped.retriever is env.unwrapped.retriever and clone.unwrapped.examples is env.unwrapped.examples


def test_coalition_values_and_exact_shapley():
    env = make(n_workers=3)
    inner = env.unwrapped
    two_hop = [i for i, q in enumerate(inner.examples) if q.hops == 2]
    seen = set()
    for idx in two_hop:
        assert play(env, pw.best_policy, idx) == 1.0  # hop 1 -> worker_0, hop 2 -> worker_1
        agents = inner.possible_agents
        v = lambda s: inner.coalition_value(frozenset(s))  # noqa: E731
        assert v(agents) == 1.0 and v([]) == 0.0
        assert v([a for a in agents if a != "planner"]) == 0.0  # the answer's author masked
        phi = shapley_values(agents, v)
        assert sum(phi.values()) == pytest.approx(1.0)  # efficiency: v(all) - v(empty)
        assert phi["worker_2"] == 0.0  # never dispatched: a null player
        hop1, hop2 = inner.example.supporting_ids
        got = {w: inner.evidence.by_worker.get(w, {}) for w in inner.workers}
        assert phi["planner"] >= max(phi.values()) - 1e-9  # the answer's author is a veto player
        if hop1 not in got["worker_1"] and hop2 not in got["worker_0"]:
            # each worker alone found its link of the chain: v = 1 only with all three
            assert {a: phi[a] for a in ("planner", "worker_0", "worker_1")} == pytest.approx(
                {"planner": 1 / 3, "worker_0": 1 / 3, "worker_1": 1 / 3}
            )
            seen.add("chain")
        elif hop1 in got["worker_1"]:  # worker_1 also surfaced hop 1's passage: worker_0 is redundant
            assert phi["worker_0"] == 0.0 and phi["worker_1"] == pytest.approx(0.5)
    assert "chain" in seen
    with pytest.raises(ValueError):
        inner.coalition_value(frozenset(agents), mode="regenerate")


def test_loaded_examples_with_their_own_corpus(tmp_path):
    docs = [Document("p1", "Alpha", "Alpha is the capital of Betaland."), Document("p2", "Gamma", "Gamma is a river.")]
    ex = [QAExample("x", "What is the capital of Betaland?", ("Alpha",), supporting_titles=("Alpha",))]
    env = pw.env(examples=ex, corpus=docs, cache_dir=tmp_path, n_workers=1)
    inner = drive(env, ['<dispatch worker="0">capital of Betaland</dispatch>', "<search>capital Betaland</search>",
                        "<report>Alpha</report>", "<answer>Alpha</answer>"])  # fmt: skip
    assert inner.record.total_reward == 1.0
    assert comps(inner, "planner")["supporting_recall"] == 1.0
    assert inner.coalition_value(frozenset({"planner"})) == 0.0  # Alpha came only from worker_0's passage


def test_env_index_is_cached_on_disk_and_answerer_layout_passes_the_pettingzoo_api(tmp_path):
    from pettingzoo.test import api_test

    first = make(cache_dir=tmp_path)
    assert not first.unwrapped.retriever.loaded_from_cache
    second = make(cache_dir=tmp_path)
    assert second.unwrapped.retriever.loaded_from_cache
    assert second.unwrapped.retriever.index_dir.parent == tmp_path / "bm25"
    api_test(make(answer_by="answerer", n_workers=3, n_entities=30, n_questions=10, max_hops=2), num_cycles=30)
