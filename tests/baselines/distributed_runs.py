"""Launching 2-rank CPU training runs for the distributed tests (``test_distributed*.py``), and the
resume check they share.

Every launch binds a free loopback port (127.0.0.1, gloo on ``lo``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

from baselines.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(launcher: list[str], args: list[str]) -> None:
    """Run ``python -m baselines.train args`` under ``launcher``; fail the test with its output's tail."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([*launcher, "-m", "baselines.train", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def torchrun() -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
            "--master_port", str(free_port())]


def accelerate_launch() -> list[str]:
    # --multi_gpu selects accelerate's torch.distributed.run launcher; the trainer picks gloo because
    # device=cpu (accelerate's own --cpu multi-process mode needs mpirun)
    return [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
            "--num_machines", "1", "--main_process_ip", "127.0.0.1", "--main_process_port", str(free_port()),
            "--mixed_precision", "no", "--dynamo_backend", "no"]


def check_resumed_step_2(run: Path, tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Resume ``run`` (2 ranks, 2 steps, a checkpoint every step) from its step-1 checkpoint on 2 ranks
    relaunched with ``accelerate launch``, and check that its step 2 equals the uninterrupted run's bit
    for bit: the weights, both AdamW moments, the step's samples. Returns (uninterrupted, resumed)
    step-2 checkpoints for further checks."""
    resumed = tmp_path / "resumed"
    (resumed / "checkpoints").mkdir(parents=True)
    shutil.copy(run / "checkpoints" / "step_1.pt", resumed / "checkpoints" / "step_1.pt")
    (resumed / "checkpoints" / "latest").write_text("step_1.pt")
    launch(accelerate_launch(), ["--resume", str(resumed), "--steps", "2", "--no-eval"])
    a = load_checkpoint(run / "checkpoints" / "step_2.pt")
    b = load_checkpoint(resumed / "checkpoints" / "step_2.pt")
    for policy, tensors in a["team"].items():
        for name, value in tensors.items():
            assert torch.equal(value, b["team"][policy][name]), (policy, name)
    for key, state in a["optimizers"].items():
        for pid, s in state["state"].items():
            for moment in ("exp_avg", "exp_avg_sq"):
                assert torch.equal(s[moment], b["optimizers"][key]["state"][pid][moment]), (key, pid, moment)
    assert (run / "samples" / "step_2.jsonl").read_text() == (resumed / "samples" / "step_2.jsonl").read_text()
    return a, b
