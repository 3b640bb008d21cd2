"""One self-contained HTML report of a training run or an evaluation: ``python -m baselines.report DIR``.

The page (``DIR/report.html``) opens from disk without network or server: config and summary,
curves (SVG), per-agent format tables, and the saved episodes as conversations (one column per
agent) or trees, with prompts, actions, rewards and advantages. :mod:`.data` reads the folder,
:mod:`.render` fills ``template.html`` (package data), :mod:`.capture` is what training saves for it.
"""

from __future__ import annotations

from pathlib import Path


def write_report(folder: str | Path, out: str | Path | None = None) -> Path:
    """Write the report of ``folder`` to ``out`` (default ``folder/report.html``); returns its path."""
    from baselines.report.data import collect
    from baselines.report.render import render

    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"no such folder: {folder}")
    path = Path(out) if out is not None else folder / "report.html"
    path.write_text(render(collect(folder)), encoding="utf-8")
    return path


__all__ = ["write_report"]
