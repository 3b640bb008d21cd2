"""Turning whatever a policy passed to ``step`` into clean text, with a record of what was wrong.

An LLM's output can be anything: empty, megabytes long, full of null bytes, lone UTF-16
surrogates that cannot be encoded, or not a string at all (a buggy policy wrapper). The
environment never raises on such input: :func:`sanitize_action` always returns usable
text plus the list of problems, which the task turns into its format penalty and an
explanation in ``infos``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Action:
    """A sanitized action: ``text`` is safe to parse, encode and show; ``issues`` explains fixes."""

    text: str
    issues: tuple[str, ...] = ()

    @property
    def malformed(self) -> bool:
        return bool(self.issues)


def sanitize_action(raw: Any, max_chars: int) -> Action:
    """Return clean text for any ``raw`` value; never raises."""
    issues: list[str] = []
    if isinstance(raw, str):
        text = raw
    elif isinstance(raw, (bytes, bytearray)):
        text = bytes(raw).decode("utf-8", errors="replace")
        issues.append("action was bytes; decoded as UTF-8 with replacement")
    elif raw is None:
        text = ""
        issues.append("action was None; treated as empty text")
    else:
        try:
            text = str(raw)
        except Exception:  # a hostile __str__ must not crash the environment
            text = ""
        issues.append(f"action was {type(raw).__name__}, not str; converted to text")
    if "\x00" in text:
        text = text.replace("\x00", "")
        issues.append("null bytes removed")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", errors="replace").decode("utf-8")
        issues.append("invalid unicode (lone surrogates) replaced with '?'")
    if len(text) > max_chars:
        issues.append(f"action of {len(text)} chars truncated to {max_chars}")
        text = text[:max_chars]
    return Action(text=text, issues=tuple(issues))
