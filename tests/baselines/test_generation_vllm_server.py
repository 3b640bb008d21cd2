"""VLLMServerBackend against a real ``vllm serve`` of a tiny local model. Needs vLLM and a GPU.

Skipped where vllm is not installed or no GPU is visible -- so it has NOT run in this
repository's CI nor on the machine it was written on (no GPU lent there; docs/scaling.md).
It starts the server on a free loopback port, samples through the HTTP API, checks the
returned log-probs against the team's own scoring, pushes changed LoRA weights, and checks
that the server now samples from the changed adapters.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
import torch

vllm = pytest.importorskip("vllm")

from baselines.generation import GenerationConfig, GenRequest  # noqa: E402
from baselines.generation.vllm_server import VLLMServerBackend  # noqa: E402
from baselines.policies import Team, TeamConfig, build_tiny_model  # noqa: E402
from baselines.policies.corpus import signal_game_texts  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="vLLM needs a GPU")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = str(build_tiny_model(tmp_path_factory.mktemp("m") / "m", texts=signal_game_texts(), hidden_size=128))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", path, "--host", "127.0.0.1",
         "--port", str(port), "--enable-lora", "--max-lora-rank", "8", "--max-loras", "4",
         "--gpu-memory-utilization", "0.2", "--logprobs-mode", "processed_logprobs", "--enforce-eager"],
        env={**os.environ, "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"})
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 300
    while True:
        try:
            urllib.request.urlopen(url + "/health", timeout=2)
            break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise RuntimeError("vllm serve did not start") from None
            time.sleep(2)
    yield path, url
    proc.terminate()
    proc.wait(timeout=60)


def test_server_logprobs_match_team_scoring_and_follow_weight_syncs(server, tmp_path):
    path, url = server
    team = Team.from_config(TeamConfig(mode="lora", model=path, device="cuda", lora_r=8), ["speaker", "listener"])
    backend = VLLMServerBackend(team, GenerationConfig(max_new_tokens=8, seed=0), url=url, adapter_dir=tmp_path)
    chat = [{"role": "system", "content": "You are the speaker."}, {"role": "user", "content": "target: cat"}]

    def check(outs):
        for o in outs:
            assert o.completion_ids and len(o.logprobs) == len(o.completion_ids)
            lp, _ = team.sequence_logprobs(o.agent, [o.prompt_ids], [o.completion_ids])
            torch.testing.assert_close(lp[0].detach().cpu(), torch.tensor(o.logprobs), atol=1e-2, rtol=0)

    outs = backend.generate([GenRequest("speaker", chat), GenRequest("listener", chat)] * 4)
    check(outs)
    assert len({tuple(o.completion_ids) for o in outs}) > 1  # per-request seeds: a group is not 8 copies
    with torch.no_grad():  # a weight update must reach the server
        for p in team.trainable_parameters().values():
            p.add_(torch.randn_like(p))
    backend.sync_weights()
    check(backend.generate([GenRequest("speaker", chat), GenRequest("listener", chat)]))
