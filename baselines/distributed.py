"""Data-parallel training over ``torch.distributed`` ranks (launched by ``torchrun`` / ``accelerate launch``).

How a step is split (docs/scaling.md):

- every rank draws the same task seeds; rank r rolls out its contiguous share of the tasks, so an
  advantage group (all the rows of one task) never straddles ranks;
- the ranks' sample tables are gathered (:meth:`DistContext.gather_rollout`), and every rank
  computes the advantages on the whole step's table -- batch-wide statistics (the Dr. MAS
  per-agent mu_k / sigma_k, the batch std) are therefore the ones a single process would get;
- in each minibatch, each agent's rows are dealt round-robin to the ranks; each rank scales its
  part of the loss by its share of the agent's rows / tokens, and the per-agent gradients are
  summed across ranks with ``all_reduce`` (:meth:`DistContext.all_reduce_grads`, one flat buffer per
  agent and trained parameter set -- the bucketed all-reduce DDP does, done by hand because the
  update takes per-agent gradients with ``torch.autograd.grad``), so the summed gradient is the
  single-process gradient and every rank takes the same optimizer step.

:class:`DistContext` with ``world_size == 1`` (:meth:`DistContext.single`) is the plain
one-process trainer: every collective is the identity and nothing else changes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from baselines.rollout.base import RolloutResult
from baselines.rollout.common import GenStats
from baselines.samples import SampleTable


@dataclass(frozen=True)
class DistContext:
    """This process's rank among ``world_size`` data-parallel ranks, and the collectives it uses."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @classmethod
    def single(cls) -> DistContext:
        """One process: no collectives."""
        return cls()

    @classmethod
    def from_env(cls, device: str = "cpu") -> DistContext:
        """Join the process group ``torchrun`` / ``accelerate launch`` describe in the environment
        (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``); a plain
        ``python -m baselines.train`` (no ``WORLD_SIZE``, or 1) gives :meth:`single`.

        Backend: gloo on CPU, nccl on CUDA (each rank then uses ``cuda:<LOCAL_RANK>``)."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls.single()
        missing = [k for k in ("RANK", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
        if missing:
            raise RuntimeError(f"WORLD_SIZE={world} but {missing} not set: launch with torchrun or accelerate launch")
        rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
        if not dist.is_initialized():
            backend = "nccl" if device.startswith("cuda") else "gloo"
            if backend == "nccl":
                torch.cuda.set_device(local)
            dist.init_process_group(backend=backend, rank=rank, world_size=world)
        return cls(rank=rank, world_size=world, local_rank=local)

    @property
    def is_main(self) -> bool:
        """Rank 0: the only rank that writes logs, checkpoints and plots."""
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1

    # ------------------------------------------------------------------ collectives
    def barrier(self) -> None:
        if self.active:
            dist.barrier()

    def all_gather_object(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order (``[obj]`` for one process)."""
        if not self.active:
            return [obj]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def broadcast_object(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank."""
        if not self.active:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def broadcast_params(self, params: list[torch.nn.Parameter]) -> None:
        """Copy rank 0's values of ``params`` to every rank (what DDP does on construction)."""
        if self.active:
            with torch.no_grad():
                for p in params:
                    dist.broadcast(p.data, src=0)

    def shard(self, items: list[Any]) -> list[Any]:
        """This rank's contiguous share of ``items`` (shares differ by at most one item)."""
        n, w = len(items), self.world_size
        start, stop = self.rank * n // w, (self.rank + 1) * n // w
        return items[start:stop]

    def all_reduce_grads(self, grads: list[torch.Tensor | None], params: list[torch.nn.Parameter],
                         ) -> list[torch.Tensor | None]:
        """Sum ``grads`` (one per parameter, None = unused here) over the ranks in one flat buffer.

        A parameter no rank used stays None (so AdamW leaves it alone, as in one process)."""
        if not self.active:
            return grads
        device = params[0].device
        flat = torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1).float()
                          for g, p in zip(grads, params)]
                         + [torch.tensor([0.0 if g is None else 1.0 for g in grads], device=device)])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        used = flat[-len(params):]
        out: list[torch.Tensor | None] = []
        offset = 0
        for i, p in enumerate(params):
            n = p.numel()
            out.append(flat[offset:offset + n].view_as(p).to(p.dtype) if used[i] > 0 else None)
            offset += n
        return out

    def gather_rollout(self, result: RolloutResult) -> RolloutResult:
        """The whole step's rollout on every rank: tables and returns concatenated in rank order,
        generation counters summed, numeric ``info`` summed (``*_mean`` keys averaged)."""
        if not self.active:
            return result
        parts: list[RolloutResult] = self.all_gather_object(result)
        gen = GenStats()
        for p in parts:
            for name in ("calls", "sequences", "prompt_tokens", "completion_tokens"):
                setattr(gen, name, getattr(gen, name) + getattr(p.gen, name))
            gen.seconds = max(gen.seconds, p.gen.seconds)  # the ranks generate in parallel
        info = dict(parts[0].info)
        for key, value in parts[0].info.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                values = [p.info.get(key, 0) for p in parts]
                info[key] = sum(values) / len(values) if key.endswith("_mean") else sum(values)
        return RolloutResult(table=SampleTable.concat([p.table for p in parts]),
                             returns=[r for p in parts for r in p.returns], gen=gen, info=info)

    def close(self) -> None:
        """Leave the process group (if this context joined one)."""
        if self.active and dist.is_initialized():
            dist.destroy_process_group()
