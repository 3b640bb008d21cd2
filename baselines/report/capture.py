"""What a training step saves for the report: its sample table and the table's text.

:func:`save_step_samples` decides what a step keeps: every row of every step with
``log.save_samples``, else a bounded sample -- the first ``log.sample_episodes`` episodes of
``log.sample_steps`` steps spread over the run -- so that every run's ``report.html`` shows episodes.
``samples/step_<k>.jsonl`` holds token ids only; :func:`save_step_text` writes
``samples/step_<k>.text.jsonl``, one line per row of that table and in the same order: the
decoded prompt and completion, and the advantage the scheme gave the row (``keep`` false when the
update skipped it, ``group`` its normalization group).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def save_step_text(path: str | Path, table: Any, adv: Any, team: Any, rows: Sequence[int] | None = None) -> Path:
    """Write the text companion of ``table`` (a :class:`~baselines.samples.SampleTable`) to ``path``; ``rows``:
    only those rows, in that order (default: all)."""
    path = Path(path)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(len(table)) if rows is None else rows:
            agent = str(table.agent[i])
            tok = team.tokenizer(agent)
            a = float(adv.advantages[i])
            rec = {
                "prompt": tok.decode(list(table.prompt_ids[i]), skip_special_tokens=False),
                "completion": team.decode(agent, table.completion_ids[i]),
                "advantage": a if math.isfinite(a) else None,
                "keep": bool(adv.keep[i]),
                "group": int(adv.groups[i]),
            }
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return path


def sampled_steps(total: int, count: int) -> set[int]:
    """``count`` steps spread over ``1..total``, the first and the last included (every step if fewer)."""
    if total < 1 or count < 1:
        return set()
    if count == 1:
        return {total}
    return {1 + round(i * (total - 1) / (count - 1)) for i in range(count)}


def first_episodes(table: Any, count: int) -> list[int]:
    """The row indices of the first ``count`` episodes (``(task, episode)`` pairs) of ``table``, in table order."""
    kept: set[tuple[str, int]] = set()
    rows = []
    for i in range(len(table)):
        key = (str(table.task[i]), int(table.episode[i]))
        if key not in kept and len(kept) < count:
            kept.add(key)
        if key in kept:
            rows.append(i)
    return rows


def save_step_samples(folder: str | Path, step: int, total_steps: int, table: Any, adv: Any, team: Any,
                      log: Any) -> Path | None:
    """Write ``folder/samples/step_<step>.jsonl`` and its ``.text.jsonl`` as the log settings say (``log`` is a
    :class:`~baselines.config_sections.LogConfig`): the whole table with ``save_samples``, else, on the
    ``sample_steps`` steps spread over the run, its first ``sample_episodes`` episodes (the bounded sample
    report.html shows); returns the table's path, None when this step keeps nothing."""
    if log.save_samples:
        rows = None
    elif step in sampled_steps(total_steps, log.sample_steps):
        rows = first_episodes(table, log.sample_episodes)
    else:
        return None
    out = Path(folder) / "samples"
    out.mkdir(exist_ok=True)
    (table if rows is None else table.select(rows)).to_jsonl(out / f"step_{step}.jsonl")
    save_step_text(out / f"step_{step}.text.jsonl", table, adv, team, rows)
    return out / f"step_{step}.jsonl"
