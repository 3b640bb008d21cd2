"""Batched generation with TransformersBackend on tiny real models."""

from __future__ import annotations

import numpy as np
import pytest

from baselines.generation import GenerationConfig, GenRequest, TransformersBackend
from baselines.policies import Team, TeamConfig
from llm_marl_envs.toy import signal_game_v0
from tests.baselines.conftest import chat
from tests.baselines.generation_helpers import (
    AGENTS,
    assert_logprobs_recomputed,
    count_generate_calls,
    perturb_adapter,
    requests,
    team_taught_to_stop,
)


@pytest.mark.parametrize("model", ["word", "windowed"])
@pytest.mark.parametrize("mode", ["shared", "lora"])
def test_sampling_logprobs_match_recomputation(tiny_paths, mode, model):
    team = Team.from_config(TeamConfig(mode=mode, model=tiny_paths[model]), AGENTS)
    if mode == "lora":  # make the two adapters differ
        perturb_adapter(team, "listener", 0.3)
    backend = TransformersBackend(team, GenerationConfig(max_new_tokens=12, temperature=1.0, seed=0))
    reqs = requests()
    outs = backend.generate(reqs)
    assert [o.agent for o in outs] == [r.agent for r in reqs]
    for r, o in zip(reqs, outs):
        assert o.prompt_ids == team.encode_prompt(r.agent, r.messages)
        assert o.text == team.decode(r.agent, o.completion_ids)
        assert o.policy == str(team.policy_key(r.agent))
    assert_logprobs_recomputed(team, outs, 1.0)
    # a temperature is applied to the reported log-probs, and recomputed the same way
    cold = GenerationConfig(max_new_tokens=12, temperature=0.7, seed=1)
    assert_logprobs_recomputed(team, backend.generate(reqs, cold), 0.7)


def test_one_generate_call_per_policy(tiny_paths):
    team = Team.from_config(TeamConfig(mode="lora", model=tiny_paths["word"]), AGENTS)
    model = team.model("speaker")
    calls = count_generate_calls(model, 0)
    # one call for the whole team: peft applies each row's adapter (mixed-adapter batch)
    TransformersBackend(team, GenerationConfig(max_new_tokens=4, seed=0)).generate(requests() * 3)
    assert calls == [12]
    calls.clear()
    per_adapter = TransformersBackend(team, GenerationConfig(max_new_tokens=4, seed=0), mixed_adapters=False)
    per_adapter.generate(requests() * 3)
    assert calls == [6, 6]  # one batched call per adapter, never one per sequence
    calls.clear()
    TransformersBackend(team, GenerationConfig(max_new_tokens=4), max_batch_size=4).generate(requests() * 3)
    assert calls == [4, 4, 4]


def test_mixed_adapter_batch_matches_per_adapter_calls(tiny_paths):
    team = Team.from_config(TeamConfig(mode="lora", model=tiny_paths["word"]), AGENTS)
    perturb_adapter(team, "listener", 0.5)
    cfg = GenerationConfig(max_new_tokens=8, temperature=0)
    mixed = TransformersBackend(team, cfg).generate(requests())
    split = TransformersBackend(team, cfg, mixed_adapters=False).generate(requests())
    assert [o.completion_ids for o in mixed] == [o.completion_ids for o in split]
    # the listener rows really used the listener's (perturbed) adapter
    as_speaker = TransformersBackend(team, cfg).generate(
        [GenRequest("speaker", r.messages) for r in requests()]
    )
    listener_rows = [i for i, r in enumerate(requests()) if r.agent == "listener"]
    assert any(mixed[i].completion_ids != as_speaker[i].completion_ids for i in listener_rows)
    assert_logprobs_recomputed(team, mixed, 1.0)


def test_batch_composition_does_not_change_results(tiny_paths):
    team = Team.from_config(TeamConfig(mode="shared", model=tiny_paths["word"]), AGENTS)
    backend = TransformersBackend(team, GenerationConfig(max_new_tokens=10, temperature=0))
    reqs = requests()
    together = backend.generate(reqs)
    for r, t in zip(reqs, together):
        alone = backend.generate([r])[0]
        assert alone.completion_ids == t.completion_ids
        np.testing.assert_allclose(alone.logprobs, t.logprobs, atol=1e-4)
    assert_logprobs_recomputed(team, together, 1.0)


