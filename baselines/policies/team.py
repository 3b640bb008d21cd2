"""The team map: which model (and which LoRA adapter) plays each agent.

Three modes (:class:`TeamConfig.mode`):

``"shared"``
    One model plays every agent; the environment's system message tells it its role.
``"lora"``
    One frozen base model with one LoRA adapter per agent (peft: ``get_peft_model`` for the
    first agent, ``add_adapter`` for the others, ``set_adapter`` to switch). Only adapter
    weights are trained.
``"separate"``
    One full model per agent, possibly of different architectures with different tokenizers
    (a heterogeneous team): ``TeamConfig.models`` maps agents to checkpoints.

Every agent is served by a :class:`PolicyKey` (model, adapter). The trainer scores tokens
with :meth:`Team.sequence_logprobs` (gradients on), the KL reference with
:meth:`Team.reference_logprobs` (frozen copy, or the adapter-free base in LoRA mode), and
optimizes :meth:`Team.trainable_parameters`. Models are kept in ``eval()`` mode (no dropout),
so sampling and training see the same distribution; gradients flow all the same.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn
from transformers import PreTrainedTokenizerBase

from baselines.models.presets import resolve_model
from baselines.policies.loading import checkpointed_layers, frozen_copy, load_model, load_tokenizer
from baselines.policies.logprobs import completion_logprobs
from baselines.policies.lora import add_lora_adapters
from baselines.policies.vocab_mask import restrict_vocabulary

Mode = Literal["shared", "lora", "separate"]
DEFAULT_LORA_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
TEAM_FILE = "team.json"


@dataclass
class TeamConfig:
    """How the team is built.

    Args:
        mode: "shared", "lora" or "separate" (see the module docstring).
        model: checkpoint (local path, hub id, or a preset of :mod:`baselines.models` such as
            ``"smollm2-135m-instruct"``) of the shared model / LoRA base; in "separate"
            mode the fallback for agents missing from ``models``.
        models: agent -> checkpoint, for "separate" mode.
        lora_r, lora_alpha, lora_dropout, lora_target_modules: LoRA settings ("lora" mode).
        dtype: "float32", "bfloat16" or "float16".
        device: torch device string.
        reference: keep a frozen reference policy for KL (a frozen copy of each model; in LoRA
            mode the base model with the adapter disabled, which costs nothing).
        gradient_checkpointing: recompute decoder-layer activations in the backward pass of
            :meth:`Team.sequence_logprobs` (less memory, ~30% more compute); generation is
            unaffected (it runs with the KV cache, see :meth:`Team.generating`).
    """

    mode: Mode = "shared"
    model: str | None = None
    models: dict[str, str] = field(default_factory=dict)
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    lora_target_modules: tuple[str, ...] = DEFAULT_LORA_TARGETS
    dtype: str = "float32"
    device: str = "cpu"
    reference: bool = False
    gradient_checkpointing: bool = False


@dataclass(frozen=True)
class PolicyKey:
    """Identifies the weights that serve an agent: a model slot and, in LoRA mode, an adapter."""

    model: str
    adapter: str | None = None

    def __str__(self) -> str:
        return self.model if self.adapter is None else f"{self.model}+{self.adapter}"


def _adapter_name(agent: str) -> str:
    # peft stores adapters in ModuleDicts: names must be valid attribute-like keys.
    return "agent_" + re.sub(r"\W", "_", agent)


class Team:
    """Agent -> policy map over real ``transformers`` models (see the module docstring)."""

    def __init__(
        self,
        config: TeamConfig,
        agents: Sequence[str],
        models: dict[str, nn.Module],
        tokenizers: dict[str, PreTrainedTokenizerBase],
        keys: dict[str, PolicyKey],
        references: dict[str, nn.Module],
    ) -> None:
        self.config = config
        self.agents = list(agents)
        self._models = models
        self._tokenizers = tokenizers
        self._keys = keys
        self._references = references

    # ----------------------------------------------------------------------------- building
    @classmethod
    def from_config(cls, config: TeamConfig, agents: Sequence[str]) -> Team:
        """Load the checkpoints named by ``config`` and build the map for ``agents``."""
        agents = list(agents)
        if not agents or len(set(agents)) != len(agents):
            raise ValueError(f"agents must be a non-empty list of distinct names, got {agents}")
        models: dict[str, nn.Module] = {}
        tokenizers: dict[str, PreTrainedTokenizerBase] = {}
        keys: dict[str, PolicyKey] = {}
        refs: dict[str, nn.Module] = {}
        if config.mode in ("shared", "lora"):
            if not config.model:
                raise ValueError(f"mode {config.mode!r} needs TeamConfig.model")
            path = resolve_model(config.model)
            base = load_model(
                path,
                dtype=config.dtype,
                device=config.device,
                gradient_checkpointing=config.gradient_checkpointing,
            )
            tokenizers["shared"] = load_tokenizer(path)
            if config.mode == "shared":
                models["shared"] = base
                keys = {a: PolicyKey("shared") for a in agents}
                if config.reference:
                    refs["shared"] = frozen_copy(base)
            else:
                names = [_adapter_name(a) for a in agents]
                if len(set(names)) != len(names):
                    raise ValueError(f"agent names {agents} collide as adapter names {names}")
                models["shared"] = add_lora_adapters(base, config, names)
                keys = {a: PolicyKey("shared", _adapter_name(a)) for a in agents}
        elif config.mode == "separate":
            for a in agents:
                path = config.models.get(a, config.model)
                if not path:
                    raise ValueError(
                        f"separate mode: no checkpoint for agent {a!r} (TeamConfig.models or .model)"
                    )
                path = resolve_model(path)
                models[a] = load_model(
                    path,
                    dtype=config.dtype,
                    device=config.device,
                    gradient_checkpointing=config.gradient_checkpointing,
                )
                tokenizers[a] = load_tokenizer(path)
                keys[a] = PolicyKey(a)
                if config.reference:
                    refs[a] = frozen_copy(models[a])
            unknown = set(config.models) - set(agents)
            if unknown:
                raise ValueError(
                    f"TeamConfig.models names unknown agents {sorted(unknown)}; agents: {agents}"
                )
        else:
            raise ValueError(f"unknown team mode {config.mode!r}; expected 'shared', 'lora' or 'separate'")
        return cls(config, agents, models, tokenizers, keys, refs)

    # ----------------------------------------------------------------------------- lookup
    def _check_agent(self, agent: str) -> None:
        if agent not in self._keys:
            raise KeyError(f"unknown agent {agent!r}; team agents: {self.agents}")

    def policy_key(self, agent: str) -> PolicyKey:
        """The (model, adapter) that serves ``agent``."""
        self._check_agent(agent)
        return self._keys[agent]

    def policy_keys(self) -> list[PolicyKey]:
        """Distinct policy keys, in agent order."""
        return list(dict.fromkeys(self._keys[a] for a in self.agents))

    def agents_of(self, key: PolicyKey) -> list[str]:
        """Agents served by ``key``."""
        return [a for a in self.agents if self._keys[a] == key]

    def tokenizer(self, agent: str) -> PreTrainedTokenizerBase:
        """The tokenizer of ``agent``'s model."""
        self._check_agent(agent)
        return self._tokenizers[self._keys[agent].model]

    def model(self, agent: str) -> nn.Module:
        """``agent``'s model, with its adapter activated in LoRA mode (a PeftModel then)."""
        self._check_agent(agent)
        key = self._keys[agent]
        model = self._models[key.model]
        if key.adapter is not None:
            model.set_adapter(key.adapter)
            # peft freezes the inactive adapters on set_adapter; every agent's adapter stays trainable.
            model.set_requires_grad(list(model.peft_config), requires_grad=True)
        return model

    @contextmanager
    def generating(self, agent: str) -> Iterator[nn.Module]:
        """``agent``'s model (adapter active) set up for sampling: gradient checkpointing off, so the
        KV cache is used. Restores the training setup on exit."""
        model = self.model(agent)
        layers = [m for m in checkpointed_layers(model) if m.training]
        for layer in layers:
            layer.training = False
        try:
            yield model
        finally:
            for layer in layers:
                layer.training = True

    def checkpoint(self, agent: str) -> str:
        """The checkpoint ``agent``'s model was loaded from (the LoRA base in LoRA mode); a preset
        name resolves to its converted cache folder."""
        self._check_agent(agent)
        if self.config.mode == "separate":
            return resolve_model(self.config.models.get(agent, self.config.model))  # type: ignore[arg-type]
        return resolve_model(self.config.model)  # type: ignore[arg-type]

    def base_model(self, key: PolicyKey) -> nn.Module:
        """The module stored for ``key.model`` (a PeftModel in LoRA mode), without touching adapters."""
        return self._models[key.model]

    def all_models(self) -> list[nn.Module]:
        """Every model the team holds: the policies' models, then the frozen KL references."""
        return [*self._models.values(), *self._references.values()]

    def models_and_agents(self) -> dict[str, list[str]]:
        """Model slot -> the agents it serves (several per slot when shared or in LoRA mode)."""
        slots: dict[str, list[str]] = {}
        for agent in self.agents:
            slots.setdefault(self._keys[agent].model, []).append(agent)
        return slots

    def restrict_vocabulary(self, model_slot: str, allowed_ids: Sequence[int]) -> None:
        """Mask every output token of ``model_slot`` except ``allowed_ids``, in the policy and in
        its frozen reference alike (so the KL compares like with like)."""
        restrict_vocabulary(self._models[model_slot], allowed_ids)
        if model_slot in self._references:
            restrict_vocabulary(self._references[model_slot], allowed_ids)

    def device(self, agent: str) -> torch.device:
        return self._models[self.policy_key(agent).model].get_output_embeddings().weight.device

    @property
    def has_reference(self) -> bool:
        return self.config.reference

    # ----------------------------------------------------------------------------- tokens
    def encode_prompt(self, agent: str, messages: Sequence[Mapping[str, str]]) -> list[int]:
        """Token ids of ``messages`` through the chat template, ending with the assistant prompt."""
        tok = self.tokenizer(agent)
        text = tok.apply_chat_template(
            [dict(m) for m in messages], tokenize=False, add_generation_prompt=True
        )
        return list(tok(text, add_special_tokens=False)["input_ids"])

    def decode(self, agent: str, ids: Sequence[int]) -> str:
        """Text of ``ids`` without special tokens."""
        return self.tokenizer(agent).decode(list(ids), skip_special_tokens=True)

    def eos_token_ids(self, agent: str) -> list[int]:
        """Ids that end a completion: the tokenizer's EOS plus the model's generation-config EOS ids."""
        ids = {self.tokenizer(agent).eos_token_id}
        gen_eos = getattr(self._models[self.policy_key(agent).model].generation_config, "eos_token_id", None)
        ids.update(gen_eos if isinstance(gen_eos, list) else [gen_eos])
        return sorted(i for i in ids if i is not None)

    # ----------------------------------------------------------------------------- scoring
    def sequence_logprobs(
        self,
        agent: str,
        prompt_ids: Sequence[Sequence[int]],
        completion_ids: Sequence[Sequence[int]],
        *,
        with_entropy: bool = False,
        temperature: float = 1.0,
        batch_size: int | None = None,
    ) -> tuple[list[Tensor], list[Tensor] | None]:
        """Per-token log-probs of each completion under ``agent``'s current policy, WITH gradients.

        One batched forward per ``batch_size`` rows (all rows by default). ``temperature``
        divides the logits first; use the generation temperature to reproduce
        :attr:`GenOutput.logprobs`. Returns (log-probs, entropies or None), one 1-D float32
        tensor per row.
        """
        model = self.model(agent)
        return completion_logprobs(
            model,
            prompt_ids,
            completion_ids,
            pad_id=self.tokenizer(agent).pad_token_id,
            temperature=temperature,
            with_entropy=with_entropy,
            batch_size=batch_size,
        )

    def reference_logprobs(
        self,
        agent: str,
        prompt_ids: Sequence[Sequence[int]],
        completion_ids: Sequence[Sequence[int]],
        *,
        temperature: float = 1.0,
        batch_size: int | None = None,
    ) -> list[Tensor]:
        """Per-token log-probs under the frozen reference policy (no gradients); needs ``reference=True``."""
        if not self.config.reference:
            raise RuntimeError("this team has no reference policy; build it with TeamConfig(reference=True)")
        pad_id = self.tokenizer(agent).pad_token_id
        with torch.no_grad(), self._reference_model(agent) as ref:
            logps, _ = completion_logprobs(
                ref, prompt_ids, completion_ids, pad_id=pad_id, temperature=temperature, batch_size=batch_size
            )
        return logps

    @contextmanager
    def _reference_model(self, agent: str) -> Iterator[nn.Module]:
        key = self.policy_key(agent)
        if key.adapter is None:
            yield self._references[key.model]
            return
        model = self.model(agent)
        with model.disable_adapter():
            yield model

    # ----------------------------------------------------------------------------- parameters
    def _policy_parameters(self, key: PolicyKey) -> dict[str, nn.Parameter]:
        model = self._models[key.model]
        if key.adapter is None:
            return {n: p for n, p in model.named_parameters() if p.requires_grad}
        marker = f".{key.adapter}."
        return {n: p for n, p in model.named_parameters() if marker in n and "lora_" in n}

    def trainable_parameters(self, agent: str | None = None) -> dict[str, nn.Parameter]:
        """Named parameters trained for ``agent`` (whole model when shared/separate, its adapter in
        LoRA mode). With ``agent=None``: every trainable parameter of the team once, named
        ``"<policy key>/<parameter name>"`` -- what one optimizer over the team takes."""
        if agent is not None:
            return self._policy_parameters(self.policy_key(agent))
        return {
            f"{key}/{n}": p for key in self.policy_keys() for n, p in self._policy_parameters(key).items()
        }

    # ----------------------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, dict[str, Tensor]]:
        """Trained weights per policy key (``str(key)`` -> parameter name -> tensor, detached, on CPU)."""
        return {
            str(key): {n: p.detach().cpu().contiguous() for n, p in self._policy_parameters(key).items()}
            for key in self.policy_keys()
        }

    def load_state_dict(self, state: Mapping[str, Mapping[str, Tensor]]) -> None:
        """Copy weights saved by :meth:`state_dict` into the team (every key and name must match)."""
        keys = {str(k): k for k in self.policy_keys()}
        if set(state) != set(keys):
            raise ValueError(f"state has policies {sorted(state)}, team has {sorted(keys)}")
        for name, key in keys.items():
            params = self._policy_parameters(key)
            if set(state[name]) != set(params):
                missing, extra = set(params) - set(state[name]), set(state[name]) - set(params)
                raise ValueError(
                    f"policy {name}: missing {sorted(missing)[:5]}, unexpected {sorted(extra)[:5]}"
                )
            with torch.no_grad():
                for n, p in params.items():
                    p.copy_(state[name][n].to(p.device, p.dtype))

    def save(self, directory: str | Path, state: Mapping[str, Mapping[str, Tensor]] | None = None) -> Path:
        """Write ``team.json`` (config + agents) and one safetensors file of trained weights per policy
        (``state``: those weights as :meth:`state_dict` gives them, e.g. gathered from sharded models)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        state = self.state_dict() if state is None else state
        files = {}
        for i, (name, tensors) in enumerate(state.items()):
            files[name] = f"policy_{i}.safetensors"
            save_file(tensors, str(directory / files[name]))
        meta = {"config": asdict(self.config), "agents": self.agents, "files": files}
        (directory / TEAM_FILE).write_text(json.dumps(meta, indent=2))
        return directory

    @classmethod
    def load(cls, directory: str | Path, **overrides: Any) -> Team:
        """Rebuild a team saved by :meth:`save` (from its original checkpoints) and load its trained weights.

        ``overrides`` replace config fields (e.g. ``device="cuda"``)."""
        directory = Path(directory)
        meta = json.loads((directory / TEAM_FILE).read_text())
        cfg = meta["config"]
        cfg["lora_target_modules"] = tuple(cfg["lora_target_modules"])
        cfg.update(overrides)
        team = cls.from_config(TeamConfig(**cfg), meta["agents"])
        team.load_state_dict({name: load_file(str(directory / f)) for name, f in meta["files"].items()})
        return team

    def export_pretrained(self, directory: str | Path) -> dict[str, Path]:
        """Save each policy in Hugging Face format (full model + tokenizer, or peft adapters) for serving.

        Returns policy key string -> directory."""
        directory = Path(directory)
        out: dict[str, Path] = {}
        for key in self.policy_keys():
            target = directory / re.sub(r"\W", "_", str(key))
            agent = self.agents_of(key)[0]
            model = self._models[key.model]
            if key.adapter is None:
                model.save_pretrained(target)
            else:
                model.save_pretrained(target, selected_adapters=[key.adapter])
            self.tokenizer(agent).save_pretrained(target)
            out[str(key)] = target
        return out
