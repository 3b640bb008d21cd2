"""The fast decode path (``TransformersBackend(decode="fast")``) against plain ``model.generate``.

Tolerance of the recorded log-probs: 1e-4 absolute (float32 tiny models; the same bound as the
``generate`` path's test), against a teacher-forced recompute through the peft model (unmerged
adapters)."""

from __future__ import annotations

import pytest
import torch

from baselines.generation import GenerationConfig, GenRequest, TransformersBackend
from baselines.policies import Team, TeamConfig
from tests.baselines.conftest import chat
from tests.baselines.generation_helpers import (
    AGENTS,
    USERS,
    assert_logprobs_recomputed,
    requests,
    team_taught_to_stop,
)


def lora_team(path: str) -> Team:
    """A LoRA team whose two agents have different, random, non-zero adapters (A and B drawn)."""
    team = Team.from_config(TeamConfig(mode="lora", model=path), AGENTS)
    with torch.no_grad():
        for agent, std in (("speaker", 0.2), ("listener", 0.4)):
            for n, p in team.trainable_parameters(agent).items():
                p.normal_(0, std if "lora_B" in n else 0.3)
    return team


def plain_greedy(team: Team, agent: str, prompt: list[int], n: int) -> list[int]:
    """``model.generate`` of one prompt alone through peft with ``agent``'s adapter, cut after EOS."""
    eos = team.eos_token_ids(agent)
    with torch.no_grad(), team.generating(agent) as model:
        out = model.generate(input_ids=torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                             max_new_tokens=n, do_sample=False, eos_token_id=eos,
                             pad_token_id=team.tokenizer(agent).pad_token_id)  # fmt: skip
    row = out[0, len(prompt) :].tolist()
    stop = next((j for j, t in enumerate(row) if t in eos), None)
    return row if stop is None else row[: stop + 1]


# the team decoder (every agent's rows in one forward) and the model's own forward with peft's per-row adapters
ENGINES = [None, False]


@pytest.mark.parametrize("team_decoder", ENGINES)
@pytest.mark.parametrize("model", ["word", "bpe"])
def test_greedy_equals_plain_generate_with_two_adapters(tiny_paths, model, team_decoder):
    team = lora_team(tiny_paths[model])
    fast = TransformersBackend(team, GenerationConfig(max_new_tokens=10, temperature=0), decode="fast",
                               team_decoder=team_decoder)  # fmt: skip
    reqs = requests() * 2  # ragged prompts, both agents, repeated prompts (prefix sharing)
    outs = fast.generate(reqs)
    assert (fast.decoder(team.base_model(team.policy_key("speaker")), team.policy_key("speaker")) is None) == (
        team_decoder is False)
    for r, o in zip(reqs, outs):
        assert o.completion_ids == plain_greedy(team, r.agent, o.prompt_ids, 10)
    assert_logprobs_recomputed(team, outs, 1.0)
    # the two adapters really differ: the listener's rows decoded as the speaker give other tokens
    as_speaker = fast.generate([GenRequest("speaker", r.messages) for r in reqs])
    assert any(a.completion_ids != b.completion_ids for a, b, r in zip(outs, as_speaker, reqs) if r.agent == "listener")


def test_the_whole_team_decodes_in_one_forward_per_token(tiny_paths):
    team = lora_team(tiny_paths["bpe"])
    backend = TransformersBackend(team, GenerationConfig(max_new_tokens=6, temperature=0), decode="fast")
    embed = team.base_model(team.policy_key("speaker")).get_base_model().model.embed_tokens
    calls = []
    handle = embed.register_forward_hook(lambda m, i, o: calls.append(tuple(i[0].shape)))
    try:
        backend.generate(requests() * 2)  # 8 rows, both agents
    finally:
        handle.remove()
    steps = [c for c in calls if c[1] == 1]
    assert len(steps) <= 6 and all(c[0] == 8 for c in steps)  # one 8-row forward per token, not one per agent