def test_seeded_sampling_is_reproducible(tiny_paths):
    team = Team.from_config(TeamConfig(mode="shared", model=tiny_paths["word"]), AGENTS)
    cfg = GenerationConfig(max_new_tokens=10, seed=7)
    a = [o.completion_ids for o in TransformersBackend(team, cfg).generate(requests())]
    b = [o.completion_ids for o in TransformersBackend(team, cfg).generate(requests())]
    c = [
        o.completion_ids
        for o in TransformersBackend(team, GenerationConfig(max_new_tokens=10, seed=8)).generate(requests())
    ]
    assert a == b and a != c


def test_completion_stops_at_eos(tiny_paths):
    """Teach the model to answer prompt 0 with " cat</s>" and prompt 1 with a long run without EOS."""
    team, prompts, cat_eos = team_taught_to_stop(tiny_paths["word"])
    tok = team.tokenizer("speaker")
    backend = TransformersBackend(team, GenerationConfig(max_new_tokens=4, temperature=0))
    stop, length = backend.generate([GenRequest("speaker", prompt_ids=p) for p in prompts])
    assert stop.completion_ids == cat_eos
    assert stop.finish_reason == "stop" and stop.text == " cat"
    assert len(length.completion_ids) == 4 and length.finish_reason == "length"
    assert tok.eos_token_id not in length.completion_ids and length.text == " egg" * 4
    assert_logprobs_recomputed(team, [stop, length], 1.0)


def test_heterogeneous_team_generation(tiny_paths):
    cfg = TeamConfig(mode="separate", models={"speaker": tiny_paths["word"], "listener": tiny_paths["bpe"]})
    team = Team.from_config(cfg, AGENTS)
    outs = TransformersBackend(team, GenerationConfig(max_new_tokens=8, seed=0)).generate(requests())
    assert {o.policy for o in outs} == {"speaker", "listener"}
    assert_logprobs_recomputed(team, outs, 1.0)


def test_plays_the_signal_game(tiny_paths):
    """Real env prompts in, completions out, through the PettingZoo AEC loop."""
    team = Team.from_config(TeamConfig(mode="lora", model=tiny_paths["word"]), AGENTS)
    backend = TransformersBackend(team, GenerationConfig(max_new_tokens=6, seed=0))
    env = signal_game_v0.env(n_rounds=2)
    env.reset(seed=0)
    steps = 0
    for agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        if term or trunc:
            env.step(None)
            continue
        out = backend.generate([GenRequest(agent, env.unwrapped.observe_chat(agent))])[0]
        env.step(out.text)
        steps += 1
    assert steps == 4 and len(env.unwrapped.record.steps) == 4


def test_bad_requests(tiny_paths):
    team = Team.from_config(TeamConfig(mode="shared", model=tiny_paths["word"]), AGENTS)
    backend = TransformersBackend(team, GenerationConfig(max_new_tokens=2, max_prompt_tokens=8))
    assert backend.generate([]) == []
    with pytest.raises(ValueError, match="max_prompt_tokens"):
        backend.generate(requests())
    with pytest.raises(ValueError, match="empty prompt"):
        backend.generate([GenRequest("speaker", prompt_ids=[])])
    with pytest.raises(KeyError, match="unknown agent"):
        backend.generate([GenRequest("judge", prompt_ids=[1, 2])])
    with pytest.raises(ValueError, match="exactly one"):
        GenRequest("speaker")
    with pytest.raises(ValueError, match="temperature"):
        GenerationConfig(temperature=-1)
    with pytest.raises(ValueError, match="top_p"):
        GenerationConfig(top_p=0)


def test_length_buckets(tiny_paths):
    team = Team.from_config(TeamConfig(mode="shared", model=tiny_paths["word"]), AGENTS)
    model = team.model("speaker")
    calls = count_generate_calls(model, 1)
    cfg = GenerationConfig(max_new_tokens=4, temperature=0)
    reqs = requests() + [GenRequest("speaker", chat("candidates: " + "apple boat " * 40))]
    one = TransformersBackend(team, cfg).generate(reqs)
    assert len(calls) == 1
    calls.clear()
    bucketed = TransformersBackend(team, cfg, max_padding=1.2).generate(reqs)
    assert len(calls) > 1 and min(calls) < max(calls)  # short prompts no longer padded to the long one
    assert [o.completion_ids for o in bucketed] == [o.completion_ids for o in one]
    with pytest.raises(ValueError, match="max_padding"):
        TransformersBackend(team, cfg, max_padding=0.5)
