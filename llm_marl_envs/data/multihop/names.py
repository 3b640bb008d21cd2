"""Invented names for the synthetic world: capitalized words built from syllables.

Every word handed out by one :class:`NameMaker` is new (never handed out before), so an
entity's name tokens identify it uniquely in the corpus and never occur in another
entity's name -- which is what makes the world contamination-free and BM25-findable.
"""

from __future__ import annotations

import random

ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "kr", "th", "tr", "sh")
VOWELS = ("a", "e", "i", "o", "u", "a", "e", "ei", "ou")
CODAS = ("", "", "", "", "n", "r", "l", "s", "th", "m")


class NameMaker:
    """Hands out unique invented words: 2-3 syllables, longer ones once the short ones run out."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()
        self.base = 2  # syllables of a short word; raised for good when short words get scarce

    def syllable(self) -> str:
        r = self.rng
        return r.choice(ONSETS) + r.choice(VOWELS) + r.choice(CODAS)

    def word(self) -> str:
        for attempt in range(1000):
            if attempt == 20:
                self.base += 1
            n = self.base + (attempt // 50) + (self.rng.random() < 0.2)
            w = "".join(self.syllable() for _ in range(n)).capitalize()
            if w not in self.used and len(w) <= 10 + 2 * (self.base - 2 + attempt // 50):
                self.used.add(w)
                return w
        raise RuntimeError("could not invent a new name")  # pragma: no cover - astronomically unlikely
