"""FSDP: the team's models sharded across data-parallel ranks (``distributed.fsdp``; docs/scaling.md).

With ``distributed.fsdp: true`` and several ranks, every model of the team (the shared model, each
agent's own model, the LoRA base with all its adapters, and the frozen KL references) is sharded
with torch FSDP2 (``torch.distributed.fsdp.fully_shard``): one FSDP unit per decoder layer plus the
root (embeddings, final norm, output layer). Each rank then stores 1/N of every parameter, of its
gradient and of its AdamW state (the optimizers hold the sharded ``DTensor`` parameters).

- Training forward / backward: FSDP all-gathers a layer's weights just before its forward and
  frees them after it (``reshard_after_forward``), and reduce-SCATTERS the gradients in backward
  (summed over the ranks: gradient divide factor 1), so every rank ends up with its shard of the
  single-process gradient. FSDP's collectives need every rank in every forward and backward, in the
  same order: the update runs the same per-agent passes on every rank (a rank without rows of an
  agent runs one of them with weight 0).
- LoRA: the frozen base is sharded with the adapters (it is what makes a large model's weights
  fit); its parameters carry no gradient and no optimizer state, so only the adapters' shards get
  AdamW state. Sharding only the adapters would save almost nothing: they are a few MB.
- Generation cannot run sharded: each rank samples its own tasks, so ranks run different numbers of
  forward passes and FSDP's all-gathers would not match. :meth:`Sharding.gathered` all-gathers every
  model once before the rollout (and evaluation) and frees the full weights after it: the full
  weights exist only while generating, the gradients and optimizer state stay sharded throughout
  (measured by ``python -m baselines.bench.distributed --memory``).
- Gradient clipping uses the global norm (``clip_grad_norm_`` on the sharded ``DTensor`` gradients
  reduces the shards' norms); per-agent gradient norms are measured on the shards and summed.
- Checkpoints are FULL state dicts in exactly the format of a one-process run (tensors gathered one
  parameter at a time, onto the CPU), so a one-process run, a replicated run or an FSDP run with any
  number of ranks resumes from them; loading slices each rank's shard out of the full tensors.

Without ``distributed.fsdp`` (or with one process) :class:`Sharding` is the identity: the models
stay whole and every method does what the plain trainer does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor

from baselines.distributed import DistContext
from baselines.policies import Team


def shard_model(model: nn.Module, mesh: Any) -> list[FSDPModule]:
    """``fully_shard`` each decoder layer of ``model`` and then the transformers model itself (in place;
    for a peft model, the model under the adapters: generation enters there, not through the peft
    wrapper); returns the FSDP modules, root last. Every module reshards after its forward, the root too."""
    model = model.get_base_model() if hasattr(model, "get_base_model") else model
    names = set(getattr(model, "_no_split_modules", None) or ())  # the decoder layers' classes
    units: list[nn.Module] = [m for m in model.modules() if type(m).__name__ in names]
    for layer in units:
        fully_shard(layer, mesh=mesh, reshard_after_forward=True)
    fully_shard(model, mesh=mesh, reshard_after_forward=True)
    root: Any = model
    root.set_reshard_after_forward(True, recurse=False)  # FSDP keeps a root unsharded by default
    modules: list[Any] = [*units, root]
    for m in modules:  # SUM over the ranks (each rank's loss is already scaled by its share), as a plain
        m.set_gradient_divide_factor(1.0)  # SUM reduce-scatter: gloo has no PREMUL_SUM
        m.set_force_sum_reduction_for_comms(True)
    return modules


def _own_params(module: nn.Module) -> list[nn.Parameter]:
    """The parameters registered on ``module`` or its submodules that are not FSDP units themselves."""
    out, stack = {id(p): p for p in module.parameters(recurse=False)}, list(module.children())
    while stack:
        child = stack.pop()
        if not isinstance(child, FSDPModule):
            out.update({id(p): p for p in child.parameters(recurse=False)})  # tied weights once
            stack += list(child.children())
    return list(out.values())


def _bytes(t: torch.Tensor) -> int:
    """Bytes this rank stores for ``t`` (its shard of a sharded tensor)."""
    local = _local(t)
    return local.numel() * local.element_size()


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if isinstance(t, DTensor) else t


def _full(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor, on the CPU (a collective for a sharded one)."""
    return (t.full_tensor() if isinstance(t, DTensor) else t).detach().cpu().clone()


