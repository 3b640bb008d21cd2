"""Answer normalization and scoring (exact match and token F1 against several golds).

The default normalization is SQuAD v1.1's (lowercase, drop ASCII punctuation and the
articles a/an/the, collapse whitespace). :class:`AnswerNormalization` makes each step an
option and adds accent folding (``"Röntgen"`` == ``"Rontgen"``: Unicode NFKD, combining
marks dropped), which multilingual QA expects; :data:`NORMALIZATIONS` names the presets
(``"squad"``, ``"squad_fold_accents"``). Every scoring function takes ``normalization=``
(a preset name or an :class:`AnswerNormalization`; None = SQuAD's).
"""

from __future__ import annotations

import collections
import re
import string
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "NORMALIZATIONS",
    "AnswerNormalization",
    "contains_answer",
    "exact_match",
    "f1_score",
    "get_normalization",
    "normalize_answer",
    "score_answer",
]

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = frozenset(string.punctuation)


@dataclass(frozen=True)
class AnswerNormalization:
    """Which normalization steps to apply before comparing answers (defaults: SQuAD v1.1)."""

    lowercase: bool = True
    remove_punctuation: bool = True
    remove_articles: bool = True
    fold_accents: bool = False

    def __call__(self, s: str) -> str:
        if self.lowercase:
            s = s.lower()
        if self.fold_accents:
            s = "".join(ch for ch in unicodedata.normalize("NFKD", s) if not unicodedata.combining(ch))
        if self.remove_punctuation:
            s = "".join(ch for ch in s if ch not in _PUNCT)
        if self.remove_articles:
            s = _ARTICLES.sub(" ", s)
        return " ".join(s.split())


SQUAD = AnswerNormalization()
NORMALIZATIONS: dict[str, AnswerNormalization] = {
    "squad": SQUAD,
    "squad_fold_accents": AnswerNormalization(fold_accents=True),
}


def get_normalization(normalization: str | AnswerNormalization | None) -> AnswerNormalization:
    """A preset by name, an :class:`AnswerNormalization` as is, or SQuAD's for None."""
    if normalization is None:
        return SQUAD
    if isinstance(normalization, AnswerNormalization):
        return normalization
    if isinstance(normalization, str) and normalization in NORMALIZATIONS:
        return NORMALIZATIONS[normalization]
    raise ValueError(f"normalization must be one of {sorted(NORMALIZATIONS)} or an AnswerNormalization, "
                     f"got {normalization!r}")  # fmt: skip


Norm = str | AnswerNormalization | None


def normalize_answer(s: str, normalization: Norm = None) -> str:
    """Lowercase, drop punctuation and the articles a/an/the, collapse whitespace (SQuAD v1.1),
    or what ``normalization`` says."""
    return get_normalization(normalization)(s)


def exact_match(prediction: str, golds: Sequence[str], normalization: Norm = None) -> float:
    """1.0 if the normalized prediction equals any normalized gold answer, else 0.0."""
    norm = get_normalization(normalization)
    p = norm(prediction)
    return float(any(p == norm(g) for g in golds))


def _f1(prediction: str, gold: str, norm: AnswerNormalization) -> float:
    p, g = norm(prediction).split(), norm(gold).split()
    if not p or not g:
        return float(p == g)
    common = collections.Counter(p) & collections.Counter(g)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, golds: Sequence[str], normalization: Norm = None) -> float:
    """Best token-level F1 of the prediction against any gold answer."""
    norm = get_normalization(normalization)
    return max((_f1(prediction, g, norm) for g in golds), default=0.0)


def score_answer(prediction: str, golds: Sequence[str], metric: str = "em", normalization: Norm = None) -> float:
    """``exact_match`` or ``f1_score`` by name ("em" / "f1")."""
    if metric == "em":
        return exact_match(prediction, golds, normalization)
    if metric == "f1":
        return f1_score(prediction, golds, normalization)
    raise ValueError(f"metric must be 'em' or 'f1', got {metric!r}")


def contains_answer(text: str, answer: str, normalization: Norm = None) -> bool:
    """Whether the normalized ``answer`` occurs as a whole-token run in the normalized ``text``."""
    norm = get_normalization(normalization)
    a = norm(answer).split()
    if not a:
        return False
    t = norm(text).split()
    return any(t[i : i + len(a)] == a for i in range(len(t) - len(a) + 1))
