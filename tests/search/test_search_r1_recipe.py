"""Search-R1 data + a wiki-18-format corpus straight from files, and answer normalization options."""

from __future__ import annotations

import json

import pytest

import llm_marl_envs
from llm_marl_envs.data.qa_formats import detect_qa_format, load_qa
from llm_marl_envs.search.answers import AnswerNormalization, exact_match, f1_score, normalize_answer

# Search-R1's nq_hotpotqa_train layout (as its parquet rows, written as JSONL)
SEARCH_R1 = [
    {"id": "train_0", "question": "who discovered x-rays", "golden_answers": ["Wilhelm Röntgen", "Röntgen"],
     "data_source": "nq", "ability": "fact-reasoning",
     "reward_model": {"ground_truth": {"target": ["Wilhelm Röntgen", "Röntgen"]}, "style": "rule"}},
    {"id": "train_1", "question": "what city is the louvre in", "golden_answers": ["Paris"], "data_source": "nq"},
]  # fmt: skip
# wiki-18 (Search-R1 / FlashRAG corpus): {id, contents} with contents = '"Title"\ntext'
WIKI = [
    {"id": "1", "contents": '"X-ray"\nX-rays were discovered in 1895 by Wilhelm Röntgen in Würzburg.'},
    {"id": "2", "contents": '"Louvre"\nThe Louvre is an art museum in Paris, France.'},
    {"id": "3", "contents": '"Würzburg"\nWürzburg is a city in Bavaria.'},
]


def _jsonl(path, records):
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n", encoding="utf-8")
    return path


def _play(env, answer):
    env.reset(seed=0, options={"question_id": "train_0"})
    script = iter(['<dispatch worker="0">Who discovered X-rays?</dispatch>', "<search>x-rays discovered</search>",
                   "<report>Wilhelm Röntgen (1895)</report>", f"<answer>{answer}</answer>"])  # fmt: skip
    for _agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else next(script))
    return env.unwrapped.record.total_reward


def test_make_takes_search_r1_records_and_a_wiki18_corpus_from_files(tmp_path):
    data, corpus = _jsonl(tmp_path / "nq.jsonl", SEARCH_R1), _jsonl(tmp_path / "wiki-18.jsonl", WIKI)
    kwargs = dict(dataset=str(data), corpus=str(corpus), n_workers=1, top_k=1, cache_dir=tmp_path)
    env = llm_marl_envs.make("search/planner_worker_v0", topic_passage=False, **kwargs)
    raw = env.unwrapped
    assert [e.id for e in raw.examples] == ["train_0", "train_1"] and raw.examples[0].answers == tuple(
        SEARCH_R1[0]["golden_answers"]
    )
    assert _play(env, "Wilhelm Röntgen") == 1.0
    passages = [m["content"] for m in raw.observe_chat("worker_0") if m["role"] == "user"]
    assert any("discovered in 1895" in p for p in passages)  # the BM25 index is the wiki-18 file
    assert _play(env, "Rontgen") == 0.0  # SQuAD normalization (default) keeps accents
    folded = llm_marl_envs.make("search/planner_worker_v0", topic_passage=False,
                                answer_normalization="squad_fold_accents", **kwargs)  # fmt: skip
    assert _play(folded, "Rontgen") == 1.0
    with pytest.raises(ValueError, match="topic_passage=False"):  # no supporting passage to hand out
        llm_marl_envs.make("search/planner_worker_v0", **kwargs)
    with pytest.raises(ValueError, match="normalization must be one of"):
        llm_marl_envs.make(
            "search/planner_worker_v0", topic_passage=False, answer_normalization="nfkc", **kwargs
        )
    with pytest.raises(ValueError, match="not both"):
        llm_marl_envs.make("search/planner_worker_v0", topic_passage=False, examples=raw.examples, **kwargs)


def test_accent_folding_and_squad_default():
    assert normalize_answer("The Röntgen!") == "röntgen"
    fold = AnswerNormalization(fold_accents=True)
    assert (
        normalize_answer("The Röntgen!", fold)
        == "rontgen"
        == normalize_answer("Rontgen", "squad_fold_accents")
    )
    assert normalize_answer("Ångström São Paulo", fold) == "angstrom sao paulo"
    assert exact_match("rontgen", ["Röntgen"]) == 0.0 and exact_match("rontgen", ["Röntgen"], fold) == 1.0
    assert f1_score("Wilhelm Rontgen", ["Röntgen"], fold) == pytest.approx(2 / 3)
    keep_articles = AnswerNormalization(remove_articles=False)
    assert normalize_answer("The Beatles", keep_articles) == "the beatles"


def test_open_qa_layouts_load_and_are_detected(tmp_path):
    popqa = _jsonl(tmp_path / "popqa.jsonl", [{"id": 7, "subj": "George Rankin", "prop": "occupation",
                                               "question": "What is George Rankin's occupation?",
                                               "possible_answers": '["politician", "political leader"]'}])  # fmt: skip
    tqa = _jsonl(tmp_path / "tqa.jsonl", [{"QuestionId": "tc_1", "Question": "Which planet is red?",
                                           "Answer": {"Value": "Mars", "Aliases": ["Mars", "Red Planet"]}}])  # fmt: skip
    bamboogle = _jsonl(tmp_path / "b.jsonl", [{"Question": "Who founded the company that makes the iPhone?",
                                               "Answer": "Steve Jobs"}])  # fmt: skip
    for path, answers in ((popqa, ("politician", "political leader")), (tqa, ("Mars", "Red Planet")),
                          (bamboogle, ("Steve Jobs",))):  # fmt: skip
        assert detect_qa_format(path) == "search_r1"
        (ex,) = load_qa("auto", path)
        assert ex.answers == answers and ex.question.endswith("?")
    with pytest.raises(ValueError, match="cannot tell the QA format"):
        load_qa("auto", _jsonl(tmp_path / "x.jsonl", [{"foo": 1}]))
