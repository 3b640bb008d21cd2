"""Collect the GPU learning runs: ``gpu_learning.json`` and the paired held-out change per scheme.

    python -m baselines.experiments.gpu_learning --scheme grpo runs/gpu/grpo --scheme magrpo runs/gpu/magrpo \\
        --out docs/figures/gpu_learning.json

Every ``results.json`` below a scheme's folders (one per ``heldout_training`` process, one seed
each) is read; their seeds are listed in seed order under the scheme's name, as
``{"grpo": [...], "magrpo": [...]}`` (each entry the seed's record with ``before.mean_return`` and
``after.mean_return``; a seed still training or cut short is listed with ``"partial": true`` and no
``after``, and left out of the verdict). Printed per scheme: held-out before -> after (means over seeds), the paired
change (after - before, per seed) with its standard deviation over seeds, and the verdict:
**learned** only where the mean paired change exceeds twice that standard deviation (and at least
two seeds finished); otherwise "not shown". Standard library only, so it runs while the training
processes still hold the GPU (the script calls it as results appear).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any


def seeds_of(folders: list[str]) -> list[dict[str, Any]]:
    """The seeds of every ``results.json`` under ``folders`` (a seed found twice: the later file wins)."""
    found: dict[int, dict[str, Any]] = {}
    for folder in folders:
        for path in sorted(Path(folder).rglob("results.json")):
            for record in json.loads(path.read_text()):
                found[int(record["seed"])] = record
    return [found[s] for s in sorted(found)]


def verdict(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over seeds, the paired change with its std over seeds, and whether it counts as learned.

    A partial record (``"partial": true``: its process stopped before the after-evaluation) is counted
    in ``partial`` and left out of every figure."""
    partial = sum(1 for r in records if "after" not in r)
    records = [r for r in records if "after" in r]
    if not records:
        return {"seeds": 0, "partial": partial, "learned": False}
    before = [r["before"]["mean_return"] for r in records]
    after = [r["after"]["mean_return"] for r in records]
    change = [a - b for a, b in zip(after, before)]
    std = statistics.stdev(change) if len(change) > 1 else float("nan")
    mean = statistics.fmean(change)
    return {"seeds": len(records), "before": statistics.fmean(before), "after": statistics.fmean(after),
            "change": mean, "change_std": std, "steps": [r.get("steps") for r in records],
            "partial": partial, "learned": len(change) > 1 and mean > 2 * std}  # fmt: skip


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scheme", nargs="+", action="append", metavar=("NAME", "FOLDER"), required=True,
                   help="a scheme's name and the folders holding its results.json files (repeatable)")  # fmt: skip
    p.add_argument("--out", required=True, help="the JSON file to write")
    args = p.parse_args(argv)
    table: dict[str, list[dict[str, Any]]] = {}
    for name, *folders in args.scheme:
        if not folders:
            p.error(f"--scheme {name}: give at least one folder")
        table[name] = seeds_of(folders)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(table, indent=2, default=float))
    verdicts = {name: verdict(records) for name, records in table.items()}
    for name, v in verdicts.items():
        note = f" ({v['partial']} partial seed(s) left out)" if v["partial"] else ""
        if not v["seeds"]:
            print(f"{name}: no seed finished yet{note}")
            continue
        print(f"{name}, {v['seeds']} seed(s), steps {v['steps']}: held-out {v['before']:.3f} -> {v['after']:.3f}, "
              f"paired change {v['change']:+.3f} +- {v['change_std']:.3f} (std over seeds): "
              f"{'learned' if v['learned'] else 'not shown (change <= 2 std, or one seed)'}{note}")  # fmt: skip
    return verdicts


if __name__ == "__main__":
    main()
