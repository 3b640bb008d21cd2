"""Metric sinks of a training run: JSONL (always), TensorBoard, optional W&B.

Every step's metrics are one flat dict of floats with ``/``-separated names, per agent
under ``agent/<name>/...`` (by AGENT name, never by model), e.g.
``agent/speaker/grad_norm``. :class:`MetricsLogger` writes each dict as one JSON line to
``metrics.jsonl`` and as scalars to TensorBoard (``torch.utils.tensorboard``); W&B is used
only when asked for and installed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """All records of a metrics file."""
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


class MetricsLogger:
    """Writes metrics to ``<run_dir>/metrics.jsonl``, TensorBoard (``<run_dir>/tb``) and W&B."""

    def __init__(
        self,
        run_dir: str | Path,
        *,
        tensorboard: bool = True,
        wandb: bool = False,
        wandb_project: str = "llm-marl-envs",
        config: dict[str, Any] | None = None,
        resume_step: int = 0,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / "metrics.jsonl"
        if resume_step and self.path.exists():  # drop records past the checkpoint we resume from
            kept = [r for r in read_jsonl(self.path) if r.get("step", 0) <= resume_step]
            self.path.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
        self._fh = open(self.path, "a", encoding="utf-8")
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(self.run_dir / "tb"), purge_step=resume_step + 1 if resume_step else None)
        self._wandb = None
        if wandb:
            try:
                import wandb as wandb_mod
            except ImportError as err:
                raise RuntimeError("log.wandb=true but the wandb package is not installed (pip install wandb)") from err
            self._wandb = wandb_mod.init(project=wandb_project, config=config or {}, dir=str(self.run_dir),
                                         name=self.run_dir.name, resume="allow")

    def log(self, step: int, metrics: dict[str, float]) -> None:
        record = {"step": step, **{k: _clean(v) for k, v in metrics.items()}}
        self._fh.write(json.dumps(record) + "\n")
        self._fh.flush()
        if self._tb is not None:
            for key, value in metrics.items():
                if isinstance(value, (int, float)) and math.isfinite(value):
                    self._tb.add_scalar(key, value, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(metrics, step=step)

    def close(self) -> None:
        self._fh.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def _clean(value: Any) -> Any:
    """JSON-safe scalar: NaN/inf become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
