"""Checkpoints for an EXACT resume.

A checkpoint holds everything the next step depends on: the trained parameters (full
weights, or only the LoRA adapters, i.e. whatever the optimizers update), every
optimizer's state, the RNG states of ``random``, ``numpy``'s global generator, ``torch``
(CPU and CUDA), the trainer's own task-seed stream (a ``numpy.random.Generator``), the
step counter, and the config. Resuming from step k and running step k+1 gives the same
parameters and metrics as an uninterrupted run (``tests/baselines/test_trainer_resume.py``).

Files: ``<run_dir>/checkpoints/step_<k>.pt`` (``torch.save``; load only files you trust)
and ``<run_dir>/checkpoints/latest`` (the name of the newest one).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch


def rng_state(task_rng: np.random.Generator) -> dict[str, Any]:
    """Snapshot of every random number generator the training loop draws from."""
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "tasks": task_rng.bit_generator.state,
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any], task_rng: np.random.Generator) -> None:
    """Restore a :func:`rng_state` snapshot (``task_rng`` is updated in place)."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    task_rng.bit_generator.state = state["tasks"]
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(run_dir: str | Path, step: int, payload: dict[str, Any]) -> Path:
    """Write ``checkpoints/step_<step>.pt`` atomically and point ``latest`` at it."""
    folder = Path(run_dir) / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"step_{step}.pt"
    tmp = path.with_suffix(".tmp")
    torch.save({"step": step, **payload}, tmp)
    tmp.replace(path)
    (folder / "latest").write_text(path.name, encoding="utf-8")
    return path


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint file from a file path, a ``checkpoints`` folder, or a run folder."""
    path = Path(path)
    if path.is_file():
        return path
    for folder in (path, path / "checkpoints"):
        latest = folder / "latest"
        if latest.is_file():
            return folder / latest.read_text(encoding="utf-8").strip()
    raise FileNotFoundError(f"no checkpoint at {path} (expected a .pt file or a folder with checkpoints/latest)")


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (full pickle: trusted files only)."""
    return torch.load(resolve_checkpoint(path), map_location="cpu", weights_only=False)
