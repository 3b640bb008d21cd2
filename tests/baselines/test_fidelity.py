"""The fast path's fidelity check (:mod:`baselines.bench.fidelity`) passes on the real path and fails on
paths broken on purpose: a stale copy of the adapters, rows routed to the wrong adapter, a bf16 merge."""

from __future__ import annotations

import pytest
import torch

from baselines.bench.fidelity import check, randomize_adapters
from baselines.generation import GenerationConfig, TransformersBackend
from baselines.generation.lora_stack import FusedLinear, RowRouting
from baselines.policies import Team, TeamConfig
from baselines.policies.corpus import signal_game_texts
from baselines.policies.tiny import build_tiny_model
from tests.baselines.generation_helpers import AGENTS, requests


@pytest.fixture(scope="module")
def peaked(tmp_path_factory) -> str:
    """A tiny Llama whose next-token distributions are peaked (weights drawn with std 0.3), so that its two
    random adapters are clearly different policies."""
    path = tmp_path_factory.mktemp("peaked") / "model"
    return str(build_tiny_model(path, texts=signal_game_texts(episodes=8), tokenizer="bpe", arch="llama",
                                hidden_size=48, seed=1, init_std=0.3))  # fmt: skip


def _team(path: str, dtype: str = "float32") -> Team:
    team = Team.from_config(TeamConfig(mode="lora", model=path, dtype=dtype), AGENTS)
    randomize_adapters(team, seed=1, std_a=0.3, std_b=0.3)
    return team


def _backend(team: Team) -> TransformersBackend:
    return TransformersBackend(team, GenerationConfig(max_new_tokens=8), decode="fast")


def test_the_fast_path_passes(peaked):
    team = _team(peaked)
    verdict = check(team, _backend(team), requests() * 2)
    assert verdict["passed"], verdict["failures"]
    assert verdict["logprob_abs_diff_mean"] < 1e-5
    assert verdict["control_wrong_adapter_diff_mean"] > 100 * verdict["logprob_abs_diff_mean"]
    assert verdict["update_tokens_compared"] > 0 and verdict["update_trainer_change_mean"] > 0.005
    assert verdict["update_token_gap_abs_mean"] < 1e-4  # float32: every token follows, not just the mean


def test_a_stale_adapter_copy_fails(peaked, monkeypatch):
    team = _team(peaked)
    monkeypatch.setattr(FusedLinear, "refresh", lambda self: None)  # nothing copied after the first call
    verdict = check(team, _backend(team), requests() * 2)
    assert not verdict["passed"]
    assert "the sampler's log-probs do not follow an update as the trainer's do" in verdict["failures"]


def test_rows_routed_to_the_wrong_adapter_fail(peaked, monkeypatch):
    team = _team(peaked)
    rows = RowRouting.rows
    monkeypatch.setattr(RowRouting, "rows", lambda self, adapters: rows(self, list(reversed(adapters))))
    verdict = check(team, _backend(team), requests() * 2)
    assert not verdict["passed"]
    assert "recorded log-probs differ from the recompute" in verdict["failures"]


def test_the_fast_path_passes_in_bf16(peaked):
    team = _team(peaked, "bfloat16")
    backend = TransformersBackend(team, GenerationConfig(max_new_tokens=16), decode="fast")
    verdict = check(team, backend, requests() * 4, dtype="bfloat16")
    assert verdict["passed"], verdict["failures"]


def test_a_delta_below_the_weights_rounding_reaches_the_output_as_in_peft():
    """bf16 weights, float32 adapter (as peft keeps it): a LoRA delta smaller than half an ulp of every weight
    vanishes when merged into the weights (``W + s B A`` rounds back to ``W``), but shifts the layer's outputs
    when added to them -- in peft's forward (the trainer's) and in the fused sampling layer alike."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    base = torch.nn.Sequential(torch.nn.Linear(64, 48, bias=False)).to(torch.bfloat16)
    with torch.no_grad():
        base[0].weight.uniform_(0.5, 1.0)  # ulp 2**-8: half an ulp is 2e-3
    peft_model = get_peft_model(base, LoraConfig(r=4, lora_alpha=4, target_modules=["0"]))
    layer = peft_model.base_model.model[0]
    with torch.no_grad():
        layer.lora_A["default"].weight.fill_(0.03)
        layer.lora_B["default"].weight.fill_(0.004)  # every delta element: 4 * 0.03 * 0.004 = 4.8e-4
    delta = layer.get_delta_weight("default").float()
    weight = layer.get_base_layer().weight
    assert delta.abs().max() < 2**-9 * weight.float().abs().min()  # below half an ulp of every weight
    assert torch.equal((weight.float() + delta).to(torch.bfloat16), weight)  # merged: the update is gone
    x = torch.randn(256, 64).to(torch.bfloat16)
    with torch.no_grad():
        trainer = layer(x)
        fused = FusedLinear([layer], RowRouting(["default"], [4], [1.0], torch.float32, "cpu"))
        fused.routing.use(fused.routing.rows(["default"] * 256))
        sampler = fused(x)
        untouched = torch.nn.functional.linear(x, weight)
    assert (trainer != untouched).float().mean() > 0.01  # the update moves some of the trainer's outputs ...
    assert (sampler == trainer).float().mean() > 0.99  # ... and the sampler's the same way
