"""The fast path's fidelity check (:mod:`baselines.bench.fidelity`) passes on the real path and fails on
paths broken on purpose: a stale copy of the adapters, rows routed to the wrong adapter, a bf16 merge."""

from __future__ import annotations

import pytest
import torch

from baselines.bench.fidelity import check, randomize_adapters
from baselines.generation import GenerationConfig, TransformersBackend
from baselines.generation.lora_stack import RowRouting, StackedLinear, StackedLoRA
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
    monkeypatch.setattr(StackedLoRA, "refresh", lambda self: None)  # copied once, never again
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


def test_small_updates_reach_the_sampler_in_bf16(peaked, monkeypatch):
    """In bfloat16 the adapters' delta is added to the base output, never rounded into the weights: a small
    step moves the sampler's log-probs as it moves the trainer's. Merging ``W + s B A`` into bf16 weights
    (what the fast path did before) loses much of it: the same check fails on such a sampler."""
    team = _team(peaked, "bfloat16")
    backend = TransformersBackend(team, GenerationConfig(max_new_tokens=16), decode="fast")
    verdict = check(team, backend, requests() * 4, dtype="bfloat16")
    assert verdict["passed"], verdict["failures"]
    assert abs(verdict["update_sampler_change_mean"] / verdict["update_trainer_change_mean"] - 1) < 0.25

    def merged_in_bf16(self, x):  # each adapter's weights merged and rounded to bf16, rows picked by routing
        outs = []
        for adapter in self.adapters:
            w = (self.base.weight.float() + self.layer.get_delta_weight(adapter).float()).to(self.base.weight.dtype)
            outs.append(torch.nn.functional.linear(x, w, self.base.bias))
        first = (self.routing.scales[..., : self.a.shape[0] // 2] != 0).any(-1, keepdim=True).unsqueeze(-2)
        return torch.where(first, outs[0], outs[1])

    monkeypatch.setattr(StackedLinear, "__call__", merged_in_bf16)
    verdict = check(team, backend, requests() * 4, dtype="bfloat16")
    assert "the sampler's log-probs do not follow an update as the trainer's do" in verdict["failures"]
