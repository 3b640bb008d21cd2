"""Generation as a service: sample from a running vLLM server (its OpenAI-compatible HTTP API).

The server can live on other GPUs or another machine; the trainer keeps only the trained
weights. Start it on the team's base model with LoRA enabled and runtime adapter loading on,
and with log-probs after the temperature (the convention of :class:`GenerationConfig`)::

    VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve <base model> --enable-lora \\
        --max-lora-rank <model.lora_r> --max-loras <agents> --logprobs-mode processed_logprobs

then train with ``generation.backend=vllm_server generation.vllm_server_url=http://host:8000
generation.vllm_adapter_dir=<folder the server can read>`` (docs/scaling.md).

- Sampling: one ``POST /v1/completions`` per request (token-id prompt, ``logprobs=0``,
  ``return_tokens_as_token_ids``), sent concurrently so the server batches them; request j of
  call i has seed ``seed + i * 1_000_003 + j``, so identical prompts (a GRPO group) still get
  different samples and a run is reproducible against the same server.
- Weights (:meth:`VLLMServerBackend.sync_weights`, after every optimizer step): each agent's
  LoRA adapter is saved under ``adapter_dir/v<k>/`` and the server is asked to load it
  (``POST /v1/load_lora_adapter``) under the name ``<adapter>-v<k>``; the previous version is
  unloaded. Only LoRA teams (``model.sharing=lora``): vLLM's server has no stable endpoint to
  replace full weights, so full-model training raises here (use the colocated
  :class:`~baselines.generation.vllm_backend.VLLMBackend` for that).

Tested only where vllm and a GPU are present (``tests/baselines/test_generation_vllm_server.py``
starts a real ``vllm serve``); not in this repository's CI.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from baselines.generation.types import GenerationConfig, GenOutput, GenRequest
from baselines.policies.team import Team


class VLLMServerError(RuntimeError):
    """The vLLM server could not be reached or refused a request (infrastructure, not a wrong answer)."""


class VLLMServerBackend:
    """Sample from a vLLM OpenAI-compatible server; same interface as :class:`TransformersBackend`.

    Args:
        team: the trained team (LoRA mode); its adapters are pushed to the server.
        config: default sampling settings.
        url: the server's base address, e.g. ``http://127.0.0.1:8000``.
        adapter_dir: a folder this process writes and the server reads (shared storage when the
            server is on another machine).
        max_concurrency: requests in flight at once.
        timeout_s: per-request HTTP timeout.
        tag: put in the served adapter names (``<adapter>-<tag>-v<k>``), so that several trainer
            ranks can share one server.
    """

    def __init__(self, team: Team, config: GenerationConfig | None = None, *, url: str, adapter_dir: str | Path,
                 max_concurrency: int = 64, timeout_s: float = 600.0, tag: str = "") -> None:
        if team.config.mode != "lora":
            raise ValueError("VLLMServerBackend syncs LoRA adapters only: use model.sharing=lora, or the "
                             "colocated vllm backend for full-model training")
        self.team = team
        self.config = config or GenerationConfig()
        self.url = url.rstrip("/")
        self.adapter_dir = Path(adapter_dir)
        self.max_concurrency = max_concurrency
        self.timeout_s = timeout_s
        self.tag = f"-{tag}" if tag else ""
        self._calls = 0
        self._version = 0
        self._served: dict[str, str] = {}  # adapter -> name the server knows its newest version by
        self.sync_weights()

    # ----------------------------------------------------------------------------- HTTP
    def _post(self, path: str, payload: dict[str, Any]) -> Any:
        request = urllib.request.Request(self.url + path, data=json.dumps(payload).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                body = response.read().decode()
        except urllib.error.HTTPError as err:
            raise VLLMServerError(f"{path}: HTTP {err.code}: {err.read().decode(errors='replace')[:500]}") from err
        except (urllib.error.URLError, OSError) as err:
            raise VLLMServerError(f"{path}: cannot reach the vLLM server at {self.url}: {err}") from err
        try:
            return json.loads(body)
        except json.JSONDecodeError:
            return body  # the adapter endpoints answer plain text

    # ----------------------------------------------------------------------------- weights
    def sync_weights(self) -> None:
        """Save every agent's adapter as a new version and have the server load it (old one unloaded)."""
        self._version += 1
        target = self.adapter_dir / f"v{self._version}"
        for key in self.team.policy_keys():
            self.team.base_model(key).save_pretrained(target, selected_adapters=[key.adapter])
            path = target / key.adapter if (target / key.adapter).exists() else target
            name = f"{key.adapter}{self.tag}-v{self._version}"
            self._post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(path.resolve())})
            old = self._served.get(key.adapter)
            self._served[key.adapter] = name
            if old is not None:
                self._post("/v1/unload_lora_adapter", {"lora_name": old})

    # ----------------------------------------------------------------------------- sampling
    def generate(self, requests: Sequence[GenRequest], config: GenerationConfig | None = None) -> list[GenOutput]:
        """One :class:`GenOutput` per request, in request order."""
        config = config or self.config
        call = self._calls
        self._calls += 1
        prompts = [[int(t) for t in r.prompt_ids] if r.prompt_ids is not None
                   else self.team.encode_prompt(r.agent, r.messages) for r in requests]
        for r, p in zip(requests, prompts):
            if not p:
                raise ValueError(f"empty prompt for agent {r.agent!r}")
            if config.max_prompt_tokens is not None and len(p) > config.max_prompt_tokens:
                raise ValueError(f"prompt of agent {r.agent!r} has {len(p)} tokens > max_prompt_tokens")
        jobs = [(r, p, None if config.seed is None else config.seed + call * 1_000_003 + j)
                for j, (r, p) in enumerate(zip(requests, prompts))]
        with ThreadPoolExecutor(max_workers=max(1, min(self.max_concurrency, len(jobs)))) as pool:
            return list(pool.map(lambda job: self._complete(*job, config), jobs))

    def _complete(self, request: GenRequest, prompt: list[int], seed: int | None,
                  config: GenerationConfig) -> GenOutput:
        key = self.team.policy_key(request.agent)
        payload: dict[str, Any] = {
            "model": self._served[key.adapter], "prompt": prompt, "max_tokens": config.max_new_tokens,
            "temperature": config.temperature, "top_p": config.top_p, "top_k": config.top_k or -1,
            "logprobs": 0, "return_tokens_as_token_ids": True, "skip_special_tokens": True,
            "stop_token_ids": list(self.team.eos_token_ids(request.agent)),
        }
        if seed is not None:
            payload["seed"] = seed
        reply = self._post("/v1/completions", payload)
        try:
            choice = reply["choices"][0]
            tokens = choice["logprobs"]["tokens"]
            ids = [int(t.rsplit(":", 1)[1]) for t in tokens]  # "token_id:<id>"
            logps = [float(x) for x in choice["logprobs"]["token_logprobs"]]
        except (KeyError, IndexError, TypeError, ValueError) as err:
            raise VLLMServerError(f"unexpected /v1/completions reply: {str(reply)[:500]}") from err
        return GenOutput(agent=request.agent, prompt_ids=prompt, completion_ids=ids, logprobs=logps,
                         text=self.team.decode(request.agent, ids),
                         finish_reason="stop" if choice.get("finish_reason") == "stop" else "length",
                         policy=str(key))
