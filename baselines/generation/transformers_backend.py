"""Batched sampling with ``transformers``' ``model.generate``.

Requests are grouped by the policy that serves their agent (:meth:`Team.policy_key`); each
group is ONE left-padded ``generate`` call (attention mask, KV cache), never one sequence at a
time. In a LoRA team all adapters share one base model, and by default (``mixed_adapters``)
the whole team is one call: peft applies each row's own adapter (``adapter_names``).
The raw logits of every step (``output_logits``) give the sampling log-probs of the
generated tokens. Completions are cut after their first EOS.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import torch
from transformers import GenerationConfig as HFGenerationConfig

from baselines.generation.types import GenerationConfig, GenOutput, GenRequest
from baselines.policies.team import PolicyKey, Team


class TransformersBackend:
    """Generate completions for a :class:`Team` with ``model.generate``.

    Args:
        team: the agent -> policy map.
        config: default sampling settings (``generate`` may override them per call).
        max_batch_size: most sequences per ``generate`` call (None: a whole group at once).
        mixed_adapters: in a LoRA team, one call for all agents with per-row adapters; False:
            one call per adapter.
        max_padding: when set (e.g. 1.5), a group is sorted by prompt length and split into
            calls whose padded size (rows x (longest prompt + max_new_tokens)) stays within
            this factor of the real size; helps when prompt lengths vary a lot and attention
            dominates (long prompts, small models, CPU). None: one call per group.
    """

    def __init__(
        self,
        team: Team,
        config: GenerationConfig | None = None,
        *,
        max_batch_size: int | None = None,
        mixed_adapters: bool = True,
        max_padding: float | None = None,
    ):
        if max_padding is not None and max_padding < 1:
            raise ValueError(f"max_padding must be >= 1, got {max_padding}")
        self.team = team
        self.config = config or GenerationConfig()
        self.max_batch_size = max_batch_size
        self.mixed_adapters = mixed_adapters
        self.max_padding = max_padding
        self._calls = 0

    def sync_weights(self) -> None:
        """Nothing to do: generation uses the training weights themselves."""

    def prompt_ids(self, request: GenRequest) -> list[int]:
        if request.prompt_ids is not None:
            return [int(t) for t in request.prompt_ids]
        return self.team.encode_prompt(request.agent, request.messages)

    def generate(
        self, requests: Sequence[GenRequest], config: GenerationConfig | None = None
    ) -> list[GenOutput]:
        """One :class:`GenOutput` per request, in request order."""
        config = config or self.config
        call = self._calls
        self._calls += 1
        prompts = [self.prompt_ids(r) for r in requests]
        for r, p in zip(requests, prompts):
            if not p:
                raise ValueError(f"empty prompt for agent {r.agent!r}")
            if config.max_prompt_tokens is not None and len(p) > config.max_prompt_tokens:
                raise ValueError(
                    f"prompt of agent {r.agent!r} has {len(p)} tokens > max_prompt_tokens={config.max_prompt_tokens}"
                )
        groups: dict[PolicyKey, list[int]] = defaultdict(list)
        for i, r in enumerate(requests):
            key = self.team.policy_key(r.agent)
            groups[PolicyKey(key.model) if self.mixed_adapters else key].append(i)
        outputs: list[GenOutput | None] = [None] * len(requests)
        with torch.no_grad(), torch.random.fork_rng(devices=self._cuda_devices()):
            if config.seed is not None:
                torch.manual_seed(config.seed + call)
            for idx in groups.values():
                for chunk in self._chunks(idx, [len(prompts[i]) for i in idx], config.max_new_tokens):
                    agents = [requests[i].agent for i in chunk]
                    results = self._generate_group(agents, [prompts[i] for i in chunk], config)
                    for i, out in zip(chunk, results):
                        outputs[i] = out
        return outputs  # type: ignore[return-value]

    def _chunks(self, idx: list[int], lengths: list[int], new_tokens: int) -> list[list[int]]:
        """Split one group into generate calls (max_batch_size; length buckets when max_padding is set)."""
        cap = self.max_batch_size or max(len(idx), 1)
        if self.max_padding is None:
            return [idx[s : s + cap] for s in range(0, len(idx), cap)]
        order = sorted(range(len(idx)), key=lambda j: lengths[j])
        chunks: list[list[int]] = []
        chunk: list[int] = []
        real = 0
        for j in order:
            size = lengths[j] + new_tokens  # the longest so far: rows are sorted by length
            if chunk and (len(chunk) >= cap or (len(chunk) + 1) * size > self.max_padding * (real + size)):
                chunks.append(chunk)
                chunk, real = [], 0
            chunk.append(idx[j])
            real += size
        return [*chunks, chunk] if chunk else chunks

    def _cuda_devices(self) -> list[int]:
        devs = {self.team.device(a) for a in self.team.agents}
        return sorted({d.index or 0 for d in devs if d.type == "cuda"})

    def _generate_group(
        self, agents: list[str], prompts: list[list[int]], config: GenerationConfig
    ) -> list[GenOutput]:
        agent = agents[0]  # every agent of the group shares the model and tokenizer
        keys = [self.team.policy_key(a) for a in agents]
        adapters = [k.adapter for k in keys]
        extra = {"adapter_names": adapters} if len(set(adapters)) > 1 else {}
        tok = self.team.tokenizer(agent)
        device = self.team.device(agent)
        pad_id = tok.pad_token_id
        eos_ids = self.team.eos_token_ids(agent)
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            mask[i, width - len(p) :] = 1
        hf_config = HFGenerationConfig(
            max_new_tokens=config.max_new_tokens,
            do_sample=not config.greedy,
            temperature=config.temperature if not config.greedy else None,
            top_p=config.top_p if not config.greedy else None,
            top_k=config.top_k if not config.greedy else None,
            repetition_penalty=1.0,
            pad_token_id=pad_id,
            eos_token_id=eos_ids,
            bos_token_id=tok.bos_token_id,
            use_cache=True,
            return_dict_in_generate=True,
            output_logits=True,
        )
        with self.team.generating(agent) as model:
            out = model.generate(
                input_ids=ids.to(device), attention_mask=mask.to(device), generation_config=hf_config, **extra
            )
        new = out.sequences[:, width:]
        logits = torch.stack(out.logits, dim=1).float() / config.scoring_temperature
        logp = torch.log_softmax(logits, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        eos = torch.tensor(eos_ids, device=new.device)
        results = []
        for i, a in enumerate(agents):
            row = new[i].tolist()
            stops = torch.isin(new[i], eos).nonzero()
            n = int(stops[0]) + 1 if len(stops) else len(row)
            completion = row[:n]
            results.append(
                GenOutput(
                    agent=a,
                    prompt_ids=prompts[i],
                    completion_ids=completion,
                    logprobs=logp[i, :n].tolist(),
                    text=tok.decode(completion, skip_special_tokens=True),
                    finish_reason="stop" if len(stops) else "length",
                    policy=str(keys[i]),
                )
            )
        return results
