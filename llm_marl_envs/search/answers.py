"""SQuAD-style answer normalization and scoring (exact match and token F1 against several golds)."""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = frozenset(string.punctuation)


def normalize_answer(s: str) -> str:
    """Lowercase, drop punctuation and the articles a/an/the, collapse whitespace (SQuAD v1.1)."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 if the normalized prediction equals any normalized gold answer, else 0.0."""
    p = normalize_answer(prediction)
    return float(any(p == normalize_answer(g) for g in golds))


def _f1(prediction: str, gold: str) -> float:
    p, g = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not p or not g:
        return float(p == g)
    common = collections.Counter(p) & collections.Counter(g)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, golds: Sequence[str]) -> float:
    """Best token-level F1 of the prediction against any gold answer."""
    return max((_f1(prediction, g) for g in golds), default=0.0)


def score_answer(prediction: str, golds: Sequence[str], metric: str = "em") -> float:
    """``exact_match`` or ``f1_score`` by name ("em" / "f1")."""
    if metric == "em":
        return exact_match(prediction, golds)
    if metric == "f1":
        return f1_score(prediction, golds)
    raise ValueError(f"metric must be 'em' or 'f1', got {metric!r}")


def contains_answer(text: str, answer: str) -> bool:
    """Whether the normalized ``answer`` occurs as a whole-token run in the normalized ``text``."""
    a = normalize_answer(answer).split()
    if not a:
        return False
    t = normalize_answer(text).split()
    return any(t[i : i + len(a)] == a for i in range(len(t) - len(a) + 1))
