"""Where BM25 indexes are cached, and the content hash that names a cached index."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from llm_marl_envs.retrieval.types import Document


def default_cache_dir() -> Path:
    """``$LLM_MARL_ENVS_CACHE`` or ``$XDG_CACHE_HOME/llm_marl_envs`` (``~/.cache/llm_marl_envs``)."""
    env = os.environ.get("LLM_MARL_ENVS_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llm_marl_envs"


def corpus_fingerprint(docs: Iterable[Document], *extra: str) -> str:
    """SHA-256 over every document's id, title and text (in order) plus ``extra`` settings."""
    h = hashlib.sha256()
    for part in extra:
        h.update(part.encode("utf-8", "replace") + b"\x1e")
    for d in docs:
        h.update(d.id.encode("utf-8", "replace") + b"\x1f")
        h.update(d.title.encode("utf-8", "replace") + b"\x1f")
        h.update(d.text.encode("utf-8", "replace") + b"\x1e")
    return h.hexdigest()
