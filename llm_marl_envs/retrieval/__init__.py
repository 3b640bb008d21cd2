"""Retrieval for the search tasks: a retriever interface and a real BM25 index (via ``bm25s``).

``Retriever`` is the contract every backend meets (``search`` and ``batch_search``);
:class:`BM25Retriever` is the default, built once per corpus and cached on disk keyed by
the corpus content. See ``docs/retrieval.md`` for plugging in a dense or remote index.
"""

from llm_marl_envs.retrieval.bm25 import BM25Retriever
from llm_marl_envs.retrieval.cache import corpus_fingerprint, default_cache_dir
from llm_marl_envs.retrieval.http import HTTPRetriever
from llm_marl_envs.retrieval.tokenize import tokenize
from llm_marl_envs.retrieval.types import Document, Passage, RetrievalError, Retriever

__all__ = [
    "BM25Retriever",
    "Document",
    "HTTPRetriever",
    "Passage",
    "RetrievalError",
    "Retriever",
    "corpus_fingerprint",
    "default_cache_dir",
    "tokenize",
]