@pytest.mark.parametrize("team_decoder", ENGINES)
def test_sampled_logprobs_match_recompute_and_seed_reproduces(tiny_paths, team_decoder):
    team = lora_team(tiny_paths["bpe"])
    cfg = GenerationConfig(max_new_tokens=12, temperature=0.8, seed=3)
    outs = [TransformersBackend(team, cfg, decode="fast", team_decoder=team_decoder).generate(requests() * 2)
            for _ in range(2)]  # fmt: skip
    assert [o.completion_ids for o in outs[0]] == [o.completion_ids for o in outs[1]]
    assert [o.logprobs for o in outs[0]] == [o.logprobs for o in outs[1]]
    assert_logprobs_recomputed(team, outs[0], 0.8)


def test_models_outside_the_family_decode_through_their_own_forward(tiny_paths):
    team = lora_team(tiny_paths["windowed"])  # sliding window: not the team decoder's
    backend = TransformersBackend(team, GenerationConfig(max_new_tokens=12, temperature=0.8, seed=3), decode="fast")
    with pytest.warns(UserWarning, match="sliding-window"):
        outs = backend.generate(requests() * 2)
    assert_logprobs_recomputed(team, outs, 0.8)
    with pytest.raises(ValueError, match="sliding-window"):
        TransformersBackend(team, decode="fast", team_decoder=True).generate(requests())


def test_top_k_top_p_logprobs_are_the_sampling_policys(tiny_paths):
    team = Team.from_config(TeamConfig(mode="shared", model=tiny_paths["word"]), AGENTS)
    cfg = GenerationConfig(max_new_tokens=8, temperature=1.3, top_k=20, top_p=0.9, seed=1)
    fast = TransformersBackend(team, cfg, decode="fast").generate(requests())
    assert_logprobs_recomputed(team, fast, 1.3)


@pytest.mark.parametrize("team_decoder", ENGINES)
def test_eos_stops_rows_and_ragged_batches(tiny_paths, team_decoder):
    team, prompts, cat = team_taught_to_stop(tiny_paths["word"])
    backend = TransformersBackend(team, GenerationConfig(max_new_tokens=8, temperature=0), decode="fast",
                                  team_decoder=team_decoder, decode_segment=2)  # fmt: skip
    one_token = GenRequest("speaker", prompt_ids=[prompts[1][-1]])  # a one-token prompt beside long ones
    outs = backend.generate([GenRequest("speaker", prompt_ids=prompts[0]), GenRequest("speaker", prompt_ids=prompts[1]),
                             one_token])  # fmt: skip
    assert outs[0].completion_ids == cat and outs[0].finish_reason == "stop"
    assert len(outs[1].completion_ids) == 8 and outs[1].finish_reason == "length"
    assert outs[2].completion_ids == plain_greedy(team, "speaker", [prompts[1][-1]], 8)
    assert_logprobs_recomputed(team, outs, 1.0)


def test_the_sampler_follows_an_update(tiny_paths):
    team = lora_team(tiny_paths["word"])
    backend = TransformersBackend(team, GenerationConfig(max_new_tokens=8, temperature=0), decode="fast")
    reqs = [GenRequest("listener", chat(u, "listener")) for u in USERS]
    before = backend.generate(reqs)
    opt = torch.optim.SGD(team.trainable_parameters("listener").values(), lr=5.0)
    logps, _ = team.sequence_logprobs("listener", [o.prompt_ids for o in before], [o.completion_ids for o in before])
    opt.zero_grad()
    sum(lp.sum() for lp in logps).backward()  # push the greedy answers down: they must change
    opt.step()
    after = backend.generate(reqs)
    assert [o.completion_ids for o in after] != [o.completion_ids for o in before]
    for o in after:  # and the new answers are the updated policy's own
        assert o.completion_ids == plain_greedy(team, "listener", o.prompt_ids, 8)
    assert_logprobs_recomputed(team, after, 1.0)


def test_fast_is_the_trainer_default_and_validated():
    from baselines.config_sections import GenerationSettings

    assert GenerationSettings().backend_options()["decode"] == "fast"
    with pytest.raises(ValueError, match="decode must be"):
        TransformersBackend(None, decode="vllm")  # type: ignore[arg-type]


