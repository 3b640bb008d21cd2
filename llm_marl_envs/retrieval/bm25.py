"""The default retriever: a BM25 index over a local corpus, built with ``bm25s`` and cached on disk.

The index is built once per corpus: its directory under ``<cache_dir>/bm25/`` is named by
a SHA-256 of every document (id, title, text), the tokenizer version and the BM25
parameters, so the same corpus is never indexed twice and a changed corpus never reuses
a stale index. ``cache_dir=False`` keeps the index in memory only. Writes go to a
temporary directory renamed into place, so concurrent builders never see half an index.

Documents are indexed as ``title + " " + text``. Scoring reads the ``bm25s`` eager score
matrix (``data``/``indices``/``indptr``, Lucene BM25 by default) and sums the query
terms' columns with one ``np.bincount``; passages with score 0 (no query term) are never
returned.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from llm_marl_envs.retrieval.cache import corpus_fingerprint, default_cache_dir
from llm_marl_envs.retrieval.tokenize import TOKENIZER_VERSION, tokenize
from llm_marl_envs.retrieval.types import Document, Passage, RetrievalError

log = logging.getLogger(__name__)

_META = "llm_marl_envs_meta.json"


class BM25Retriever:
    """BM25 over ``docs`` (see the module docstring). Implements :class:`~llm_marl_envs.retrieval.Retriever`.

    Args:
        docs: the corpus; ids must be unique.
        cache_dir: where indexes are cached; ``None`` -> :func:`default_cache_dir`; ``False``
            -> no disk cache.
        k1, b, method: BM25 parameters (``method`` as in ``bm25s``: "lucene", "robertson", "atire").
    """

    def __init__(
        self,
        docs: Sequence[Document],
        *,
        cache_dir: str | os.PathLike | None | bool = None,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
    ) -> None:
        import bm25s

        self.docs: list[Document] = list(docs)
        if not self.docs:
            raise ValueError("BM25Retriever needs a non-empty corpus")
        ids = [d.id for d in self.docs]
        if len(set(ids)) != len(ids):
            raise ValueError("document ids must be unique")
        self.params = {"k1": k1, "b": b, "method": method}
        self.fingerprint = corpus_fingerprint(self.docs, f"tok={TOKENIZER_VERSION}", json.dumps(self.params))
        self.loaded_from_cache = False
        self.index_dir: Path | None = None
        if cache_dir is False:
            self._bm25 = self._build(bm25s)
        else:
            root = Path(default_cache_dir() if cache_dir in (None, True) else cache_dir) / "bm25"
            self.index_dir = root / self.fingerprint
            self._bm25 = self._load_or_build(bm25s, self.index_dir)
        self._vocab: dict[str, int] = {t: i for t, i in self._bm25.vocab_dict.items() if t != ""}
        s = self._bm25.scores
        self._data, self._indices, self._indptr = s["data"], s["indices"], s["indptr"]
        self._n = int(s["num_docs"])
        if self._n != len(self.docs):
            raise RetrievalError(f"index holds {self._n} documents, corpus has {len(self.docs)}")

    # ------------------------------------------------------------------ Retriever API
    def search(self, query: str, k: int) -> list[Passage]:
        """Top-``k`` matching passages for ``query`` (see the Retriever contract)."""
        if k < 1:
            return []
        ids = [self._vocab[t] for t in tokenize(query) if t in self._vocab]
        if not ids:
            return []
        scores = self.scores_from_term_ids(ids)
        k = min(k, self._n)
        top = np.argpartition(-scores, k - 1)[:k] if k < self._n else np.arange(self._n)
        top = top[scores[top] > 0]
        order = sorted(top.tolist(), key=lambda i: (-float(scores[i]), i))
        return [self._passage(i, float(scores[i])) for i in order]

    def batch_search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        return [self.search(q, k) for q in queries]

    # ------------------------------------------------------------------ internals
    def scores_from_term_ids(self, term_ids: Sequence[int]) -> np.ndarray:
        """BM25 score of every document for a query given as vocabulary ids."""
        q = np.asarray(term_ids, dtype=np.int64)
        starts, ends = self._indptr[q], self._indptr[q + 1]
        idx = np.concatenate([self._indices[s:e] for s, e in zip(starts, ends)])
        val = np.concatenate([self._data[s:e] for s, e in zip(starts, ends)])
        scores = np.bincount(idx, weights=val, minlength=self._n)
        nonocc = getattr(self._bm25, "nonoccurrence_array", None)
        if nonocc is not None:
            scores = scores + float(nonocc[q].sum())
        return scores

    def _passage(self, i: int, score: float) -> Passage:
        d = self.docs[i]
        return Passage(d.id, d.title, d.text, score)

    def _build(self, bm25s):
        vocab: dict[str, int] = {}
        corpus_ids: list[list[int]] = []
        for d in self.docs:
            toks = tokenize(f"{d.title} {d.text}")
            corpus_ids.append([vocab.setdefault(t, len(vocab)) for t in toks])
        model = bm25s.BM25(**self.params)
        model.index((corpus_ids, vocab), show_progress=False)
        return model

    def _load_or_build(self, bm25s, path: Path):
        meta_file = path / _META
        if meta_file.exists():
            try:
                meta = json.loads(meta_file.read_text())
                if meta.get("n_docs") == len(self.docs) and meta.get("fingerprint") == self.fingerprint:
                    model = bm25s.BM25.load(str(path), load_vocab=True, show_progress=False)
                    self.loaded_from_cache = True
                    return model
            except Exception as exc:  # a corrupt cache entry is rebuilt, not trusted
                log.warning("ignoring unreadable BM25 cache at %s: %s", path, exc)
        model = self._build(bm25s)
        tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}-{id(self)}")
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            model.save(str(tmp), show_progress=False)
            (tmp / _META).write_text(
                json.dumps({"n_docs": len(self.docs), "fingerprint": self.fingerprint, **self.params})
            )
            if path.exists():  # a concurrent builder won; keep its copy
                shutil.rmtree(path, ignore_errors=True)
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("could not cache the BM25 index at %s (%s); using it from memory", path, exc)
            shutil.rmtree(tmp, ignore_errors=True)
        return model
