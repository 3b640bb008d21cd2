"""Optional vLLM generation backend (GPU users; ``pip install llm-marl-envs[vllm]``).

vLLM is imported lazily, so this module imports without it. The engines are *colocated*: they
live in the training process next to the :class:`~baselines.policies.Team`'s models and share
the GPU (``gpu_memory_utilization`` is split between engines). One ``vllm.LLM`` engine per
model slot of the team (one for "shared" and "lora" teams, one per agent for "separate");
in LoRA mode every agent's adapter is a ``LoRARequest`` on the one engine, and a single
``generate`` call serves all agents of a slot (vLLM batches per-prompt adapters).

Weights after an update (:meth:`VLLMBackend.sync_weights`, call it after every optimizer
step): full models are pushed with the engine model's ``load_weights`` (through
``LLM.apply_model`` where available; for that to reach the model in-process with vLLM's V1
engine set ``VLLM_ENABLE_V1_MULTIPROCESSING=0``); LoRA adapters are saved to a scratch
directory and re-registered under a fresh ``lora_int_id`` so vLLM reloads them.

Log-probs: ``SamplingParams(logprobs=0)`` returns the sampled token's log-prob. The engine is
built with ``logprobs_mode="processed_logprobs"`` so the temperature is applied, matching
:class:`~baselines.generation.types.GenerationConfig`'s convention and
``Team.sequence_logprobs(..., temperature=T)`` (with top-p/top-k, vLLM's processed log-probs
also include the truncation). On vLLM versions without ``logprobs_mode`` the raw (T=1)
log-probs come back, so only temperature 1 (or greedy) is accepted there.

Not tested in this repository's CI (no vLLM, no GPU): its test is skipped with
``pytest.importorskip("vllm")``.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from baselines.generation.types import GenerationConfig, GenOutput, GenRequest
from baselines.policies.team import PolicyKey, Team


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ImportError("VLLMBackend needs vLLM: pip install 'llm-marl-envs[vllm]' (GPU only)") from err
    return vllm


class VLLMBackend:
    """Sample with colocated vLLM engines; same interface as :class:`TransformersBackend`.

    Args:
        team: the agent -> policy map (its models are the ones trained).
        config: default sampling settings.
        gpu_memory_utilization: total GPU fraction for all engines (split evenly).
        llm_kwargs: extra ``vllm.LLM`` arguments (``max_model_len``, ``enforce_eager``...).
    """

    def __init__(
        self,
        team: Team,
        config: GenerationConfig | None = None,
        *,
        gpu_memory_utilization: float = 0.4,
        **llm_kwargs: Any,
    ) -> None:
        self._vllm = _import_vllm()
        self.team = team
        self.config = config or GenerationConfig()
        self._lora = team.config.mode == "lora"
        self._engines: dict[str, Any] = {}
        self._raw_logprobs = False
        slots = {key.model: team.agents_of(key)[0] for key in team.policy_keys()}
        share = gpu_memory_utilization / len(slots)
        for slot, agent in slots.items():
            kwargs = dict(
                model=team.checkpoint(agent),
                dtype=team.config.dtype,
                gpu_memory_utilization=share,
                enable_lora=self._lora,
                **llm_kwargs,
            )
            if self._lora:
                kwargs.update(max_lora_rank=team.config.lora_r, max_loras=len(team.agents))
            try:
                self._engines[slot] = self._vllm.LLM(logprobs_mode="processed_logprobs", **kwargs)
            except TypeError:  # older vLLM: no logprobs_mode, raw log-probs only
                self._engines[slot] = self._vllm.LLM(**kwargs)
                self._raw_logprobs = True
        self._lora_dir = Path(tempfile.mkdtemp(prefix="vllm_lora_"))
        self._lora_version = 0
        self._lora_requests: dict[str, Any] = {}
        self.sync_weights()

    # ----------------------------------------------------------------------------- weights
    def sync_weights(self) -> None:
        """Push the team's current weights into the engines (call after every optimizer step)."""
        if self._lora:
            self._lora_version += 1
            for key in self.team.policy_keys():
                target = self._lora_dir / f"v{self._lora_version}"
                self.team.base_model(key).save_pretrained(target, selected_adapters=[key.adapter])
                adapter_dir = target / key.adapter if (target / key.adapter).exists() else target
                uid = self._lora_version * 1000 + self.team.policy_keys().index(key) + 1
                self._lora_requests[key.adapter] = self._vllm.lora.request.LoRARequest(
                    key.adapter, uid, str(adapter_dir)
                )
            return
        for key in self.team.policy_keys():
            weights = list(self.team.base_model(key).state_dict().items())
            engine = self._engines[key.model]
            if hasattr(engine, "apply_model"):
                engine.apply_model(lambda model, w=weights: model.load_weights(w))
            else:  # vLLM V0 engine layout
                runner = engine.llm_engine.model_executor.driver_worker.model_runner
                runner.model.load_weights(weights)

    # ----------------------------------------------------------------------------- sampling
    def generate(
        self, requests: Sequence[GenRequest], config: GenerationConfig | None = None
    ) -> list[GenOutput]:
        """One :class:`GenOutput` per request, in request order; one vLLM ``generate`` per model slot."""
        config = config or self.config
        if self._raw_logprobs and config.temperature not in (0.0, 1.0):
            raise ValueError(
                "this vLLM version returns raw log-probs: use temperature 1 (or 0), or upgrade vLLM"
            )
        prompts = [
            [int(t) for t in r.prompt_ids]
            if r.prompt_ids is not None
            else self.team.encode_prompt(r.agent, r.messages)
            for r in requests
        ]
        for r, p in zip(requests, prompts):
            if not p:
                raise ValueError(f"empty prompt for agent {r.agent!r}")
            if config.max_prompt_tokens is not None and len(p) > config.max_prompt_tokens:
                raise ValueError(f"prompt of agent {r.agent!r} has {len(p)} tokens > max_prompt_tokens")
        groups: dict[str, list[int]] = defaultdict(list)
        for i, r in enumerate(requests):
            groups[self.team.policy_key(r.agent).model].append(i)
        outputs: list[GenOutput | None] = [None] * len(requests)
        for slot, idx in groups.items():
            agent = requests[idx[0]].agent
            params = self._vllm.SamplingParams(
                n=1,
                max_tokens=config.max_new_tokens,
                temperature=config.temperature,
                top_p=config.top_p,
                top_k=config.top_k if config.top_k > 0 else -1,
                seed=config.seed,
                logprobs=0,
                stop_token_ids=self.team.eos_token_ids(agent),
                skip_special_tokens=True,
            )
            keys: list[PolicyKey] = [self.team.policy_key(requests[i].agent) for i in idx]
            lora = [self._lora_requests[k.adapter] for k in keys] if self._lora else None
            results = self._engines[slot].generate(
                [{"prompt_token_ids": prompts[i]} for i in idx], params, lora_request=lora, use_tqdm=False
            )
            for i, key, res in zip(idx, keys, results):
                comp = res.outputs[0]
                ids = list(comp.token_ids)
                logps = [step[t].logprob for step, t in zip(comp.logprobs, ids)]
                outputs[i] = GenOutput(
                    agent=requests[i].agent,
                    prompt_ids=prompts[i],
                    completion_ids=ids,
                    logprobs=logps,
                    text=self.team.decode(requests[i].agent, ids),
                    finish_reason="stop" if comp.finish_reason == "stop" else "length",
                    policy=str(key),
                )
        return outputs  # type: ignore[return-value]