def test_graph_slots_bookkeeping_eagerly(tiny_paths):
    """The CUDA-graph slots (fixed cache and state, rows padded to a bucket, all columns attended), run
    eagerly on the CPU (capture=False): the same greedy tokens as plain generate, one slot reused across
    calls of one shape (its stale cache and state overwritten)."""
    from baselines.generation.cuda_graphs import DecodeGraphs
    from baselines.generation.fast_decode import DecodeOptions, decode

    team = lora_team(tiny_paths["bpe"])
    backend = TransformersBackend(team, decode="fast")
    graphs = DecodeGraphs(capture=False)
    cfg = GenerationConfig(max_new_tokens=9, temperature=0)
    for agent in AGENTS:  # two calls of one shape: the second reuses the slot
        prompts = [team.encode_prompt(agent, chat(u, agent)) for u in USERS]
        width = max(len(p) for p in prompts)
        pad = team.tokenizer(agent).pad_token_id
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        with torch.no_grad(), team.generating(agent) as model:
            decoder = backend.decoder(model, team.policy_key(agent))
            out = decode(decoder, ids, mask, cfg, team.eos_token_ids(agent), pad, torch.device("cpu"),
                         DecodeOptions(), graphs, adapters=[team.policy_key(agent).adapter] * len(prompts))  # fmt: skip
        for p, c in zip(prompts, out.completions):
            assert c == plain_greedy(team, agent, p, 9)
    assert graphs.summary() == {"mode": "off: capture disabled", "captures": 0, "replays": 0, "slots": 1}


def test_grouped_decode_attention_equals_the_expanded_reference():
    """Decode attention over the grouped cache as it is = transformers' eager attention over K/V expanded by
    ``repeat_kv`` (float32), masked columns included."""
    from transformers.models.llama.modeling_llama import eager_attention_forward

    from baselines.generation.team_decoder import grouped_decode_attention

    gen = torch.Generator().manual_seed(0)
    rows, heads, kv_heads, length, dim = 3, 6, 2, 11, 8
    q = torch.randn(rows, heads, 1, dim, generator=gen)
    k, v = (torch.randn(rows, kv_heads, length, dim, generator=gen) for _ in range(2))
    allowed = torch.rand(rows, length, generator=gen) > 0.3
    allowed[:, -1] = True
    module = torch.nn.Module()
    module.num_key_value_groups, module.training = heads // kv_heads, False
    additive = torch.where(allowed, 0.0, torch.finfo(torch.float32).min)[:, None, None, :]
    ref, _ = eager_attention_forward(module, q, k, v, additive, scaling=dim**-0.5)
    ours = grouped_decode_attention(q[:, :, 0], k, v, allowed, dim**-0.5)
    torch.testing.assert_close(ours, ref.reshape(rows, 1, heads * dim), atol=1e-6, rtol=1e-5)


def test_a_graph_is_keyed_by_everything_that_selects_its_weights(tiny_paths):
    """What a captured step reads is in its key: moved weights, a new output-layer hook (a vocabulary mask),
    another active adapter or other sampling settings each make a new key; an in-place update does not."""
    from baselines.generation.cuda_graphs import DecodeGraphs, Slot

    team = lora_team(tiny_paths["bpe"])
    model = team.base_model(team.policy_key("speaker"))
    backend = TransformersBackend(team, decode="fast")
    graphs = DecodeGraphs(capture=False)
    slot = Slot(backend.decoder(model, team.policy_key("speaker")), 8, 256)
    sampled, greedy = GenerationConfig(temperature=1.0), GenerationConfig(temperature=0)
    key = graphs._key(slot, sampled)
    assert graphs._key(slot, greedy) != key
    with torch.no_grad():
        next(iter(team.trainable_parameters("speaker").values())).add_(1.0)  # an optimizer step: in place
    assert graphs._key(slot, sampled) == key
    model.set_adapter(team.policy_key("listener").adapter)
    assert graphs._key(slot, sampled) != key
    model.set_adapter(team.policy_key("speaker").adapter)
    handle = model.get_output_embeddings().register_forward_hook(lambda m, i, o: o)
    assert graphs._key(slot, sampled) != key
    handle.remove()
    head = model.get_output_embeddings()
    head.weight = torch.nn.Parameter(head.weight.detach().clone())  # replaced, not updated: a new address
    assert graphs._key(slot, sampled) != key
