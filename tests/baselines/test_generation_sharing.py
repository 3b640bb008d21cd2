"""Prefix sharing and streaming log-probs of TransformersBackend, on tiny real models.

Copies of one prompt (a GRPO group) are prefilled once and their KV cache replicated; these
tests check that this changes nothing but the work done: same tokens, same log-probs, the
same seeded samples, and no prompt forward over the duplicated rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from baselines.generation import GenerationConfig, GenRequest, TransformersBackend
from baselines.generation.transformers_backend import SampledLogprobs
from baselines.policies import Team, TeamConfig
from tests.baselines.conftest import chat
from tests.baselines.generation_helpers import (
    AGENTS,
    USERS,
    assert_logprobs_recomputed,
    perturb_adapter,
    team_taught_to_stop,
)


def grouped_requests(group: int) -> list[GenRequest]:
    """Each prompt ``group`` times in a row (how the trainer asks), both agents."""
    return [
        GenRequest(AGENTS[i % 2], chat(u, AGENTS[i % 2])) for i, u in enumerate(USERS) for _ in range(group)
    ]


def record_forwards(team: Team) -> list[tuple[int, int]]:
    """(rows, tokens) of every forward through the team's model, from a hook on its embedding."""
    shapes: list[tuple[int, int]] = []
    embed = team.model("speaker").get_input_embeddings()
    embed.register_forward_hook(lambda _m, args, _out: shapes.append(tuple(args[0].shape)))
    return shapes


@pytest.mark.parametrize(("mode", "model"), [("shared", "word"), ("lora", "windowed")])
def test_shared_prefill_changes_nothing_but_the_work(tiny_paths, mode, model):
    team = Team.from_config(TeamConfig(mode=mode, model=tiny_paths[model]), AGENTS)
    # LoRA: the two agents' adapters differ, so the same text is a different policy (no sharing between them)
    if mode == "lora":
        perturb_adapter(team, "listener", 0.3)
    reqs = grouped_requests(3) + [GenRequest("listener", chat(USERS[0], "speaker"))]
    # shared model: the listener's copy of the speaker prompt shares its prefill too
    distinct = 5 if mode == "lora" else 4
    shapes = record_forwards(team)
    for cfg in (
        GenerationConfig(max_new_tokens=8, temperature=0),
        GenerationConfig(max_new_tokens=8, seed=3),
    ):
        shapes.clear()
        shared = TransformersBackend(team, cfg, prefill_padding=None).generate(reqs)
        shared_shapes = list(shapes)
        shapes.clear()
        alone = TransformersBackend(team, cfg, share_prompts=False, prefill_padding=None).generate(reqs)
        assert [o.completion_ids for o in shared] == [o.completion_ids for o in alone]
        for s, a in zip(shared, alone):
            assert s.finish_reason == a.finish_reason and s.text == a.text and s.prompt_ids == a.prompt_ids
            np.testing.assert_allclose(s.logprobs, a.logprobs, atol=1e-4)
        assert_logprobs_recomputed(team, shared, cfg.scoring_temperature)
        # shared: one prompt forward over the distinct (adapter, prompt) rows, then one-token steps over
        # all 13 rows; unshared: the prompt forward covers all 13 rows
        width = max(len(o.prompt_ids) for o in shared)
        assert shared_shapes[0] == (distinct, width - 1)
        assert all(s == (13, 1) for s in shared_shapes[1:]) and len(shared_shapes) > 1
        assert shapes[0] == (13, width)


def test_sampled_copies_differ_and_groups_stay_together(tiny_paths):
    """Copies share their prefill, not their samples; a split group keeps copies in one call."""
    team = Team.from_config(TeamConfig(mode="shared", model=tiny_paths["word"]), AGENTS)
    reqs = grouped_requests(4)
    outs = TransformersBackend(team, GenerationConfig(max_new_tokens=10, seed=0)).generate(reqs)
    groups = [{tuple(o.completion_ids) for o in outs[g * 4 : g * 4 + 4]} for g in range(len(USERS))]
    assert all(len(g) > 1 for g in groups)  # G independent samples, not one sample copied G times
    shapes = record_forwards(team)
    interleaved = [reqs[g * 4 + k] for k in range(4) for g in range(len(USERS))]  # copies scattered
    capped = TransformersBackend(
        team, GenerationConfig(max_new_tokens=2, seed=0), max_batch_size=8, prefill_padding=None
    )
    out = capped.generate(interleaved)
    assert [o.prompt_ids for o in out] == [capped.prompt_ids(r) for r in interleaved]
    prefill = [s for s in shapes if s[1] > 1]
    assert [s[0] for s in prefill] == [2, 2]  # two calls of 2 prompts x 4 copies, each prefilled once


