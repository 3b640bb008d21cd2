"""Pulling Python code out of whatever an LLM wrote, and saying what was done to get it.

Real model output is messy: fenced blocks with or without a language tag, several blocks,
prose before and after, reasoning in ``<think>...</think>``, a block cut off by the token
limit, or bare code with no fence at all. :func:`extract_code` always returns an
:class:`ExtractedCode` -- the code (possibly empty) plus human-readable ``notes`` saying
how it was obtained -- and never raises; nothing is executed (parsing uses :mod:`ast`).

Rules, in order:

1. ``<think>...</think>`` blocks are removed (an unclosed ``<think>`` is kept as text).
2. Fenced blocks (```` ``` ```` or ``~~~``, optional language tag) are collected; an
   unterminated last fence runs to the end of the text.
   - blocks tagged ``python``/``py``/``python3``/``py3`` are used if there are any; otherwise
     untagged blocks; blocks tagged with another language (``bash``, ``text``...) are dropped;
   - with several blocks, those that parse are joined in order (blocks that do not parse are
     dropped while at least one parses); if none parses they are all joined, so the agent
     gets the syntax error back.
3. No usable fence: the raw text is used. If it does not parse, the code starts at the first
   line that opens Python code at column 0 (``def``, ``class``, ``import``, ``from``, ``@``,
   ``async def``) and trailing lines that do not parse (prose after the code) are dropped.
4. The result is dedented and stripped of trailing whitespace.

Every step that changed the text adds a note ("no code block found, used raw text",
"3 code blocks joined", "prose before the code dropped"...).
"""

from __future__ import annotations

import ast
import re
import textwrap
import warnings
from dataclasses import dataclass

__all__ = ["ExtractedCode", "extract_code", "parses"]

PYTHON_TAGS = frozenset({"python", "py", "python3", "py3", "python 3", "pycon", "ipython"})

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([^\n`]*?)[ \t]*$")
_CODE_START = re.compile(r"^(?:async[ \t]+def|def|class|import|from[ \t]+\S+[ \t]+import|@)\b|^@")
#: give up trimming prose after the code after this many parse attempts (bounds the cost)
_MAX_TRIM_ATTEMPTS = 200


@dataclass(frozen=True)
class ExtractedCode:
    """Code extracted from an answer.

    Attributes:
        code: the Python source (may be empty, may not parse).
        notes: what extraction did, in order (empty when the answer was one clean block).
        fenced: whether the code came from fenced block(s) rather than raw text.
    """

    code: str
    notes: tuple[str, ...] = ()
    fenced: bool = False

    @property
    def empty(self) -> bool:
        return not self.code.strip()


def parses(code: str) -> bool:
    """Whether ``code`` is syntactically valid Python (never raises)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


@dataclass
class _Block:
    tag: str
    text: str
    closed: bool


def _fenced_blocks(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, tag = m.group(1), m.group(2).strip().lower()
        body: list[str] = []
        j = i + 1
        closed = False
        while j < len(lines):
            close = _FENCE.match(lines[j])
            if close and close.group(1)[0] == fence[0] and len(close.group(1)) >= len(fence) and not close.group(2):
                closed = True
                break
            body.append(lines[j])
            j += 1
        blocks.append(_Block(tag, "\n".join(body), closed))
        i = j + 1
    return blocks


def _finish(code: str) -> str:
    lines = [ln.rstrip() for ln in textwrap.dedent(code).split("\n")]
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines).rstrip()


def _from_blocks(blocks: list[_Block], notes: list[str]) -> str | None:
    python = [b for b in blocks if b.tag in PYTHON_TAGS or (b.tag and b.tag.split()[0] in PYTHON_TAGS)]
    untagged = [b for b in blocks if not b.tag]
    other = [b for b in blocks if b not in python and b not in untagged]
    chosen = python or untagged
    if not chosen:
        if other:
            notes.append(f"{len(other)} code block(s) tagged as another language ignored")
        return None
    if other:
        notes.append(f"{len(other)} block(s) tagged as another language dropped")
    if python and untagged:
        notes.append(f"{len(untagged)} untagged block(s) dropped (python-tagged blocks used)")
    if any(not b.closed for b in chosen):
        notes.append("unterminated code block (answer cut off?) used to the end")
    chosen = [b for b in chosen if b.text.strip()]
    if not chosen:
        notes.append("code block(s) empty")
        return ""
    if len(chosen) == 1:
        return _finish(chosen[0].text)
    texts = [_finish(b.text) for b in chosen]
    ok = [t for t in texts if parses(t)]
    if ok and len(ok) < len(texts):
        notes.append(f"{len(texts) - len(ok)} code block(s) that do not parse dropped")
        texts = ok
    if len(texts) > 1:
        notes.append(f"{len(texts)} code blocks joined")
    return "\n\n".join(texts)


def _from_raw(text: str, notes: list[str]) -> str:
    notes.append("no code block found, used raw text")
    if parses(text):
        return _finish(text)
    lines = text.split("\n")
    start = next((i for i, ln in enumerate(lines) if _CODE_START.match(ln)), None)
    if start is None:
        return _finish(text)
    if start > 0 and any(ln.strip() for ln in lines[:start]):
        notes.append("prose before the code dropped")
    lines = lines[start:]
    # drop trailing lines until the rest parses: only cut before a line at column 0
    # that is not blank (prose after the code), at most _MAX_TRIM_ATTEMPTS tries
    cuts = [i for i in range(len(lines) - 1, 0, -1) if lines[i][:1] not in ("", " ", "\t")]
    for attempts, cut in enumerate(cuts):
        if attempts >= _MAX_TRIM_ATTEMPTS:
            break
        candidate = "\n".join(lines[:cut])
        if parses(candidate):
            if any(ln.strip() for ln in lines[cut:]):
                notes.append("text after the code dropped")
            return _finish(candidate)
    return _finish("\n".join(lines))


def extract_code(text: str) -> ExtractedCode:
    """Extract Python code from an LLM answer (see the module docstring); never raises."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    notes: list[str] = []
    if not text.strip():
        return ExtractedCode("", ("empty answer",), False)
    stripped = _THINK.sub("", text)
    if stripped != text:
        notes.append("<think> block(s) removed")
        text = stripped
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    code = _from_blocks(_fenced_blocks(text), notes)
    fenced = code is not None
    if code is None:
        code = _from_raw(text, notes)
    if not code.strip():
        notes.append("no code found")
    return ExtractedCode(code, tuple(notes), fenced)
