"""Batched sampling with ``transformers``' ``model.generate``.

Requests are grouped by the policy that serves their agent (:meth:`Team.policy_key`); each
group is ONE left-padded ``generate`` call (attention mask, KV cache), never one sequence at a
time. In a LoRA team all adapters share one base model, and by default (``mixed_adapters``)
the whole team is one call: peft applies each row's own adapter (``adapter_names``).
Completions are cut after their first EOS.

Two things keep a call cheap when a trainer samples G completions of each prompt (GRPO groups):

* **Prefix sharing** (``share_prompts``, default on): identical prompts of a call (same policy,
  same adapter) are prefilled ONCE; their KV cache is then replicated to every copy and
  ``generate`` continues from it, so a batch of T prompts x G copies costs T prompt forwards
  instead of T x G. Sampling is unchanged: every row still draws its own tokens from the same
  distribution in the same ``generate`` call.
* **Length-bucketed prefill** (``prefill_padding``, default 1.25): the distinct prompts are
  prefilled in buckets of similar length and their caches left-padded to the call's width, so
  a short prompt is not processed padded to the longest one (see :mod:`baselines.generation.prefill`);
  decoding stays one ``generate`` call for all rows.
* **Streaming log-probs**: a logits processor placed before the sampling warpers keeps only the
  current step's ``log_softmax(logits / temperature)`` and gathers the previous step's sampled
  token from it, instead of keeping every step's full-vocabulary logits (``output_logits``:
  rows x steps x vocabulary floats, 1.6 GB for 32 rows x 256 tokens x 49k vocabulary).

``decode="fast"`` replaces ``generate`` by the lean loop of :mod:`baselines.generation.fast_decode`
(same sampling distribution, same recorded log-probs, prefix sharing kept). For Llama-family models
the whole team -- every agent's rows, each with its own LoRA adapter -- decodes in one forward per
token (:mod:`baselines.generation.team_decoder`); on CUDA that step is a CUDA graph.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections import defaultdict
from collections.abc import Sequence

import torch
from transformers import GenerationConfig as HFGenerationConfig
from transformers import LogitsProcessor, LogitsProcessorList

from baselines.generation.cuda_graphs import DecodeGraphs
from baselines.generation.fast_decode import DecodeOptions, decode
from baselines.generation.prefill import CACHE_KW, length_buckets, prefill_cache
from baselines.generation.team_decoder import TeamDecoder, unsupported
from baselines.generation.types import GenerationConfig, GenOutput, GenRequest
from baselines.policies.team import PolicyKey, Team


class SampledLogprobs(LogitsProcessor):
    """Records ``log_softmax(raw logits / temperature)`` of each sampled token, one step behind.

    Placed before the sampling warpers (``generate`` runs user processors first), it sees the
    raw float32 logits of step t, keeps their log-softmax, and at step t+1 gathers the token
    sampled at t (the last column of ``input_ids``). Only one (rows x vocabulary) tensor is
    alive at a time. :meth:`logprobs` returns (rows x new tokens) for the generated ``new`` ids.
    """

    def __init__(self, temperature: float):
        self.temperature = temperature
        self._steps: list[torch.Tensor] = []
        self._pending: torch.Tensor | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self._pending is not None:
            self._steps.append(self._gather(input_ids[:, -1]))
        self._pending = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def _gather(self, tokens: torch.Tensor) -> torch.Tensor:
        assert self._pending is not None
        return self._pending.gather(-1, tokens.to(self._pending.device).unsqueeze(-1)).squeeze(-1)

    def logprobs(self, new: torch.Tensor) -> torch.Tensor:
        """(rows, n) log-probs of ``new`` (rows, n), the tokens ``generate`` returned."""
        n = new.shape[1]
        steps = self._steps[:n]  # generate may run (and undo) a step past the last token it returns
        if len(steps) < n:
            steps.append(self._gather(new[:, n - 1]))
        if len(steps) != n:
            raise RuntimeError(f"recorded {len(steps)} sampling steps for {n} generated tokens")
        return torch.stack(steps, dim=1) if steps else new.new_zeros((new.shape[0], 0), dtype=torch.float32)


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
        share_prompts: prefill identical prompts of a call once and replicate their KV cache
            (see the module docstring); False: every row is prefilled on its own.
        prefill_padding: prefill the distinct prompts of a call in length buckets whose padded
            size stays within this factor of the real size (None: one padded prefill).
        decode_segment: decode in ``generate`` calls of this many tokens, dropping the rows that
            stopped between them (None: one call up to ``max_new_tokens``); with ``decode="fast"``
            the dynamic cache's row-dropping period.
        decode: ``"generate"`` (``model.generate``) or ``"fast"`` (the lean loop; see the module
            docstring).
        team_decoder: fast decoding through :class:`~baselines.generation.team_decoder.TeamDecoder`
            (None: wherever the model's architecture allows it; False: the model's own forward).
        cuda_graphs: capture the team decoder's step as a CUDA graph (None: on CUDA; never on a CPU).
    """

    def __init__(
        self,
        team: Team,
        config: GenerationConfig | None = None,
        *,
        max_batch_size: int | None = None,
        mixed_adapters: bool = True,
        max_padding: float | None = None,
        share_prompts: bool = True,
        prefill_padding: float | None = 1.25,
        decode_segment: int | None = 32,
        decode: str = "generate",
        team_decoder: bool | None = None,
        cuda_graphs: bool | None = None,
    ):
        if decode not in ("generate", "fast"):
            raise ValueError(f"decode must be 'generate' or 'fast', got {decode!r}")
        for name, factor in (("max_padding", max_padding), ("prefill_padding", prefill_padding)):
            if factor is not None and factor < 1:
                raise ValueError(f"{name} must be >= 1, got {factor}")
        self.team = team
        self.config = config or GenerationConfig()
        self.max_batch_size = max_batch_size
        self.mixed_adapters = mixed_adapters
        self.max_padding = max_padding
        self.share_prompts = share_prompts
        self.prefill_padding = prefill_padding
        if decode_segment is not None and decode_segment < 1:
            raise ValueError(f"decode_segment must be >= 1, got {decode_segment}")
        self.decode_segment = decode_segment
        self.decode = decode
        self.team_decoder = team_decoder
        self.cuda_graphs = cuda_graphs
        self._decoders: dict[str, TeamDecoder | None] = {}  # model slot -> its team decoder (None: unsupported)
        #: the CUDA graphs of the team decoders' steps (their captures, replays and any failure: ``summary()``)
        self.graphs: DecodeGraphs | None = None
        self._calls = 0

    def sync_weights(self) -> None:
        """Nothing to do: generation reads the training weights themselves (the team decoder copies the
        adapters' current weights at the start of every call)."""

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
                for chunk in self._chunks(idx, [prompts[i] for i in idx], config.max_new_tokens):
                    agents = [requests[i].agent for i in chunk]
                    results = self._generate_group(agents, [prompts[i] for i in chunk], config)
                    for i, out in zip(chunk, results):
                        outputs[i] = out
        return outputs  # type: ignore[return-value]

    def sampler_logprobs(self, outputs: Sequence[GenOutput], config: GenerationConfig | None = None) -> list[list[float]]:
        """The fast path's own log-probs of given completions: their tokens fed through the same decode step in
        place of drawn ones (eagerly; one call per model). What the sampler would record for these tokens --
        for checking it against the trainer on identical tokens (:mod:`baselines.bench.fidelity`)."""
        if self.decode != "fast":
            raise ValueError("sampler_logprobs needs decode='fast'")
        config = config or self.config
        width = max((len(o.completion_ids) for o in outputs), default=0)
        if width == 0:
            return [[] for _ in outputs]
        config = dataclasses.replace(config, max_new_tokens=width, seed=None)
        groups: dict[str, list[int]] = defaultdict(list)
        for i, o in enumerate(outputs):
            groups[self.team.policy_key(o.agent).model].append(i)
        result: list[list[float]] = [[] for _ in outputs]
        with torch.no_grad():
            for idx in groups.values():
                pad = self.team.tokenizer(outputs[idx[0]].agent).pad_token_id
                forced = torch.tensor([outputs[i].completion_ids + [pad] * (width - len(outputs[i].completion_ids))
                                       for i in idx])  # fmt: skip
                scored = self._generate_group([outputs[i].agent for i in idx], [outputs[i].prompt_ids for i in idx],
                                              config, forced)  # fmt: skip
                for i, out in zip(idx, scored):
                    result[i] = out.logprobs[: len(outputs[i].completion_ids)]
        return result

    def _chunks(self, idx: list[int], prompts: list[list[int]], new_tokens: int) -> list[list[int]]:
        """Split one group into generate calls (max_batch_size; length buckets when max_padding is set).

        When the group must be split, copies of one prompt are kept next to each other, so they
        land in the same call and share their prefill."""
        cap = self.max_batch_size or max(len(idx), 1)
        lengths = [len(p) for p in prompts]
        if self.max_padding is None:
            if len(idx) > cap and self.share_prompts:
                first: dict[tuple[int, ...], int] = {}
                for j, p in enumerate(prompts):
                    first.setdefault(tuple(p), j)
                idx = [idx[j] for j in sorted(range(len(idx)), key=lambda j: first[tuple(prompts[j])])]
            return [idx[s : s + cap] for s in range(0, len(idx), cap)]
        order = sorted(range(len(idx)), key=lambda j: (lengths[j], prompts[j]))
        return [
            [idx[j] for j in b] for b in length_buckets(order, lengths, self.max_padding, cap, new_tokens)
        ]

    def _cuda_devices(self) -> list[int]:
        devs = {self.team.device(a) for a in self.team.agents}
        return sorted({d.index or 0 for d in devs if d.type == "cuda"})

    def _generate_group(
        self, agents: list[str], prompts: list[list[int]], config: GenerationConfig, forced: torch.Tensor | None = None
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
        hf_config = dict(
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
        )
        with self.team.generating(agent) as model:
            if self.decode == "fast":
                completions, logps, stopped = self._fast(model, keys, ids, mask, config, eos_ids, pad_id, device,
                                                         forced)  # fmt: skip
            else:
                cache = prefill_cache(
                    model, ids, mask, adapters, device, share=self.share_prompts, max_padding=self.prefill_padding
                )
                completions, logps, stopped = self._decode(
                    model, ids, mask, cache, extra, config, hf_config, device
                )
        results = []
        for i, a in enumerate(agents):
            results.append(
                GenOutput(
                    agent=a,
                    prompt_ids=prompts[i],
                    completion_ids=completions[i],
                    logprobs=logps[i],
                    text=tok.decode(completions[i], skip_special_tokens=True),
                    finish_reason="stop" if stopped[i] else "length",
                    policy=str(keys[i]),
                )
            )
        return results

    def decoder(self, model: torch.nn.Module, key: PolicyKey) -> TeamDecoder | None:
        """The team decoder of ``key``'s model (built on first use), or None where it does not apply: switched
        off, or the architecture is outside its family (the reason is warned once)."""
        known = self._decoders.get(key.model, False)
        if known is not False and (known is None or known.model is model):
            return known
        decoder = None
        if self.team_decoder is not False:
            reason = unsupported(model)
            if reason is None:
                decoder = TeamDecoder(model)
            elif self.team_decoder:
                raise ValueError(f"team_decoder=True but this model cannot use it: {reason}")
            else:
                warnings.warn(f"fast decoding through the model's own forward for {key.model!r}: {reason}", stacklevel=3)
        self._decoders[key.model] = decoder
        return decoder

    def _fast(
        self, model: torch.nn.Module, keys: list[PolicyKey], ids: torch.Tensor, mask: torch.Tensor,
        config: GenerationConfig, eos_ids: list[int], pad_id: int, device: torch.device,
        forced: torch.Tensor | None = None,
    ) -> tuple[list[list[int]], list[list[float]], list[bool]]:
        """The lean decode loop: the team decoder (all adapters in one forward), else the model's own forward."""
        adapters = [k.adapter for k in keys]
        engine: torch.nn.Module | TeamDecoder = self.decoder(model, keys[0]) or model
        graphs = None
        if isinstance(engine, TeamDecoder) and device.type == "cuda" and self.cuda_graphs is not False:
            if self.graphs is None:
                self.graphs = DecodeGraphs()
            graphs = self.graphs
        opts = DecodeOptions(share_prompts=self.share_prompts, prefill_padding=self.prefill_padding,
                             segment=self.decode_segment or 32)  # fmt: skip
        out = decode(engine, ids, mask, config, eos_ids, pad_id, device, opts, graphs, adapters=adapters, forced=forced)
        return out.completions, out.logprobs, out.stopped

    def _decode(
        self,
        model: torch.nn.Module,
        ids: torch.Tensor,
        mask: torch.Tensor,
        cache: object | None,
        extra: dict,
        config: GenerationConfig,
        hf_config: dict,
        device: torch.device,
    ) -> tuple[list[list[int]], list[list[float]], list[bool]]:
        """Every row's completion (cut after its first EOS), its log-probs and whether it stopped.

        One ``generate`` call per ``decode_segment`` tokens, each continuing from the previous
        one's KV cache; rows that stopped are dropped from the batch between segments, so the
        batch does not keep decoding finished rows until the longest one ends."""
        eos = set(hf_config["eos_token_id"])
        rows = list(range(ids.shape[0]))  # the original row of every row still decoding
        completions: list[list[int]] = [[] for _ in rows]
        logps: list[list[float]] = [[] for _ in rows]
        stopped = [False for _ in rows]
        left = config.max_new_tokens
        while True:
            n = min(self.decode_segment or left, left)
            recorder = SampledLogprobs(config.scoring_temperature)
            names = {"adapter_names": [extra["adapter_names"][r] for r in rows]} if extra else {}
            out = model.generate(
                input_ids=ids.to(device), attention_mask=mask.to(device),
                generation_config=HFGenerationConfig(max_new_tokens=n, **hf_config),
                logits_processor=LogitsProcessorList([recorder]), **names,
                **({CACHE_KW: cache} if cache is not None else {}),
            )  # fmt: skip
            new = out.sequences[:, ids.shape[1] :]
            lp = recorder.logprobs(new).tolist()
            keep = []
            for k, (r, row) in enumerate(zip(rows, new.tolist())):
                stop = next((j for j, t in enumerate(row) if t in eos), None)
                cut = len(row) if stop is None else stop + 1
                completions[r] += row[:cut]
                logps[r] += lp[k][:cut]
                stopped[r] = stop is not None
                if stop is None:
                    keep.append(k)
            left -= new.shape[1]
            if not keep or left <= 0:
                return completions, logps, stopped
            cache = out.get(CACHE_KW)
            if cache is None or cache.get_seq_length() != out.sequences.shape[1] - 1:
                cache = None  # not a cache we can continue from: generate prefills the kept rows again
            mask = torch.cat([mask.to(new.device), torch.ones_like(new)], dim=1)
            ids = out.sequences
            if len(keep) < len(rows):
                index = torch.tensor(keep, device=new.device)
                ids, mask = ids[index], mask[index]
                if cache is not None:
                    cache.batch_select_indices(index)
                rows = [rows[k] for k in keep]
