"""Text helpers of the base class: chats as plain text, cutting long text, reward components."""

from __future__ import annotations

from collections.abc import Sequence

from llm_marl_envs.core.records import ChatMessage

_ELLIPSIS = "\n[... {n} characters omitted ...]\n"


def fit_text(text: str, limit: int) -> str:
    """``text`` cut in the middle to at most about ``limit`` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    keep = max(limit - 64, 0)
    head, tail = keep // 2, keep - keep // 2
    return text[:head] + _ELLIPSIS.format(n=len(text) - head - tail) + text[len(text) - tail :]


def render_chat(messages: Sequence[ChatMessage]) -> str:
    """Plain-text form of a chat: ``[role]`` headers followed by the content."""
    return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)


def format_components(components: dict[str, float]) -> str:
    """``(name=+value, ...)`` for the transcript."""
    return "(" + ", ".join(f"{k}={v:+.3g}" for k, v in components.items()) + ")"