@pytest.mark.parametrize(("model", "share"), [("word", True), ("bpe", False), ("windowed", True)])
def test_length_bucketed_prefill(tiny_paths, model, share):
    """Uneven prompts are prefilled in buckets of similar length (caches left-padded to the batch
    width), decoded in one generate call, with the tokens and log-probs of the plain padded path.
    A sliding-window cache cannot be padded: it falls back to one padded prefill."""
    team = Team.from_config(TeamConfig(mode="shared", model=tiny_paths[model]), AGENTS)
    long = GenRequest("speaker", chat("candidates: " + "apple boat " * 30))
    reqs = grouped_requests(2 if share else 1) + [long]
    shapes = record_forwards(team)
    for cfg in (
        GenerationConfig(max_new_tokens=6, temperature=0),
        GenerationConfig(max_new_tokens=6, seed=4),
    ):
        shapes.clear()
        bucketed = TransformersBackend(team, cfg, share_prompts=share, prefill_padding=1.2).generate(reqs)
        prefill = [s for s in shapes if s[1] > 1]
        shapes.clear()
        plain = TransformersBackend(team, cfg, share_prompts=False, prefill_padding=None).generate(reqs)
        assert [o.completion_ids for o in bucketed] == [o.completion_ids for o in plain]
        for b, p in zip(bucketed, plain):
            np.testing.assert_allclose(b.logprobs, p.logprobs, atol=1e-4)
        assert_logprobs_recomputed(team, bucketed, cfg.scoring_temperature)
        width = max(len(o.prompt_ids) for o in plain)
        assert shapes[0] == (len(reqs), width)  # the plain path: generate prefills every padded row
        n_distinct = len(USERS) + 1
        if model == "windowed":
            assert prefill[-1] == (
                n_distinct,
                width - 1,
            )  # fell back to one padded prefill of the distinct prompts
        else:
            assert len(prefill) > 1 and sum(r for r, _ in prefill) == n_distinct
            assert max(w for _, w in prefill) == width - 1 and min(w for _, w in prefill) < width // 2


def test_stopped_rows_leave_the_batch(tiny_paths):
    """Decoding in segments drops the rows that stopped; completions, log-probs and stop reasons are
    those of one unsegmented call, also when every row stops early (generate ends before the cap)."""
    team, prompts, cat = team_taught_to_stop(tiny_paths["word"])
    reqs = [GenRequest("speaker", prompt_ids=p) for p in (prompts[0], prompts[0], prompts[1])]
    greedy = GenerationConfig(max_new_tokens=7, temperature=0)
    shapes = record_forwards(team)
    segmented = TransformersBackend(team, greedy, decode_segment=2).generate(reqs)
    seen = list(shapes)
    steps = [rows for rows, tokens in seen if tokens == 1]
    one_call = TransformersBackend(team, greedy, decode_segment=None).generate(reqs)
    assert [o.completion_ids for o in segmented] == [o.completion_ids for o in one_call]
    assert segmented[0].completion_ids == cat and segmented[0].finish_reason == "stop"
    assert len(segmented[2].completion_ids) == 7 and segmented[2].finish_reason == "length"
    for s, o in zip(segmented, one_call):
        np.testing.assert_allclose(s.logprobs, o.logprobs, atol=1e-4)
    assert_logprobs_recomputed(team, segmented, 1.0)
    # segment 1: two one-token steps on 3 rows; the two stopped rows leave: 5 more steps on 1 row
    assert steps == [3, 3, 1, 1, 1, 1, 1] and len(seen) == len(steps) + 1  # + the shared prefill
    early = TransformersBackend(team, greedy, decode_segment=2).generate(reqs[:2])
    assert all(o.completion_ids == cat and o.finish_reason == "stop" for o in early)
    assert_logprobs_recomputed(team, early, 1.0)
    sampled = GenerationConfig(max_new_tokens=9, seed=2)
    a = TransformersBackend(team, sampled, decode_segment=3).generate(grouped_requests(2))
    b = TransformersBackend(team, sampled, decode_segment=3).generate(grouped_requests(2))
    assert [o.completion_ids for o in a] == [o.completion_ids for o in b]
    assert_logprobs_recomputed(team, a, 1.0)
    with pytest.raises(ValueError, match="decode_segment"):
        TransformersBackend(team, greedy, decode_segment=0)


def test_sampled_logprobs_recorder():
    """The recorder on hand-made logits: one step behind, and it refuses a step count it did not see."""
    rec = SampledLogprobs(temperature=2.0)
    logits = [
        torch.tensor([[0.0, 1.0, 2.0], [3.0, 0.0, 0.0]]),
        torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 4.0]]),
    ]
    new = torch.tensor([[2, 0], [0, 2]])
    ids = torch.tensor([[7], [7]])
    assert rec(ids, logits[0]) is logits[0]
    rec(torch.cat([ids, new[:, :1]], dim=1), logits[1])
    expected = torch.stack(
        [torch.log_softmax(logits[t] / 2.0, -1).gather(-1, new[:, t : t + 1]).squeeze(-1) for t in range(2)],
        1,
    )
    torch.testing.assert_close(rec.logprobs(new), expected)
    with pytest.raises(RuntimeError, match="recorded"):
        rec.logprobs(torch.tensor([[2, 0, 1, 1], [0, 2, 1, 1]]))


@pytest.mark.parametrize("mode", ["shared", "lora"])
def test_segmented_decoding_on_a_sliding_window_model(tiny_paths, mode):
    """Segments continue from a sliding-window cache (LoRA: each row keeps its adapter across segments)."""
    team = Team.from_config(TeamConfig(mode=mode, model=tiny_paths["windowed"]), AGENTS)
    cfg = GenerationConfig(max_new_tokens=9, temperature=0)
    reqs = grouped_requests(2)
    shapes = record_forwards(team)
    segmented = TransformersBackend(team, cfg, decode_segment=4).generate(reqs)
    assert all(
        tokens == 1 for _, tokens in shapes[1:]
    )  # later segments continue from the cache: no re-prefill
    one_call = TransformersBackend(team, cfg, decode_segment=None).generate(reqs)
    assert [o.completion_ids for o in segmented] == [o.completion_ids for o in one_call]
    assert_logprobs_recomputed(team, segmented, 1.0)
