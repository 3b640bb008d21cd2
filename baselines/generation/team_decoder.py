"""The decoder forward of a Llama-family model for sampling a whole LoRA team at once, on our own KV cache.

:class:`TeamDecoder` runs the model's own modules (embedding, rotary embedding, norms, projections,
MLP, output layer with its hooks) in the order the Llama / Mistral / Qwen2 decoder layer runs them,
but owns the three things that decide a decode step's cost:

* **the LoRA adapters**: every adapted ``Linear`` is computed for all rows at once, each row with its
  own agent's delta, and the projections that read the same input (q/k/v, gate/up) as one matmul
  (:mod:`baselines.generation.lora_stack`): one forward for the whole team, few kernels per layer;
* **the KV cache** (:class:`KVCache`): one pre-allocated (rows x kv-heads x length x head-dim) tensor
  per layer and kind, written in place at the step's column (``index_copy_`` with a device-side
  column: no host value, no reallocation, fixed addresses for a CUDA graph);
* **attention without K/V expansion**: with grouped-query attention a decode step's query heads are
  folded onto their key/value head, ``(rows, kv_heads, groups, dim)``, and attend to the cache as it
  is -- the ``groups`` queries of a kv head read its keys once, where ``repeat_kv`` would copy the
  whole cache ``groups`` times every layer every step.

A step is bound by its number of kernels more than by its bytes (a 135M model reads 0.3 GB of
weights per step; a graph replays thousands of small kernels), so the step also rotates queries
and keys with one rotary pass, and on CUDA normalizes with ``torch.nn.functional.rms_norm``
(``fused_norm``: one kernel instead of the eight of the layers' own RMSNorm; the same formula, its
rounding in bf16 may differ).

Prompt prefill runs here too (:meth:`TeamDecoder.prefill`: a prompt's keys and values written into
its rows' cache columns), so nothing depends on transformers' cache classes or mask builders, which
change between releases. Architectures outside the family (sliding windows, other layer layouts,
non-Linear LoRA) are refused by :func:`unsupported` with the reason; they decode through the model's
own forward instead (:mod:`baselines.generation.fast_decode`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from baselines.generation.lora_stack import FusedLinear, lora_layers, stackable, team_routing

#: ``config.model_type`` of the decoder layouts :class:`TeamDecoder` reproduces (pre-norm attention with
#: q/k/v/o projections and rotary embeddings, then a gated MLP)
FAMILY = ("llama", "mistral", "qwen2")


def base_of(model: nn.Module) -> nn.Module:
    """The transformers model under a peft wrapper (``model`` itself when it is not one)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def unsupported(model: nn.Module) -> str | None:
    """Why :class:`TeamDecoder` cannot run ``model`` (None when it can)."""
    base = base_of(model)
    cfg = base.config
    if cfg.model_type not in FAMILY:
        return f"model type {cfg.model_type!r} is not one of {FAMILY}"
    if getattr(cfg, "sliding_window", None) and getattr(cfg, "use_sliding_window", True):
        return "sliding-window attention"
    if any(t != "full_attention" for t in getattr(cfg, "layer_types", None) or []):
        return "layers other than full attention"
    inner = getattr(base, "model", None)
    if inner is None or not all(hasattr(inner, n) for n in ("embed_tokens", "layers", "norm", "rotary_emb")):
        return "not the Llama module layout"
    if lora_layers(model) and not stackable(model):
        return "LoRA layers other than plain Linear (DoRA, bias, embedding or convolution LoRA)"
    return None


@dataclass
class KVCache:
    """Keys and values of every layer: (rows x kv_heads x length x head_dim), zero-initialized."""

    keys: list[Tensor]
    values: list[Tensor]

    @property
    def rows(self) -> int:
        return self.keys[0].shape[0]

    @property
    def length(self) -> int:
        return self.keys[0].shape[2]

    def select(self, index: Tensor) -> None:
        """Keep the rows ``index`` (new tensors: for the eager loop, never under a CUDA graph)."""
        self.keys = [k.index_select(0, index) for k in self.keys]
        self.values = [v.index_select(0, index) for v in self.values]


