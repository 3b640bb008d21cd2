"""What a training step saves for the report beside its sample table (``log.save_samples``).

``samples/step_<k>.jsonl`` holds token ids only; :func:`save_step_text` writes
``samples/step_<k>.text.jsonl``, one line per row of that table and in the same order: the
decoded prompt and completion, and the advantage the scheme gave the row (``keep`` false when the
update skipped it, ``group`` its normalization group).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def save_step_text(path: str | Path, table: Any, adv: Any, team: Any) -> Path:
    """Write the text companion of ``table`` (a :class:`~baselines.samples.SampleTable`) to ``path``."""
    path = Path(path)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(len(table)):
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
