"""Loaders for HotpotQA, 2WikiMultiHopQA, MuSiQue, Search-R1 and JSONL corpora (small files written here)."""

import json

import pytest

from llm_marl_envs.data.qa_formats import (
    FormatError,
    corpus_from_contexts,
    load_2wiki,
    load_corpus_jsonl,
    load_hotpotqa,
    load_musique,
    load_qa,
    load_search_r1,
)
from llm_marl_envs.retrieval import Document
from llm_marl_envs.search import planner_worker_v0 as pw

HOTPOT = {
    "_id": "5a8b",
    "question": "Which city hosts the institute founded by Ada?",
    "answer": "Korvath",
    "type": "bridge",
    "supporting_facts": [["Ada", 0], ["Draxun Institute", 1], ["Draxun Institute", 0]],
    "context": [
        ["Ada", ["Ada founded the Draxun Institute.", "She was born in 1842."]],
        ["Draxun Institute", ["The Draxun Institute is a school.", "It is in Korvath."]],
        ["Morvane", ["Morvane is a town."]],
    ],
}


def _jsonl(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def test_hotpotqa_json_list_and_jsonl(tmp_path):
    (tmp_path / "h.json").write_text(json.dumps([HOTPOT]))
    for path in (tmp_path / "h.json", _jsonl(tmp_path / "h.jsonl", [HOTPOT])):
        (ex,) = load_hotpotqa(path)
        assert ex.id == "5a8b" and ex.answers == ("Korvath",) and ex.hops == 2
        assert ex.supporting_titles == ("Ada", "Draxun Institute") == ex.supporting_ids
        assert [d.title for d in ex.context] == ["Ada", "Draxun Institute", "Morvane"]
        assert ex.context[1].text == "The Draxun Institute is a school. It is in Korvath."
    assert load_2wiki(tmp_path / "h.json")[0].source == "2wikimultihopqa"


def test_musique_keeps_the_decomposition_and_supporting_paragraphs(tmp_path):
    rec = {
        "id": "2hop__1",
        "question": "Where is the institute founded by Ada?",
        "answer": "Korvath",
        "answer_aliases": ["Korvath City"],
        "answerable": True,
        "paragraphs": [
            {"idx": 0, "title": "Ada", "paragraph_text": "Ada founded the Draxun Institute.", "is_supporting": True},
            {"idx": 1, "title": "Draxun", "paragraph_text": "The Draxun Institute is in Korvath.", "is_supporting": True},
            {"idx": 2, "title": "Other", "paragraph_text": "Nothing.", "is_supporting": False},
        ],
        "question_decomposition": [
            {"id": 1, "question": "Ada >> founded", "answer": "Draxun Institute", "paragraph_support_idx": 0},
            {"id": 2, "question": "#1 >> located in", "answer": "Korvath", "paragraph_support_idx": 1},
        ],
    }
    unanswerable = {**rec, "id": "2hop__2", "answerable": False}
    (ex,) = load_musique(_jsonl(tmp_path / "m.jsonl", [rec, unanswerable]))
    assert ex.answers == ("Korvath", "Korvath City") and ex.hops == 2
    assert ex.supporting_ids == ("2hop__1-0", "2hop__1-1")
    assert [s.question for s in ex.decomposition] == ["Ada >> founded", "#1 >> located in"]
    assert ex.decomposition[1].supporting_ids == ("2hop__1-1",)
    assert len(load_musique(tmp_path / "m.jsonl", answerable_only=False)) == 2


def test_search_r1_jsonl_and_parquet(tmp_path):
    recs = [
        {"id": "train_0", "question": "who wrote x?", "golden_answers": ["Ada", "Ada L."], "data_source": "nq"},
        {"question": "what is y?", "reward_model": {"ground_truth": {"target": ["Y"]}}},
    ]
    a, b = load_search_r1(_jsonl(tmp_path / "s.jsonl", recs))
    assert a.answers == ("Ada", "Ada L.") and a.source == "nq" and b.answers == ("Y",) and b.id == "1"
    with pytest.raises(FormatError):
        load_search_r1(_jsonl(tmp_path / "bad.jsonl", [{"question": "q"}]))
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        (tmp_path / "s.parquet").write_bytes(b"PAR1")
        with pytest.raises(ImportError, match="pyarrow"):
            load_search_r1(tmp_path / "s.parquet")
    else:
        pq.write_table(pa.Table.from_pylist(recs[:1]), tmp_path / "s.parquet")
        assert load_search_r1(tmp_path / "s.parquet")[0].answers == ("Ada", "Ada L.")


def test_corpus_jsonl_both_layouts_and_errors(tmp_path):
    docs = load_corpus_jsonl(_jsonl(tmp_path / "c.jsonl", [
        {"id": "1", "title": "Ada", "text": "Ada founded it."},
        {"id": "2", "contents": '"Draxun Institute"\nIt is in Korvath.'},
        {"id": "3", "contents": "no title line"},
    ]))  # fmt: skip
    assert docs == [
        Document("1", "Ada", "Ada founded it."),
        Document("2", "Draxun Institute", "It is in Korvath."),
        Document("3", "", "no title line"),
    ]
    with pytest.raises(FormatError):
        load_corpus_jsonl(_jsonl(tmp_path / "bad.jsonl", [{"id": "1", "title": "no text"}]))
    (tmp_path / "broken.jsonl").write_text('{"id": 1, "text": "ok"}\n{not json\n')
    with pytest.raises(FormatError, match="broken.jsonl:2"):
        load_corpus_jsonl(tmp_path / "broken.jsonl")
    with pytest.raises(ValueError):
        load_qa("squad", tmp_path / "c.jsonl")


def test_loaded_hotpotqa_runs_in_the_environment(tmp_path):
    (tmp_path / "h.json").write_text(json.dumps([HOTPOT]))
    examples = load_qa("hotpotqa", tmp_path / "h.json")
    assert len(corpus_from_contexts(examples)) == 3
    env = pw.env(examples=examples, n_workers=1, top_k=1, cache_dir=tmp_path)  # corpus = the shipped paragraphs
    env.reset(seed=0)
    script = iter(['<dispatch worker="0">Where is the Draxun Institute?</dispatch>',
                   "<search>Draxun Institute located</search>", "<report>Korvath</report>", "<answer>Korvath</answer>"])  # fmt: skip
    for _agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else next(script))
    inner = env.unwrapped
    assert inner.record.total_reward == 1.0
    assert inner.record.turns[-1].components["supporting_recall"] == 0.5  # found the institute, not Ada's page
