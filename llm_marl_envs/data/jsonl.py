"""Reading JSON-lines files (plain or gzipped) with errors that name the file and line."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, record)`` for every non-blank line; each record must be an object."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such dataset file: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({exc})") from None
            if not isinstance(rec, dict):
                raise ValueError(f"{path}:{lineno}: expected a JSON object, got {type(rec).__name__}")
            yield lineno, rec
