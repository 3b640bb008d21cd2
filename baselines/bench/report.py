"""Benchmark: how fast the HTML report of a 100-step run with saved samples opens in Chromium.

    python -m baselines.bench.report                 # trains the default game 100 steps with samples first
    python -m baselines.bench.report --run runs/<run>

Goal: the report opens in under 2 s. Prints the report's size, the seconds to write it, and the
median (over ``--repeats`` loads) of the seconds from navigation until the page says it is ready (the page's
page has read its data and drawn every tab), then of showing the episode list and one
episode. The reference, measured in the same run and browser, is the report of an empty folder
(the template alone); the ratio is full / empty.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from baselines.report import write_report
from baselines.report.browser import Browser
from baselines.report.render import extract


def _open_times(b: Browser, path: Path, repeats: int) -> tuple[float, float]:
    """Median seconds to load ``path`` (a fresh navigation each time), and to show the list then one episode."""
    loads, clicks = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        b.open(path)
        assert b.wait_for("document.body.dataset.ready") == "1", "the report did not render"
        loads.append(time.perf_counter() - start)
        start = time.perf_counter()
        b.js("document.querySelector('#tabs button[data-id=episodes]').click();"
             "if (document.querySelector('#ep-list tbody tr')) document.querySelector('#ep-list tbody tr').click();"
             "new Promise(r => { const f = () => document.querySelector('#episode .turn, #no-episodes') ? r(1) "
             ": requestAnimationFrame(f); f(); })")
        clicks.append(time.perf_counter() - start)
    return statistics.median(loads), statistics.median(clicks)


def main(argv: list[str] | None = None) -> dict[str, float]:
    p = argparse.ArgumentParser(prog="python -m baselines.bench.report", description=__doc__.split("\n\n")[0])
    p.add_argument("--run", help="an existing run folder (default: train the default game --steps steps first)")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    if args.run:
        run = Path(args.run)
    else:
        from baselines import train

        out = tempfile.mkdtemp(prefix="bench-report-")
        run = Path(train.main(["--steps", str(args.steps), "--out", out, "--name", "run", "log.save_samples=true",
                               "log.tensorboard=false", "log.progress=false", "log.log_every=0"])["run_dir"])
    start = time.perf_counter()
    path = write_report(run)
    write_s = time.perf_counter() - start
    empty_dir = Path(tempfile.mkdtemp(prefix="bench-report-empty-"))
    empty = write_report(empty_dir)
    with Browser() as b:
        load, click = _open_times(b, path, args.repeats)
        ref_load, _ = _open_times(b, empty, args.repeats)
        errors = b.console_errors()
    mb = path.stat().st_size / 1e6
    data = extract(path.read_text(encoding="utf-8"))
    episodes, turns = len(data["episodes"]), sum(len(e["turns"]) for e in data["episodes"])
    print(f"report of {run}: {mb:.1f} MB, {episodes} episodes ({turns} agent turns), written in {write_s:.2f} s")
    print(f"open (navigation -> page drawn, median of {args.repeats}): {load:.3f} s   goal < 2 s   "
          f"{'OK' if load < 2 else 'OVER'}")
    print(f"episode list + one episode after a click: {click:.3f} s")
    print(f"reference, empty report: {ref_load:.3f} s   ratio full/empty {load / ref_load:.1f}x   "
          f"console errors: {len(errors)}")
    return {"mb": mb, "load_s": load, "click_s": click, "ref_load_s": ref_load, "write_s": write_s}


if __name__ == "__main__":
    main()
