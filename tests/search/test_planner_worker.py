"""The planner/worker search environment: protocol, partial observability, rewards, scripted teams, credit."""

import numpy as np
import pytest

from llm_marl_envs.core.credit import shapley_values
from llm_marl_envs.data.qa_formats import QAExample
from llm_marl_envs.retrieval import Document, RetrievalError
from llm_marl_envs.search import planner_worker_v0 as pw


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


def hop_scores(env, policy, n, seed_by_index=False):
    """Episode return of ``policy`` on questions 0..n-1, grouped by hop count."""
    by_hops = {}
    for i in range(n):
        r = play(env, policy, i, seed=i if seed_by_index else 0)
        by_hops.setdefault(env.unwrapped.example.hops, []).append(r)
    return by_hops


@pytest.mark.parametrize(
    "kw",
    [
        dict(n_workers=2),
        dict(n_workers=1, answer_by="answerer"),
        dict(n_workers=3, top_k=5),
        dict(n_workers=2, topic_passage=False),
    ],
)
def test_scripted_team_reaches_em_1_by_really_searching(kw):
    env = make(**kw)
    n = len(env.unwrapped.examples)
    by_hops = {}
    for i in range(n):
        r = play(env, pw.best_policy, i)
        inner = env.unwrapped
        hops = inner.example.hops
        by_hops.setdefault(hops, []).append(r)
        calls = [c for w in inner.workers for c in inner.tool_calls[w]]
        # hop 1 may be read off the given topic passage; every later hop is searched for
        searched_hops = hops - 1 if inner.topic_passage else hops
        assert len(calls) >= searched_hops and all(c.valid for c in calls)
        assert {r[0] for r in inner.reports} == set(range(searched_hops))  # one dispatch per searched hop
        infos = comps(inner, "planner")
        # the workers retrieved every searched hop's gold passage; recall counts worker retrievals
        # only (the given topic passage of hop 1 counts only if some worker's search surfaced it too)
        retrieved = inner.evidence.passages(inner.workers)
        assert all(g in retrieved for g in inner.example.supporting_ids[hops - searched_hops :])
        assert infos["supporting_recall"] >= searched_hops / hops and infos["answer_em"] == 1.0
    assert set(by_hops) == {1, 2, 3, 4}
    assert all(np.mean(v) == 1.0 for v in by_hops.values())


def test_scripted_workers_fail_when_the_index_lacks_the_chain():
    world = make().unwrapped.world
    gold = {i for q in world.questions for i in q.supporting_ids}
    corpus = [d for d in world.documents if d.id not in gold]
    # same world (so the same topic passages are given), but the index lacks every gold passage
    by_hops = hop_scores(make(corpus=corpus), pw.best_policy, 60)
    assert set(by_hops) == {1, 2, 3, 4}
    assert by_hops[1] and all(r == 1.0 for r in by_hops[1])  # answered from the given topic passage
    assert all(r == 0.0 for h in (2, 3, 4) for r in by_hops[h])  # hop 2+ needs retrieval: the chain breaks
    no_topic = hop_scores(make(corpus=corpus, topic_passage=False), pw.best_policy, 60)
    assert all(r == 0.0 for v in no_topic.values() for r in v)


@pytest.mark.parametrize("answer_by", ["planner", "answerer"])
def test_random_near_zero_no_search_only_1_hop_scripted_one(answer_by):
    env = make(answer_by=answer_by)
    n = len(env.unwrapped.examples)
    rng = np.random.default_rng(0)
    rand = hop_scores(env, lambda e, a: pw.random_policy(e, a, rng), n, seed_by_index=True)
    no_search = {}
    for i in range(n):
        r = play(env, pw.no_search_policy, i)
        no_search.setdefault(env.unwrapped.example.hops, []).append(r)
        assert all(not env.unwrapped.tool_calls[w] for w in env.unwrapped.workers)
    scripted = hop_scores(env, pw.best_policy, n)
    mean = lambda by: float(np.mean([r for v in by.values() for r in v]))  # noqa: E731
    assert set(no_search) == {1, 2, 3, 4}
    # a 1-hop answer is in the given topic passage; hop 2+ answers are in passages only a search finds
    assert np.mean(no_search[1]) == 1.0
    assert all(r == 0.0 for h in (2, 3, 4) for r in no_search[h])
    assert mean(rand) <= 0.05 < mean(no_search) < mean(scripted) == 1.0
    # without the topic passage nothing is answerable without search, 1-hop included
    assert all(r == 0.0 for v in hop_scores(make(topic_passage=False), pw.no_search_policy, n).values() for r in v)


