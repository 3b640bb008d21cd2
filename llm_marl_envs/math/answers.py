"""Reading answers and verdicts out of model text, and checking answers with ``math-verify``.

- :func:`last_boxed`: the content of the last ``\\boxed{...}`` (nested braces handled), or None.
- :func:`parse_verdict`: ``<verify>approve|reject</verify>`` and the reason written around it.
- :func:`answers_match`: whether a predicted answer equals the gold one *mathematically*
  (``0.5``, ``1/2``, ``\\frac{1}{2}`` and ``\\dfrac12`` are all equal), using Hugging Face's
  ``math-verify`` (the ``math`` extra). It never raises on junk: anything that does not parse
  is simply not equal. ``math-verify`` bounds parsing time with ``SIGALRM``, which only works
  in the main thread; elsewhere (rollout threads) it runs without its time limit, which is
  safe here because the inputs are short (answers are cut to :data:`MAX_ANSWER_CHARS`).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

__all__ = ["MAX_ANSWER_CHARS", "Verdict", "answers_match", "last_boxed", "parse_verdict"]

MAX_ANSWER_CHARS = 200
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_VERIFY = re.compile(r"<verify>\s*(.*?)\s*</verify>", re.DOTALL | re.IGNORECASE)


def last_boxed(text: str) -> str | None:
    """Content of the last complete ``\\boxed{...}`` in ``text`` (None when there is none)."""
    found = None
    for match in _BOXED.finditer(text):
        depth, start = 1, match.end()
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    found = text[start:i]
                    break
    return None if found is None else found.strip()


@dataclass(frozen=True)
class Verdict:
    """A verifier's answer: ``decision`` is "approve", "reject" or None (unreadable)."""

    decision: str | None
    reason: str
    issue: str | None = None  #: the format problem, when there is one


def parse_verdict(text: str) -> Verdict:
    """Parse ``<verify>approve|reject</verify>``; the reason is the text outside the tag.

    Several tags, or a tag holding something else, make the verdict unreadable (decision
    None, with ``issue`` saying why). A rejection without a reason is still a rejection
    but reports the issue ("reject without a reason").
    """
    tags = _VERIFY.findall(text)
    reason = _VERIFY.sub(" ", text).strip()
    if not tags:
        return Verdict(None, reason, "no <verify>approve|reject</verify> tag")
    decisions = {t.strip().lower() for t in tags}
    if len(decisions) > 1:
        return Verdict(None, reason, "contradicting <verify> tags")
    decision = decisions.pop()
    if decision not in ("approve", "reject"):
        return Verdict(None, reason, f"<verify> must hold approve or reject, got {decision[:30]!r}")
    if decision == "reject" and not reason:
        return Verdict("reject", reason, "reject without a reason")
    return Verdict(decision, reason)


def answers_match(gold: str, predicted: str | None) -> bool:
    """Whether ``predicted`` equals ``gold`` mathematically (math-verify); False for None/junk."""
    if predicted is None or not predicted.strip() or len(predicted) > MAX_ANSWER_CHARS:
        return False
    try:
        from math_verify import parse, verify
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "the math tasks check answers with math-verify: pip install 'llm-marl-envs[math]'"
        ) from exc
    limit = 5 if threading.current_thread() is threading.main_thread() else None
    wrap = lambda s: f"${s}$"  # noqa: E731 - math-verify reads LaTeX inside $...$
    gold_parsed = parse(wrap(gold), parsing_timeout=limit)
    pred_parsed = parse(wrap(predicted), parsing_timeout=limit)
    if not gold_parsed or not pred_parsed:
        return False
    return bool(verify(gold_parsed, pred_parsed, timeout_seconds=limit))
