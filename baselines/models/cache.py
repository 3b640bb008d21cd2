"""The model cache: folders written atomically, keyed by a source hash, verified before every use.

A cache entry is a folder ``<cache>/models/<name>-<key>`` holding the converted files and a
``manifest.json`` written LAST that records the source hash and the size and sha256 of every
file. An entry is trusted only if its manifest parses, names the expected source hash and
every file matches; anything else (a half-written folder, a truncated or edited weight file, a
missing manifest) is moved aside and rebuilt. Entries are built in a temporary sibling folder
and renamed into place, so a reader never sees a partial entry and two processes converting at
once both end with a complete one.

The cache root is ``$LLM_MARL_CACHE`` if set, else ``$XDG_CACHE_HOME/llm_marl_envs``, else
``~/.cache/llm_marl_envs``; every function also takes an explicit ``cache_dir``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

MANIFEST = "manifest.json"
MANIFEST_VERSION = 1
_CHUNK = 1 << 22


def default_cache_dir() -> Path:
    """``$LLM_MARL_CACHE``, else ``$XDG_CACHE_HOME/llm_marl_envs``, else ``~/.cache/llm_marl_envs``."""
    if os.environ.get("LLM_MARL_CACHE"):
        return Path(os.environ["LLM_MARL_CACHE"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "llm_marl_envs"


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in 4 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def entry_is_valid(folder: Path, source_sha256: str) -> bool:
    """Whether ``folder`` is a complete entry built from the source with hash ``source_sha256``."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        if manifest.get("version") != MANIFEST_VERSION or manifest.get("source_sha256") != source_sha256:
            return False
        files = manifest["files"]
        if not isinstance(files, dict) or not files:
            return False
        for name, meta in files.items():
            path = folder / name
            if path.stat().st_size != meta["size"] or sha256_file(path) != meta["sha256"]:
                return False
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False
    return True


def write_manifest(folder: Path, source_sha256: str, extra: dict | None = None) -> None:
    """Record every file of ``folder`` (size and sha256) and the source hash; call it last."""
    files = {
        p.name: {"size": p.stat().st_size, "sha256": sha256_file(p)}
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name != MANIFEST
    }
    manifest = {"version": MANIFEST_VERSION, "source_sha256": source_sha256, "files": files, **(extra or {})}
    tmp = folder / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    os.replace(tmp, folder / MANIFEST)


def build_entry(
    target: Path, source_sha256: str, build: Callable[[Path], None], extra: dict | None = None
) -> bool:
    """Make ``target`` a valid entry: reuse it if it verifies, else ``build(tmp_folder)`` and rename.

    Returns True if this call built the entry, False if a valid one was already there (or a
    concurrent process finished first)."""
    if entry_is_valid(target, source_sha256):
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".tmp-{target.name}-{uuid.uuid4().hex[:8]}"
    try:
        tmp.mkdir()
        build(tmp)
        write_manifest(tmp, source_sha256, extra)
        if target.exists():  # an invalid entry (or a concurrent writer's valid one)
            if entry_is_valid(target, source_sha256):
                return False
            _discard(target)
        try:
            os.rename(tmp, target)
        except OSError:  # a concurrent writer renamed first
            if not entry_is_valid(target, source_sha256):
                raise
            return False
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return True


def _discard(folder: Path) -> None:
    """Move ``folder`` aside (atomic) and delete it."""
    trash = folder.parent / f".trash-{folder.name}-{uuid.uuid4().hex[:8]}"
    os.rename(folder, trash)
    shutil.rmtree(trash, ignore_errors=True)
