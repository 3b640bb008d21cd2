"""Parsing the agents' XML-like tags (``<search>``, ``<report>``, ``<dispatch worker="i">``, ``<answer>``...).

Parsing never raises: it returns the complete tags found, in order, and how many opening
tags were left unclosed, so the environment can turn problems into format issues.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ATTR = re.compile(r"""(\w+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""")


@dataclass(frozen=True)
class Tag:
    """One complete ``<name attrs>content</name>``."""

    name: str
    attrs: dict[str, str]
    content: str


def find_tags(text: str, name: str) -> tuple[list[Tag], int]:
    """Complete ``<name ...>...</name>`` tags in ``text`` (case-insensitive) and the unclosed count."""
    rx = re.compile(rf"<{name}(\s[^<>]*)?>(.*?)</{name}\s*>", re.IGNORECASE | re.DOTALL)
    tags = []
    for m in rx.finditer(text):
        attrs = {a.lower(): (v1 or v2 or v3 or "") for a, v1, v2, v3 in _ATTR.findall(m.group(1) or "")}
        tags.append(Tag(name, attrs, m.group(2).strip()))
    opened = len(re.findall(rf"<{name}(\s[^<>]*)?>", text, re.IGNORECASE))
    return tags, max(opened - len(tags), 0)