class Sharding:
    """Whether and how the team's models are sharded, and the helpers that differ when they are."""

    def __init__(self, modules: Sequence[FSDPModule] = (), dist_ctx: DistContext | None = None) -> None:
        self.modules = list(modules)
        self.dist = dist_ctx or DistContext.single()
        self.gathered_bytes = 0  # bytes of the whole weights the last :meth:`gathered` block allocated
        self.gather_seconds = 0.0  # time its all-gathers took

    @property
    def enabled(self) -> bool:
        return bool(self.modules)

    @classmethod
    def apply(cls, team: Team, dist_ctx: DistContext, fsdp: bool, device: str = "cpu") -> Sharding:
        """Shard every model of ``team`` over the ranks of ``dist_ctx`` when ``fsdp`` and there are several
        ranks (a collective call); else the identity."""
        if not (fsdp and dist_ctx.active):
            return cls((), dist_ctx)
        mesh = init_device_mesh(device.split(":")[0], (dist_ctx.world_size,))
        modules: list[FSDPModule] = []
        for model in team.all_models():
            modules += shard_model(model, mesh)
        return cls(modules, dist_ctx)

    # ------------------------------------------------------------------ generation
    @contextmanager
    def gathered(self) -> Iterator[None]:
        """Every model whole on every rank inside the block (one all-gather per FSDP unit), so ranks can
        run different numbers of forward passes (generation); resharded (full weights freed) on exit."""
        if not self.enabled:
            yield
            return
        start = time.perf_counter()
        for m in self.modules:
            m.set_reshard_after_forward(False, recurse=False)
            m.unshard()
        self.gather_seconds = time.perf_counter() - start
        self.gathered_bytes = sum(_bytes(p) for m in self.modules for p in _own_params(m))  # now whole
        try:
            yield
        finally:
            for m in self.modules:
                m.reshard()
                m.set_reshard_after_forward(True, recurse=False)

    def memory(self, team: Team, optimizers: Sequence[torch.optim.Optimizer]) -> dict[str, float]:
        """MB this rank holds: every model's parameters (its shards under FSDP), the optimizers' state,
        and the parameters while generating (shards + the gathered whole weights under FSDP)."""
        params = sum(_bytes(p) for model in team.all_models() for p in model.parameters())
        state = sum(_bytes(v) for opt in optimizers for s in opt.state.values() for v in s.values()
                    if torch.is_tensor(v))
        mb = 2.0**20
        out = {"memory/params_mb": params / mb, "memory/optimizer_mb": state / mb,
               "memory/generation_params_mb": (params + self.gathered_bytes) / mb}
        if self.enabled:
            out["time/gather_s"] = self.gather_seconds
        return out

    # ------------------------------------------------------------------ gradients
    def snapshot_grads(self, params: Sequence[nn.Parameter]) -> list[torch.Tensor | None] | None:
        """Copies of this rank's gradient shards (None when no parameter has a gradient yet)."""
        if all(p.grad is None for p in params):
            return None
        return [None if p.grad is None else _local(p.grad).detach().clone() for p in params]

    def grad_norm_since(self, params: Sequence[nn.Parameter], before: list[torch.Tensor | None] | None) -> float:
        """Global L2 norm of what was added to the (sharded) gradients since ``before``."""
        sq = torch.zeros((), dtype=torch.float64)
        for i, p in enumerate(params):
            if p.grad is None:
                continue
            g = _local(p.grad).detach().double()
            if before is not None and before[i] is not None:
                g = g - before[i].double()  # type: ignore[union-attr]
            sq += g.pow(2).sum().cpu()
        if self.dist.active:
            dist.all_reduce(sq, op=dist.ReduceOp.SUM)
        return float(sq.sqrt())

    @staticmethod
    def clip_grad_norm(params: Sequence[nn.Parameter], max_norm: float) -> float:
        """``clip_grad_norm_`` over the whole (possibly sharded) gradient: returns the global norm."""
        total = torch.nn.utils.clip_grad_norm_(list(params), max_norm)
        return float(total.full_tensor() if isinstance(total, DTensor) else total)

    # ------------------------------------------------------------------ checkpoints
    def team_state(self, team: Team) -> dict[str, dict[str, torch.Tensor]]:
        """:meth:`Team.state_dict` (full tensors on the CPU); with FSDP a collective call that gathers one
        parameter at a time."""
        if not self.enabled:
            return team.state_dict()
        return {str(key): {n: _full(p) for n, p in team.trainable_parameters(team.agents_of(key)[0]).items()}
                for key in team.policy_keys()}

    def load_team_state(self, team: Team, state: dict[str, dict[str, torch.Tensor]]) -> None:
        """:meth:`Team.load_state_dict`; with FSDP each rank copies its shard out of the full tensors."""
        if not self.enabled:
            team.load_state_dict(state)
            return
        keys = {str(k): k for k in team.policy_keys()}
        if set(state) != set(keys):
            raise ValueError(f"state has policies {sorted(state)}, team has {sorted(keys)}")
        for name, key in keys.items():
            params = team.trainable_parameters(team.agents_of(key)[0])
            if set(state[name]) != set(params):
                raise ValueError(f"policy {name}: parameters {sorted(set(params) ^ set(state[name]))[:5]} differ")
            with torch.no_grad():
                for n, p in params.items():
                    _local(p).copy_(_local(self._like(state[name][n], p)))

    def optimizer_state(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """``optimizer.state_dict()`` with full tensors (the one-process format)."""
        sd = optimizer.state_dict()
        if not self.enabled:
            return sd
        return {**sd, "state": {i: {k: _full(v) if isinstance(v, DTensor) else v for k, v in s.items()}
                                for i, s in sd["state"].items()}}

    def load_optimizer_state(self, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
        """``optimizer.load_state_dict`` of a full state: each rank keeps the shards of its parameters."""
        if self.enabled:
            params = [p for group in optimizer.param_groups for p in group["params"]]
            state = {**state, "state": {
                i: {k: self._like(v, params[int(i)]) if torch.is_tensor(v) and v.dim() else v for k, v in s.items()}
                for i, s in state["state"].items()}}
        optimizer.load_state_dict(state)

    @staticmethod
    def _like(full: torch.Tensor, param: torch.Tensor) -> torch.Tensor:
        """``full`` laid out like ``param``: this rank's shard (no communication) when it is sharded."""
        full = full.to(device=_local(param).device, dtype=param.dtype)
        if isinstance(param, DTensor):
            return distribute_tensor(full, param.device_mesh, param.placements, src_data_rank=None)
        return full
