"""The text -> terms function used for indexing and querying (lowercase words, English stopwords out)."""

from __future__ import annotations

import re

from bm25s.stopwords import STOPWORDS_EN

#: bump when :func:`tokenize` changes, so cached indexes built with the old one are not reused
TOKENIZER_VERSION = "1"

_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(STOPWORDS_EN) | frozenset({"who", "what", "which", "when", "where", "whom", "how"})


def tokenize(text: str) -> list[str]:
    """Lowercased word tokens of ``text`` without English stopwords and single letters."""
    return [w for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in _STOP]
