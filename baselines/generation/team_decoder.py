"""The decoder forward of a Llama-family model for sampling a whole LoRA team at once, on our own KV cache.

:class:`TeamDecoder` runs the model's own modules (embedding, rotary embedding, norms, projections,
MLP, output layer with its hooks) in the order the Llama / Mistral / Qwen2 decoder layer runs them,
but owns the three things that decide a decode step's cost:

* **the LoRA adapters**: every adapted ``Linear`` is computed for all rows at once, each row with its
  own agent's delta (:mod:`baselines.generation.lora_stack`): one forward for the whole team;
* **the KV cache** (:class:`KVCache`): one pre-allocated (rows x kv-heads x length x head-dim) tensor
  per layer and kind, written in place at the step's column (``index_copy_`` with a device-side
  column: no host value, no reallocation, fixed addresses for a CUDA graph);
* **attention without K/V expansion**: with grouped-query attention a decode step's query heads are
  folded onto their key/value head, ``(rows, kv_heads, groups, dim)``, and attend to the cache as it
  is -- the ``groups`` queries of a kv head read its keys once, where ``repeat_kv`` would copy the
  whole cache ``groups`` times every layer every step.

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

from baselines.generation.lora_stack import StackedLoRA, lora_layers, stackable

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
    """One decoder layer's callables (adapted projections resolved to their team-wide versions)."""

    def __init__(self, layer: nn.Module, linear):
        attn, mlp = layer.self_attn, layer.mlp
        self.norm1, self.norm2 = layer.input_layernorm, layer.post_attention_layernorm
        self.q, self.k, self.v, self.o = (linear(getattr(attn, n)) for n in ("q_proj", "k_proj", "v_proj", "o_proj"))
        self.gate, self.up, self.down = (linear(getattr(mlp, n)) for n in ("gate_proj", "up_proj", "down_proj"))
        self.act = mlp.act_fn


def grouped_decode_attention(q: Tensor, keys: Tensor, values: Tensor, allowed: Tensor, scaling: float) -> Tensor:
    """Attention of one new token per row over a grouped-query KV cache, without expanding it.

    ``q``: (rows, heads, 1, dim); ``keys``, ``values``: (rows, kv_heads, length, dim) as the cache holds
    them; ``allowed``: (rows, length) bool. Query head ``h`` belongs to kv head ``h // (heads / kv_heads)``
    (transformers' ``repeat_kv`` layout), so the queries fold to (rows, kv_heads, groups, dim) and attend as
    ``groups`` queries of one sequence: each kv head's keys and values are read once. Returns (rows, 1,
    heads * dim)."""
    rows, heads, _, dim = q.shape
    grouped = q.reshape(rows, keys.shape[1], heads // keys.shape[1], dim)
    out = F.scaled_dot_product_attention(grouped, keys, values, attn_mask=allowed[:, None, None, :], scale=scaling)
    return out.reshape(rows, 1, heads * dim)


def _rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class TeamDecoder:
    """The sampling forward of a (peft-wrapped or plain) Llama-family model; see the module docstring."""

    def __init__(self, model: nn.Module):
        reason = unsupported(model)
        if reason is not None:
            raise ValueError(f"TeamDecoder cannot run this model: {reason}")
        self.model = model
        base = base_of(model)
        inner = base.model
        self.lora = StackedLoRA(model) if lora_layers(model) else None
        linear = self.lora.linear if self.lora is not None else (lambda m: m)
        self.embed, self.rotary, self.norm = inner.embed_tokens, inner.rotary_emb, inner.norm
        self.head = base.get_output_embeddings()  # called as a module: its hooks (a vocabulary mask) apply
        self.layers = [_Layer(layer, linear) for layer in inner.layers]
        attn = inner.layers[0].self_attn
        cfg = base.config
        self.head_dim = attn.head_dim
        self.heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.heads
        self.scaling = attn.scaling
        self.dtype, self.device = self.head.weight.dtype, self.head.weight.device

    # ------------------------------------------------------------------ bookkeeping
    def weights(self) -> list[Tensor]:
        """Every tensor a step reads from the model (a CUDA graph is valid while none moved)."""
        own = {id(p): p for p in self.model.parameters()} | {id(b): b for b in self.model.buffers()}
        return list(own.values())

    def refresh(self) -> None:
        """Bring the stacked adapters up to the model's current weights (call before every generate call)."""
        if self.lora is not None:
            self.lora.refresh()

    def route(self, adapters: list[str | None]) -> Tensor | None:
        """The routing rows of ``adapters`` (one per batch row), or None for a model without adapters."""
        return None if self.lora is None else self.lora.routing.rows(adapters)

    def use_routing(self, scales: Tensor | None) -> None:
        if self.lora is not None and scales is not None:
            self.lora.routing.use(scales)

    def new_cache(self, rows: int, length: int) -> KVCache:
        shape = (rows, self.kv_heads, length, self.head_dim)
        make = lambda: torch.zeros(shape, dtype=self.dtype, device=self.device)  # noqa: E731
        return KVCache([make() for _ in self.layers], [make() for _ in self.layers])

    # ------------------------------------------------------------------ forward
    def _run(self, ids: Tensor, positions: Tensor, attend) -> Tensor:
        """Hidden states of the last position after every layer, ``attend(layer, q, k, v)`` doing attention."""
        h = self.embed(ids)
        cos, sin = self.rotary(h, positions)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        rows, width = ids.shape
        for n, layer in enumerate(self.layers):
            x = layer.norm1(h)
            q = layer.q(x).view(rows, width, -1, self.head_dim).transpose(1, 2)
            k = layer.k(x).view(rows, width, -1, self.head_dim).transpose(1, 2)
            v = layer.v(x).view(rows, width, -1, self.head_dim).transpose(1, 2)
            q = q * cos + _rotate_half(q) * sin
            k = k * cos + _rotate_half(k) * sin
            h = h + layer.o(attend(n, q, k, v))
            x = layer.norm2(h)
            h = h + layer.down(layer.act(layer.gate(x)) * layer.up(x))
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
            cache.keys[n].index_copy_(2, column, k)
            cache.values[n].index_copy_(2, column, v)
            return grouped_decode_attention(q, cache.keys[n][:, :, :upto], cache.values[n][:, :, :upto], allowed,
                                            self.scaling)  # fmt: skip

        return self.logits(self._run(ids[:, None], positions[:, None], attend))