def test_topic_passage_is_the_gold_first_passage_and_goes_with_the_question_only():
    env = make(n_workers=2, answer_by="answerer", passage_chars=120)
    idx = next(i for i, q in enumerate(env.unwrapped.examples) if q.hops == 3)
    play(env, pw.best_policy, idx)
    inner = env.unwrapped
    ex, topic = inner.example, inner.topic
    assert topic.id == ex.supporting_ids[0] and topic.title == ex.supporting_titles[0]
    assert topic == inner.world.passage_of(ex.supporting_titles[0])  # the entity's own passage, not a decoy
    chats = {a: "\n".join(m["content"] for m in inner.observe_chat(a)) for a in inner.possible_agents}
    for a in ("planner", "answerer"):  # exactly the topic passage, cut to passage_chars
        assert [(i, t) for i, t, _ in pw._passages_in(chats[a])] == [(topic.id, topic.title)]
        shown = pw._passages_in(chats[a])[0][2]
        assert len(topic.text) > 120 and len(shown) <= 120 and shown != topic.text
    for w in inner.workers:
        assert pw._TOPIC_HEADER not in chats[w] and ex.question not in chats[w]
    off = make(topic_passage=False)
    off.reset(seed=0, options={"question_index": idx})
    assert off.unwrapped.topic is None and "<passage" not in off.observe("planner")["text"]


def test_topic_passage_needs_findable_gold_or_a_clear_error():
    world = make().unwrapped
    docs = [Document("p1", "Alpha", "Alpha is the capital of Betaland.")]
    with pytest.raises(ValueError, match="topic_passage"):  # no corpus to look the passages up in
        pw.env(examples=world.examples, retriever=world.retriever)
    with pytest.raises(ValueError, match="topic_passage"):  # no supporting evidence at all
        pw.env(examples=[QAExample("x", "Capital of Betaland?", ("Alpha",))], corpus=docs, cache_dir=False)
    ex = QAExample("y", "Capital of Betaland?", ("Alpha",), supporting_titles=("Alpha",), context=tuple(docs))
    ok = pw.env(examples=[ex], cache_dir=False)  # found in the example's own context
    ok.reset(seed=0)
    assert ok.unwrapped.topic == docs[0]
    plain = pw.env(examples=world.examples, retriever=world.retriever, topic_passage=False)
    plain.reset(seed=0)
    assert plain.unwrapped.topic is None


