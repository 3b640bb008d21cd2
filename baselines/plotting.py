"""End-of-run plot: the joint reward curve (train, held-out during training on the fixed split, final
held-out) and every agent's gradient-norm curve (PNG, Agg)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def reward_lines(records: list[dict[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """The reward panel's lines: label -> (step, value) points (train, held-out during training, final eval)."""
    lines = {"train reward": [(r["step"], r["reward"]) for r in records if r.get("reward") is not None],
             "held-out (fixed split, eval.every_steps)": [(r["step"], r["eval/heldout_reward"]) for r in records
                                                          if r.get("eval/heldout_reward") is not None],
             "eval reward": [(r["step"], r["eval/reward"]) for r in records if r.get("eval/reward") is not None]}
    return {label: points for label, points in lines.items() if points}


def plot_run(records: list[dict[str, Any]], path: str | Path, *, title: str = "", chance: float | None = None) -> Path:
    """Write ``path`` (PNG) from metric records (``metrics.jsonl`` lines); returns the path."""
    path = Path(path)
    steps = [r["step"] for r in records]
    fig, (ax_r, ax_g) = plt.subplots(1, 2, figsize=(11, 4))
    for label, points in reward_lines(records).items():
        ax_r.plot(*zip(*points), "-" if label == "train reward" else "o-", label=label)
    if chance is not None:
        ax_r.axhline(chance, color="grey", linestyle="--", label=f"chance {chance:.2f}")
    ax_r.set_xlabel("optimizer step")
    ax_r.set_ylabel("joint reward")
    ax_r.legend()
    agents = sorted({k.split("/")[1] for r in records for k in r if k.startswith("agent/") and k.endswith("/grad_norm")})
    positive = False
    for agent in agents:
        norms = [r.get(f"agent/{agent}/grad_norm") for r in records]
        positive |= any(n is not None and n > 0 for n in norms)
        ax_g.plot(steps, norms, label=agent)
    ax_g.set_xlabel("optimizer step")
    ax_g.set_ylabel("gradient norm (before clipping)")
    if positive:
        ax_g.set_yscale("log")
    if agents:
        ax_g.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
