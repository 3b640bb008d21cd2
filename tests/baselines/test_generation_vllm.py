"""VLLMBackend against TransformersBackend's conventions. Needs vLLM and a GPU: skipped otherwise."""

from __future__ import annotations

import pytest
import torch

vllm = pytest.importorskip("vllm")

from baselines.generation import GenerationConfig, GenRequest  # noqa: E402
from baselines.generation.vllm_backend import VLLMBackend  # noqa: E402
from baselines.policies import Team, TeamConfig, build_tiny_model  # noqa: E402
from baselines.policies.corpus import signal_game_texts  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="vLLM needs a GPU")


@pytest.mark.parametrize("mode", ["shared", "lora"])
def test_vllm_logprobs_match_team_scoring(tmp_path, mode):
    path = str(build_tiny_model(tmp_path / "m", texts=signal_game_texts(), hidden_size=128))
    team = Team.from_config(TeamConfig(mode=mode, model=path, device="cuda"), ["speaker", "listener"])
    backend = VLLMBackend(team, GenerationConfig(max_new_tokens=8, seed=0), gpu_memory_utilization=0.2)
    chat = [{"role": "system", "content": "You are the speaker."}, {"role": "user", "content": "target: cat"}]
    outs = backend.generate([GenRequest("speaker", chat), GenRequest("listener", chat)])
    for o in outs:
        lp, _ = team.sequence_logprobs(o.agent, [o.prompt_ids], [o.completion_ids])
        torch.testing.assert_close(lp[0].detach().cpu(), torch.tensor(o.logprobs), atol=1e-2, rtol=0)
    with torch.no_grad():  # a weight update must reach the engine
        for p in team.trainable_parameters().values():
            p.add_(torch.randn_like(p))
    backend.sync_weights()
    o = backend.generate([GenRequest("speaker", chat)])[0]
    lp, _ = team.sequence_logprobs("speaker", [o.prompt_ids], [o.completion_ids])
    torch.testing.assert_close(lp[0].detach().cpu(), torch.tensor(o.logprobs), atol=1e-2, rtol=0)