def test_partial_observability():
    env = make(n_workers=2, answer_by="answerer")
    idx = next(i for i, q in enumerate(env.unwrapped.examples) if q.hops == 4)
    play(env, pw.best_policy, idx)
    inner = env.unwrapped
    chats = {a: "\n".join(m["content"] for m in inner.observe_chat(a)) for a in inner.possible_agents}
    ids = {w: {pid for c in inner.tool_calls[w] for pid in c.passage_ids} for w in inner.workers}
    assert ids["worker_0"] and ids["worker_1"]
    for pid in ids["worker_0"] - ids["worker_1"]:
        assert f'id="{pid}"' in chats["worker_0"] and f'id="{pid}"' not in chats["worker_1"]
    for a in ("planner", "answerer"):  # the topic passage only, never a retrieved one
        assert chats[a].count("<passage") == 1 and f'id="{inner.topic.id}"' in chats[a]
    for w in inner.workers:  # workers see sub-questions, never the full question, the topic passage, the gold
        assert inner.example.question not in chats[w] and pw._TOPIC_HEADER not in chats[w]
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

    env = make(retriever=Broken())
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
    with pytest.raises(ValueError, match="max_turns >= 4"):
        make(max_turns=3, max_hops=4)
    with pytest.raises(ValueError, match="max_turns >= 5"):
        make(max_turns=4, max_hops=4, topic_passage=False)
    tight = make(max_turns=4, max_hops=4)  # hop 1 is given: 3 dispatches and the answer fit
    assert all(play(tight, pw.best_policy, i) == 1.0 for i in range(20))
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
    agents = inner.possible_agents
    v = lambda s: inner.coalition_value(frozenset(s))  # noqa: E731
    seen = set()
    for idx, q in enumerate(inner.examples):
        if q.hops not in (1, 3):
            continue
        assert play(env, pw.best_policy, idx) == 1.0
        assert v(agents) == 1.0 and v([]) == 0.0
        assert v([a for a in agents if a != "planner"]) == 0.0  # the answer's author masked
        phi = shapley_values(v, agents)
        assert sum(phi.values()) == pytest.approx(1.0)  # efficiency: v(all) - v(empty)
        assert phi["worker_2"] == 0.0  # never dispatched: a null player
        assert phi["planner"] >= max(phi.values()) - 1e-9  # the answer's author is a veto player
        if q.hops == 1:  # the answer is in the given topic passage: it needs no worker
            assert phi == pytest.approx({"planner": 1.0, "worker_0": 0.0, "worker_1": 0.0, "worker_2": 0.0})
            seen.add("given")
            continue
        # hop 1 from the topic passage, hop 2 -> worker_0, hop 3 -> worker_1
        _, hop2, hop3 = q.supporting_ids
        got = {w: inner.evidence.by_worker.get(w, {}) for w in inner.workers}
        assert hop2 in got["worker_0"] and hop3 in got["worker_1"]
        if hop2 not in got["worker_1"] and hop3 not in got["worker_0"]:
            # each worker alone found its link of the chain: v = 1 only with all three
            assert {a: phi[a] for a in ("planner", "worker_0", "worker_1")} == pytest.approx(
                {"planner": 1 / 3, "worker_0": 1 / 3, "worker_1": 1 / 3}
            )
            seen.add("chain")
        elif hop2 in got["worker_1"]:  # worker_1 also surfaced hop 2's passage: worker_0 is redundant
            assert phi["worker_0"] == 0.0 and phi["worker_1"] == pytest.approx(0.5)
    assert seen == {"given", "chain"}
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
    # "Alpha" is in the topic passage the planner was given (title and text): it needs no worker
    assert inner.topic == docs[0] and inner.coalition_value(frozenset({"planner"})) == 1.0
    env = pw.env(examples=ex, corpus=docs, cache_dir=tmp_path, n_workers=1, topic_passage=False)
    inner = drive(env, ['<dispatch worker="0">capital of Betaland</dispatch>', "<search>capital Betaland</search>",
                        "<report>Alpha</report>", "<answer>Alpha</answer>"])  # fmt: skip
    assert inner.record.total_reward == 1.0
    assert inner.coalition_value(frozenset({"planner"})) == 0.0  # Alpha came only from worker_0's passage


def test_answerer_layout_masked_planner_keeps_only_what_the_given_information_supports():
    env = make(n_workers=1, answer_by="answerer")
    inner = env.unwrapped
    seen = set()
    for idx, q in enumerate(inner.examples[:20]):
        assert play(env, pw.best_policy, idx) == 1.0
        alone = inner.coalition_value(frozenset({"answerer", "worker_0"}))
        # the answerer got the question and the topic passage: that answers 1-hop questions only
        assert alone == (1.0 if q.hops == 1 else 0.0)
        seen.add(q.hops == 1)
    assert seen == {True, False}


def test_env_index_is_cached_on_disk_and_answerer_layout_passes_the_pettingzoo_api(tmp_path):
    from pettingzoo.test import api_test

    first = make(cache_dir=tmp_path)
    assert not first.unwrapped.retriever.loaded_from_cache
    second = make(cache_dir=tmp_path)
    assert second.unwrapped.retriever.loaded_from_cache
    assert second.unwrapped.retriever.index_dir.parent == tmp_path / "bm25"
    api_test(make(answer_by="answerer", n_workers=3, n_entities=30, n_questions=10, max_hops=2), num_cycles=30)


def test_a_planner_turn_without_a_tag_is_answered_with_a_user_message():
    """A turn where nothing happens says so: the planner's next chat never has two assistant messages in a row."""
    env = make(n_workers=1)
    env.reset(seed=0, options={"question_index": 0})
    env.step("I think the answer is somewhere in the passages.")  # no tag at all
    chat = env.unwrapped.observe_chat("planner")
    roles = [m["role"] for m in chat]
    assert roles[-2:] == ["assistant", "user"]
    assert "no <dispatch> or <answer> tag" in chat[-1]["content"]
    assert all(a != b or a != "assistant" for a, b in zip(roles, roles[1:]))
