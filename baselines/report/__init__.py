"""One self-contained HTML report of a training run or an evaluation: ``python -m baselines.report DIR``.

The page (``DIR/report.html``) opens from disk without network or server: config and summary,
curves (SVG), per-agent format tables, and the saved episodes as conversations (one column per
agent) or trees, with prompts, actions, rewards and advantages. :mod:`.data` reads the folder,
:mod:`.render` fills ``template.html`` (package data), :mod:`.capture` is what training saves for it.
"""

from __future__ import annotations

from pathlib import Path


def write_report(folder: str | Path, out: str | Path | None = None, *, compress_above: int | None = None) -> Path:
    """Write the report of ``folder`` to ``out`` (default ``folder/report.html``); returns its path.

    The data is embedded gzip-compressed above ``compress_above`` bytes of JSON (default
    :data:`baselines.report.render.COMPRESS_ABOVE`)."""
    from baselines.report.data import collect
    from baselines.report.render import COMPRESS_ABOVE, render

    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"no such folder: {folder}")
    path = Path(out) if out is not None else folder / "report.html"
    limit = COMPRESS_ABOVE if compress_above is None else compress_above
    path.write_text(render(collect(folder), compress_above=limit), encoding="utf-8")
    return path


__all__ = ["write_report"]
