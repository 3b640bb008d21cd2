"""The BM25 retriever (a real bm25s index), its on-disk cache, and the HTTP retriever client."""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from llm_marl_envs.retrieval import (
    BM25Retriever,
    Document,
    HTTPRetriever,
    RetrievalError,
    Retriever,
    tokenize,
)

DOCS = [
    Document("a", "Korvath", "Korvath is a city on the banks of the Olvan River. It was founded in 1204."),
    Document("b", "Velmora Tashkin", "Velmora Tashkin is a cartographer who was born in Korvath in 1842."),
    Document("c", "Draxun Institute", "The Draxun Institute is a printing organisation headquartered in Morvane."),
    Document("d", "Tashkin Hall", "Tashkin Hall is a lecture hall in Morvane, named in honour of Velmora Tashkin."),
    Document("e", "Morvane", "Morvane is a city on the banks of the Prask River."),
]


def test_ranks_the_matching_passage_first_and_obeys_the_contract(tmp_path):
    r = BM25Retriever(DOCS, cache_dir=tmp_path)
    assert isinstance(r, Retriever)
    hits = r.search("Where was Velmora Tashkin born?", 3)
    assert [h.id for h in hits][:2] == ["b", "d"]
    assert all(x.score >= y.score for x, y in zip(hits, hits[1:]))
    assert len(r.search("city river", 2)) == 2
    assert r.search("zzzz unknownword", 5) == []  # no matching term -> nothing, never padding
    assert r.search("", 5) == [] and r.search("the of a", 5) == []
    assert len(r.search("city", 100)) == 2  # only matching passages, even with a large k
    assert r.batch_search(["Olvan River", "Draxun"], 2) == [r.search("Olvan River", 2), r.search("Draxun", 2)]
    assert r.search("Draxun", 1)[0].title == "Draxun Institute"


def test_index_is_built_once_and_cached_by_corpus_content(tmp_path):
    first = BM25Retriever(DOCS, cache_dir=tmp_path)
    assert not first.loaded_from_cache and first.index_dir.is_dir()
    again = BM25Retriever(DOCS, cache_dir=tmp_path)
    assert again.loaded_from_cache and again.index_dir == first.index_dir
    assert again.search("Velmora born", 3) == first.search("Velmora born", 3)
    changed = BM25Retriever([*DOCS[:-1], Document("e", "Morvane", "Morvane is a town.")], cache_dir=tmp_path)
    assert not changed.loaded_from_cache and changed.index_dir != first.index_dir
    assert len(list((tmp_path / "bm25").iterdir())) == 2


def test_corrupt_cache_is_rebuilt_and_memory_only_mode_writes_nothing(tmp_path, monkeypatch):
    first = BM25Retriever(DOCS, cache_dir=tmp_path)
    for f in first.index_dir.glob("*.npy"):
        f.write_bytes(b"garbage")
    rebuilt = BM25Retriever(DOCS, cache_dir=tmp_path)
    assert not rebuilt.loaded_from_cache
    assert rebuilt.search("Draxun", 1)[0].id == "c"
    mem_dir = tmp_path / "mem"
    monkeypatch.setenv("LLM_MARL_ENVS_CACHE", str(mem_dir))
    mem = BM25Retriever(DOCS, cache_dir=False)
    assert mem.index_dir is None and not mem_dir.exists()
    default = BM25Retriever(DOCS)  # None -> the default cache dir (here redirected by the env var)
    assert default.index_dir.parent == mem_dir / "bm25"


def test_bad_corpora_are_rejected():
    with pytest.raises(ValueError):
        BM25Retriever([], cache_dir=False)
    with pytest.raises(ValueError):
        BM25Retriever([DOCS[0], DOCS[0]], cache_dir=False)


def test_tokenize_drops_stopwords_and_question_words():
    assert tokenize("Who was the mentor of Velmora-Tashkin?") == ["mentor", "velmora", "tashkin"]


def _serve(retriever):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            result = [
                [{"document": {"id": p.id, "contents": f'"{p.title}"\n{p.text}'}, "score": p.score} for p in hits]
                for hits in retriever.batch_search(body["queries"], body["topk"])
            ]
            data = json.dumps({"result": result}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_http_retriever_speaks_the_search_r1_protocol():
    local = BM25Retriever(DOCS, cache_dir=False)
    server = _serve(local)
    try:
        remote = HTTPRetriever(f"http://127.0.0.1:{server.server_port}/retrieve", timeout_s=10)
        assert isinstance(remote, Retriever)
        assert remote.search("Velmora Tashkin born", 2) == local.search("Velmora Tashkin born", 2)
        assert remote.batch_search(["Draxun", "Olvan"], 1) == local.batch_search(["Draxun", "Olvan"], 1)
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(RetrievalError):
        HTTPRetriever(f"http://127.0.0.1:{server.server_port}/retrieve", timeout_s=2).search("x", 1)
