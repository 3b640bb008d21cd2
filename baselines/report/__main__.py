"""``python -m baselines.report RUN_DIR [--out FILE]``: write RUN_DIR/report.html (see the package docstring)."""

from __future__ import annotations

import argparse
import sys

from baselines.report import write_report


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(prog="python -m baselines.report",
                                description="One self-contained HTML report of a training run or an evaluation folder.")
    p.add_argument("folder", help="a training run folder (runs/<run>) or a baselines.evaluate --out folder")
    p.add_argument("--out", help="output file (default: FOLDER/report.html)")
    args = p.parse_args(argv)
    try:
        path = write_report(args.folder, args.out)
    except FileNotFoundError as exc:
        p.error(str(exc))
    print(f"report: {path}")
    return str(path)


if __name__ == "__main__":
    main(sys.argv[1:])
