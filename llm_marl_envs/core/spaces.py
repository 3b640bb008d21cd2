"""Gymnasium spaces for free-text actions and observations.

Gymnasium's ``Text`` space only accepts characters from a fixed charset (alphanumerics
by default), so ordinary LLM output -- punctuation, newlines, unicode -- is rejected by
``contains``. ``FreeText`` accepts any Python ``str`` up to ``max_length`` characters and
samples from a broad charset (ASCII, whitespace, accented letters, CJK, emoji) so that
random-policy tests exercise the parsing code paths that real model output will hit.
"""

from __future__ import annotations

from typing import Any

from gymnasium import spaces

# A broad sample charset: printable ASCII, whitespace, code-ish symbols, accents, CJK, emoji.
_SAMPLE_CHARSET = (
    "".join(chr(c) for c in range(32, 127))
    + "\n\t\n\n"
    + "éüßñçøåλπΣЖя"
    + "你好世界代码"
    + "😀🚀✓→"
)


class FreeText(spaces.Text):
    """Any string of at most ``max_length`` characters (no charset restriction).

    It subclasses :class:`gymnasium.spaces.Text` so that tools that special-case text
    spaces keep working; ``contains`` and ``sample`` differ, and Gymnasium's vector and
    flattening utilities get their own registrations (:mod:`.text_batching`).
    """

    def __init__(self, max_length: int = 16_384, *, min_length: int = 0, seed: int | None = None):
        super().__init__(
            max_length=max_length, min_length=min_length, charset=_SAMPLE_CHARSET, seed=seed
        )

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A random string; short on average (up to 64 chars) so random play stays fast."""
        if mask is not None or probability is not None:
            return super().sample(mask=mask, probability=probability)
        upper = min(self.max_length, 64)
        length = int(self.np_random.integers(self.min_length, max(upper, self.min_length) + 1))
        idx = self.np_random.integers(0, len(_SAMPLE_CHARSET), size=length)
        return "".join(_SAMPLE_CHARSET[i] for i in idx)

    @property
    def is_np_flattenable(self) -> bool:
        """Free text has no fixed-size numeric form (:mod:`.text_batching` refuses ``flatten``)."""
        return False

    def __repr__(self) -> str:
        return f"FreeText(max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return (
            isinstance(other, FreeText)
            and self.max_length == other.max_length
            and self.min_length == other.min_length
        )

    __hash__ = None  # type: ignore[assignment]


def text_observation_space(max_length: int) -> spaces.Dict:
    """The observation space of every text task: ``{"text": FreeText, "acting": Discrete(2)}``.

    ``"text"`` is the agent's chat; ``"acting"`` is 1 when the agent's next step is a real
    action and 0 in a no-op slot of the cycle schedule (:mod:`.cycles`), so that models
    which see only observations (RLlib's, TorchRL's) can tell the two apart. A bare ``Text``
    observation fails ``pettingzoo.test.api_test`` (it checks a numpy dtype on non-dict
    observations); a ``Dict`` whose key is not ``"observation"`` is checked with ``contains``.
    """
    return spaces.Dict({"text": FreeText(max_length), "acting": spaces.Discrete(2)})
