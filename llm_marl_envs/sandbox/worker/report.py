"""Describing an exception safely: type, message and a traceback trimmed to the job's code.

Used in job processes on exceptions raised by untrusted code, so nothing here may trust the
exception object: ``__str__`` may raise or return junk, the traceback may be thousands of
frames deep. Frames of the sandbox's own modules are removed, so the traceback shows the
program's (``solution.py``) and the test's line numbers only.
"""

from __future__ import annotations

import os
import traceback
from typing import Any

_WORKER_DIR = os.path.dirname(os.path.abspath(__file__))
MAX_FRAMES = 30  # kept at each end of a very deep traceback


def safe_str(obj: Any, limit: int) -> str:
    try:
        text = str(obj)
        if not isinstance(text, str):  # pragma: no cover - str() guarantees a str
            raise TypeError
    except BaseException:  # noqa: BLE001 - anything the object may raise
        return f"<unprintable {type_name(obj)} object>"
    return truncate(text, limit)


def type_name(obj: Any) -> str:
    try:
        name = type.__dict__["__name__"].__get__(type(obj))
        return name if isinstance(name, str) else "<unknown>"
    except BaseException:  # noqa: BLE001
        return "<unknown>"


def is_memory_error(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError)


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n...[truncated {len(text) - limit} characters]"


def describe(exc: BaseException, limit: int) -> dict[str, Any]:
    """``{"error_type", "error_message", "traceback", "memory_exceeded"}`` for ``exc``."""
    info: dict[str, Any] = {
        "error_type": type_name(exc),
        "error_message": safe_str(exc, limit),
        "memory_exceeded": is_memory_error(exc),
    }
    try:
        text = format_trimmed(exc)
        remote = getattr(type(exc), "_sbx_traceback", None)
        if isinstance(remote, str) and remote:
            # Raised by the program in its own process (see .judge): the test's frames here,
            # then the program's, as one traceback.
            head = text.rstrip("\n").rsplit("\n", 1)[0] + "\n"
            tail = remote.split("\n", 1)[1] if remote.startswith("Traceback") else remote
            text = head + tail
        info["traceback"] = truncate(text, limit)
    except BaseException:  # noqa: BLE001
        info["traceback"] = f"{info['error_type']}: {info['error_message']}"
    return info


def format_trimmed(exc: BaseException) -> str:
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True)
    seen: set[int] = set()
    stack: list[Any] = [te]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        frames = [f for f in item.stack if not f.filename.startswith(_WORKER_DIR)]
        for f in frames:
            # No 3.11 "^^^^" lines: computing them imports ast (0.5 MB in the fork server).
            if hasattr(f, "colno"):
                f.colno = f.end_colno = None
        if len(frames) > 2 * MAX_FRAMES:
            frames = frames[:MAX_FRAMES] + frames[-MAX_FRAMES:]
        item.stack = traceback.StackSummary.from_list(frames)
        for nxt in (item.__cause__, item.__context__):
            if nxt is not None:
                stack.append(nxt)
    return "".join(te.format())
