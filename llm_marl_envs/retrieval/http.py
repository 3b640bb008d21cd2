"""A client for a remote retrieval server speaking the Search-R1 / Dr. MAS protocol.

The server (e.g. Search-R1's ``retrieval_server.py`` in front of e5 + FAISS) answers
``POST <url>`` with JSON ``{"queries": [...], "topk": k, "return_scores": true}`` by
``{"result": [[{"document": {"id": ..., "contents": "\\"Title\\"\\ntext"}, "score": s}, ...], ...]}``
(``document`` may also carry ``title``/``text``). Any transport or protocol failure raises
:class:`~llm_marl_envs.retrieval.RetrievalError`.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from llm_marl_envs.retrieval.types import Passage, RetrievalError


def split_contents(contents: str) -> tuple[str, str]:
    """Split a Search-R1 ``contents`` string (``"Title"\\ntext``) into title and text."""
    head, sep, rest = contents.partition("\n")
    if sep and head.startswith('"') and head.endswith('"') and len(head) >= 2:
        return head[1:-1], rest
    return "", contents


class HTTPRetriever:
    """Retriever backed by a retrieval server at ``url`` (see the module docstring)."""

    def __init__(self, url: str, *, timeout_s: float = 30.0) -> None:
        self.url = url
        self.timeout_s = timeout_s

    def search(self, query: str, k: int) -> list[Passage]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        body = json.dumps({"queries": list(queries), "topk": int(k), "return_scores": True}).encode()
        req = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                payload = json.loads(resp.read().decode("utf-8"))
            results = payload["result"]
            if len(results) != len(queries):
                raise RetrievalError(f"server answered {len(results)} result lists for {len(queries)} queries")
            return [[self._passage(hit) for hit in hits[:k]] for hits in results]
        except RetrievalError:
            raise
        except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise RetrievalError(f"retrieval server {self.url} failed: {exc}") from exc

    @staticmethod
    def _passage(hit: Any) -> Passage:
        doc = hit["document"] if isinstance(hit, dict) and "document" in hit else hit
        if "contents" in doc:
            title, text = split_contents(str(doc["contents"]))
        else:
            title, text = str(doc.get("title", "")), str(doc.get("text", ""))
        return Passage(str(doc.get("id", "")), title, text, float(hit.get("score", 0.0)))
