"""The team map: which model (and which LoRA adapter) plays each agent.

Three modes (:class:`TeamConfig.mode`):

``"shared"``
    One model plays every agent; the environment's system message tells it its role.
``"lora"``
    One frozen base model with one LoRA adapter per agent (peft: ``get_peft_model`` for the
    first agent, ``add_adapter`` for the others, ``set_adapter`` to switch). Only adapter
    weights are trained. With ``TeamConfig.shared_adapter``: ONE adapter plays every agent
    (the single-model baseline every multi-agent result must beat; ``model.sharing: single_model``).
``"separate"``
    One full model per agent, possibly of different architectures with different tokenizers
    (a heterogeneous team): ``TeamConfig.models`` maps agents to checkpoints, ``TeamConfig.devices``
    agents to devices.

Every agent is served by a :class:`PolicyKey` (model, adapter). The trainer scores tokens
with :meth:`Team.sequence_logprobs` (gradients on), the KL reference with
:meth:`Team.reference_logprobs` (frozen copy, or the adapter-free base in LoRA mode), and
optimizes :meth:`Team.trainable_parameters`. Models are kept in ``eval()`` mode (no dropout),
so sampling and training see the same distribution; gradients flow all the same.

This module is the team object (lookup, tokens, scoring, trained parameters). Its config and
policy keys live in :mod:`baselines.policies.team_config`, the loading of its models in
:mod:`baselines.policies.team_build`, the LoRA adapters in :mod:`baselines.policies.lora`, its
files on disk in :mod:`baselines.policies.team_files`; the names are re-exported here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from transformers import PreTrainedTokenizerBase

from baselines.models.presets import resolve_model
from baselines.policies.features import last_hidden_states
from baselines.policies.loading import checkpointed_layers
from baselines.policies.logprobs import completion_logprobs
from baselines.policies.team_build import build_team_parts
from baselines.policies.team_config import DEFAULT_LORA_TARGETS, Mode, PolicyKey, TeamConfig
from baselines.policies.team_files import TEAM_FILE, read_team, write_team
from baselines.policies.vocab_mask import restrict_vocabulary, restrict_vocabulary_by_adapter

__all__ = ["DEFAULT_LORA_TARGETS", "TEAM_FILE", "Mode", "PolicyKey", "Team", "TeamConfig"]


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
        parts = build_team_parts(config, agents)
        return cls(config, agents, parts.models, parts.tokenizers, parts.keys, parts.references)

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

    def restrict_agent_vocabularies(self, model_slot: str, allowed_ids: Mapping[str, Sequence[int] | None]) -> None:
        """LoRA mode: mask each agent of ``model_slot`` to its own ``allowed_ids[agent]`` (None: unmasked),
        by the adapter active when the model runs; sampling must then not mix adapters in one batch
        (:attr:`per_agent_masks` tells the trainer)."""
        agents = self.models_and_agents().get(model_slot, [])
        if self.config.mode != "lora" or not agents:
            raise ValueError(f"per-agent vocabulary masks need a LoRA slot with agents, got {model_slot!r}")
        unknown = set(allowed_ids) - set(agents)
        if unknown:
            raise KeyError(f"agents {sorted(unknown)} are not served by {model_slot!r} ({agents})")
        restrict_vocabulary_by_adapter(self._models[model_slot],
                                       {self._keys[a].adapter: ids for a, ids in allowed_ids.items()})
        self.per_agent_masks = True

    #: whether some LoRA slot masks its agents differently (no mixed-adapter batches then)
    per_agent_masks: bool = False

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
        entropy_grad: bool = True,
        temperature: float = 1.0,
        batch_size: int | None = None,
        share: bool = True,
    ) -> tuple[list[Tensor], list[Tensor] | None]:
        """Per-token log-probs of each completion under ``agent``'s current policy, WITH gradients.

        One batched forward per ``batch_size`` rows (all rows by default). ``temperature``
        divides the logits first; use the generation temperature to reproduce
        :attr:`GenOutput.logprobs`. Returns (log-probs, entropies or None), one 1-D float32
        tensor per row; ``entropy_grad=False`` leaves the entropies out of the graph. Rows sharing a
        context or a prefix share their forward (:func:`~baselines.policies.logprobs.completion_logprobs`;
        ``share=False``: every row in full).
        """
        model = self.model(agent)
        return completion_logprobs(
            model,
            prompt_ids,
            completion_ids,
            pad_id=self.tokenizer(agent).pad_token_id,
            temperature=temperature,
            with_entropy=with_entropy,
            entropy_grad=entropy_grad,
            batch_size=batch_size,
            share=share,
        )

    def prompt_features(self, agent: str, prompt_ids: Sequence[Sequence[int]], *,
                        batch_size: int | None = None) -> Tensor:
        """``agent``'s policy model's last hidden state at each prompt's last token (no gradients; the
        features of the actor-critic schemes' value heads)."""
        with self.generating(agent) as model:
            return last_hidden_states(model, prompt_ids, pad_id=self.tokenizer(agent).pad_token_id,
                                      batch_size=batch_size)

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
        return write_team(directory, self.config, self.agents, self.state_dict() if state is None else state)

    @classmethod
    def load(cls, directory: str | Path, **overrides: Any) -> Team:
        """Rebuild a team saved by :meth:`save` (from its original checkpoints) and load its trained weights.

        ``overrides`` replace config fields (e.g. ``device="cuda"``)."""
        config, agents, state = read_team(directory, **overrides)
        team = cls.from_config(config, agents)
        team.load_state_dict(state)
        return team

    def export_pretrained(self, directory: str | Path) -> dict[str, Path]:
        """Save each policy in Hugging Face format (full model + tokenizer, or peft adapters) for serving.

        Returns policy key string -> directory."""
        directory = Path(directory)
        out: dict[str, Path] = {}
        for key in self.policy_keys():
            target = directory / re.sub(r"\W", "_", str(key))
            model = self.base_model(key)
            if key.adapter is None:
                model.save_pretrained(target)
            else:
                model.save_pretrained(target, selected_adapters=[key.adapter])
            self.tokenizer(self.agents_of(key)[0]).save_pretrained(target)
            out[str(key)] = target
        return out
