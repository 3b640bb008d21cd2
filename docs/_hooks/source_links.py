"""MkDocs hook: links from the docs to the repository's source files work on the site too.

The docs link source files relatively, e.g. ``[tiny.py](../baselines/policies/tiny.py)`` from
``docs/benchmarks.md``: the code host (GitHub, GitLab...) resolves that in the checkout. MkDocs
only serves ``docs/``, so this hook copies every linked repository file into the site under
``_source/<path>`` and points the link there (served as a plain file). A link to a file that
does not exist in the repository, or to a Markdown file outside docs/, stays as it is, and MkDocs
reports it (``--strict`` fails).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

_LINK = re.compile(r"(\]\()([^)\s#]+)((?:#[^)\s]*)?\))")
_PREFIX = "_source"


def _repo_target(page_src: str, target: str, docs_dir: Path, repo: Path) -> str | None:
    """The repository-relative path of ``target`` when it leaves docs/ and names a repository file."""
    if "://" in target or target.startswith(("/", "mailto:")):
        return None
    resolved = (docs_dir / posixpath.dirname(page_src) / target).resolve()
    try:
        resolved.relative_to(docs_dir.resolve())
        return None  # inside docs/: MkDocs handles it
    except ValueError:
        pass
    try:
        rel = resolved.relative_to(repo.resolve())
    except ValueError:
        return None
    if not resolved.is_file() or resolved.suffix == ".md":  # a page outside docs/ would be an orphan page
        return None
    return rel.as_posix()


def _scan(config) -> dict[str, set[str]]:
    docs_dir = Path(config["docs_dir"])
    repo = Path(config["config_file_path"]).parent
    found: dict[str, set[str]] = {}
    for md in docs_dir.rglob("*.md"):
        src = md.relative_to(docs_dir).as_posix()
        for m in _LINK.finditer(md.read_text(encoding="utf-8")):
            rel = _repo_target(src, m.group(2), docs_dir, repo)
            if rel is not None:
                found.setdefault(src, set()).add(rel)
    return found


def on_files(files, config):
    repo = Path(config["config_file_path"]).parent
    wanted = sorted({rel for rels in _scan(config).values() for rel in rels})
    for rel in wanted:
        files.append(File.generated(config, f"{_PREFIX}/{rel}", abs_src_path=str(repo / rel)))
    return files


def on_page_markdown(markdown, page, config, files):
    docs_dir = Path(config["docs_dir"])
    repo = Path(config["config_file_path"]).parent
    src = page.file.src_uri

    def swap(m: re.Match) -> str:
        rel = _repo_target(src, m.group(2), docs_dir, repo)
        if rel is None:
            return m.group(0)
        return m.group(1) + posixpath.relpath(f"{_PREFIX}/{rel}", posixpath.dirname(src) or ".") + m.group(3)

    return _LINK.sub(swap, markdown)