class _Layer:
    """One decoder layer: its norms, and its projections fused by input (q/k/v, gate/up) for the team's rows."""

    def __init__(self, layer: nn.Module, routing, fused_norm: bool):
        attn, mlp = layer.self_attn, layer.mlp
        self.norm1, self.norm2 = (_norm(n, fused_norm) for n in (layer.input_layernorm, layer.post_attention_layernorm))
        self.qkv = FusedLinear([attn.q_proj, attn.k_proj, attn.v_proj], routing)
        self.o = FusedLinear([attn.o_proj], routing)
        self.gate_up = FusedLinear([mlp.gate_proj, mlp.up_proj], routing)
        self.down = FusedLinear([mlp.down_proj], routing)
        self.act = mlp.act_fn

    def fused(self) -> list[FusedLinear]:
        return [self.qkv, self.o, self.gate_up, self.down]


def _norm(module: nn.Module, fused: bool):
    """The RMSNorm ``module`` as a callable: the module itself, or (``fused``) one ``F.rms_norm`` with its weight."""
    eps = getattr(module, "variance_epsilon", None)
    if not fused or eps is None:
        return module
    return lambda x: F.rms_norm(x, (x.shape[-1],), module.weight, eps)


def grouped_decode_attention(q: Tensor, keys: Tensor, values: Tensor, allowed: Tensor, scaling: float) -> Tensor:
    """Attention of one new token per row over a grouped-query KV cache, without expanding it.

    ``q``: (rows, heads, dim); ``keys``, ``values``: (rows, kv_heads, length, dim) as the cache holds them;
    ``allowed``: (rows, length) bool. Query head ``h`` belongs to kv head ``h // (heads / kv_heads)``
    (transformers' ``repeat_kv`` layout), so the queries fold to (rows, kv_heads, groups, dim) and attend as
    ``groups`` queries of one sequence: each kv head's keys and values are read once. Returns (rows, 1,
    heads * dim)."""
    rows, heads, dim = q.shape
    grouped = q.reshape(rows, keys.shape[1], heads // keys.shape[1], dim)
    out = F.scaled_dot_product_attention(grouped, keys, values, attn_mask=allowed[:, None, None, :], scale=scaling)
    return out.reshape(rows, 1, heads * dim)


def _rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class TeamDecoder:
    """The sampling forward of a (peft-wrapped or plain) Llama-family model; see the module docstring.

    ``fused_norm``: normalize with ``F.rms_norm`` (None: on CUDA, where a step's kernel count matters)."""

    def __init__(self, model: nn.Module, fused_norm: bool | None = None):
        reason = unsupported(model)
        if reason is not None:
            raise ValueError(f"TeamDecoder cannot run this model: {reason}")
        self.model = model
        base = base_of(model)
        inner = base.model
        self.head = base.get_output_embeddings()  # called as a module: its hooks (a vocabulary mask) apply
        self.dtype, self.device = self.head.weight.dtype, self.head.weight.device
        fused_norm = self.device.type == "cuda" if fused_norm is None else fused_norm
        self.routing = team_routing(model)
        self.embed, self.rotary = inner.embed_tokens, inner.rotary_emb
        self.norm = _norm(inner.norm, fused_norm)
        self.layers = [_Layer(layer, self.routing, fused_norm) for layer in inner.layers]
        attn = inner.layers[0].self_attn
        cfg = base.config
        self.head_dim = attn.head_dim
        self.heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.heads
        self.scaling = attn.scaling

    # ------------------------------------------------------------------ bookkeeping
    def weights(self) -> list[Tensor]:
        """Every tensor a step reads from the model (a CUDA graph is valid while none moved)."""
        own = {id(p): p for p in self.model.parameters()} | {id(b): b for b in self.model.buffers()}
        return list(own.values())

    def refresh(self) -> None:
        """Bring the fused weights and stacked adapters up to the model's current weights (before every call)."""
        for layer in self.layers:
            for fused in layer.fused():
                fused.refresh()

    def route(self, adapters: list[str | None]) -> Tensor | None:
        """The routing rows of ``adapters`` (one per batch row), or None for a model without adapters."""
        return None if self.routing is None else self.routing.rows(adapters)

    def use_routing(self, scales: Tensor | None) -> None:
        if self.routing is not None and scales is not None:
            self.routing.use(scales)

    def new_cache(self, rows: int, length: int) -> KVCache:
        shape = (rows, self.kv_heads, length, self.head_dim)
        make = lambda: torch.zeros(shape, dtype=self.dtype, device=self.device)  # noqa: E731
        return KVCache([make() for _ in self.layers], [make() for _ in self.layers])

    # ------------------------------------------------------------------ forward
    def _run(self, ids: Tensor, positions: Tensor, attend) -> Tensor:
        """Hidden state of the last position after every layer; ``attend(layer, q, k, v)`` does attention on
        q (rows, width, heads, dim), k and v (rows, width, kv_heads, dim) and returns (rows, width, heads * dim)."""
        h = self.embed(ids)
        cos, sin = self.rotary(h, positions)
        cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)  # (rows, width, 1, dim): one rotation for all heads
        rows, width = ids.shape
        split = (self.heads + self.kv_heads) * self.head_dim
        for n, layer in enumerate(self.layers):
            qkv = layer.qkv(layer.norm1(h))
            qk = qkv[..., :split].view(rows, width, self.heads + self.kv_heads, self.head_dim)
            qk = qk * cos + _rotate_half(qk) * sin  # queries and keys rotated together
            v = qkv[..., split:].view(rows, width, self.kv_heads, self.head_dim)
            h = h + layer.o(attend(n, qk[:, :, : self.heads], qk[:, :, self.heads :], v))
            gate, up = layer.gate_up(layer.norm2(h)).split(layer.gate_up.splits, dim=-1)
            h = h + layer.down(layer.act(gate) * up)
        return h[:, -1:]

    def logits(self, last: Tensor) -> Tensor:
        """float32 logits (rows x vocabulary) of the last position's hidden state."""
        return self.head(self.norm(last))[:, -1].float()

    def prefill(self, cache: KVCache, ids: Tensor, positions: Tensor, keys: Tensor, column: int, targets: Tensor,
                sources: Tensor) -> None:  # fmt: skip
        """Write the keys and values of the left-padded prompts ``ids`` (``keys``: real tokens) into columns
        ``column .. column + width`` of the cache rows ``targets``, row ``targets[i]`` from prompt ``sources[i]``."""
        width = ids.shape[1]
        causal = torch.ones(width, width, dtype=torch.bool, device=ids.device).tril()
        allowed = (keys[:, None, :] & causal) | torch.eye(width, dtype=torch.bool, device=ids.device)  # pads see themselves
        allowed = allowed[:, None]
        groups = self.heads // self.kv_heads

        def attend(n: int, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            cache.keys[n][targets, :, column : column + width] = k[sources]
            cache.values[n][targets, :, column : column + width] = v[sources]
            k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=self.scaling)
            return out.transpose(1, 2).reshape(q.shape[0], width, -1)

        self._run(ids, positions, attend)

    def step(self, cache: KVCache, ids: Tensor, positions: Tensor, keys: Tensor, column: Tensor,
             upto: int | None = None) -> Tensor:  # fmt: skip
        """One token per row (``ids``, ``positions``: (rows,)) written at cache column ``column`` (a one-element
        device tensor) attending to the columns ``keys`` (rows x length, bool) allows; ``upto``: attend to the
        first ``upto`` columns only (the eager loop; a graph attends to all). Returns float32 logits."""
        allowed = keys[:, :upto]

        def attend(n: int, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
            cache.keys[n].index_copy_(2, column, k.transpose(1, 2))
            cache.values[n].index_copy_(2, column, v.transpose(1, 2))
            return grouped_decode_attention(q[:, 0], cache.keys[n][:, :, :upto], cache.values[n][:, :, :upto], allowed,
                                            self.scaling)  # fmt: skip

        return self.logits(self._run(ids[:, None], positions[:, None], attend))
