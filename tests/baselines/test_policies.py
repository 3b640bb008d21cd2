"""The team map: shared / LoRA / separate policies, batched scoring, reference, checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from baselines.policies import PolicyKey, Team, TeamConfig
from tests.baselines.conftest import chat

AGENTS = ["speaker", "listener"]








def batch(team: Team, agent: str = "speaker"):
    prompts = [
        team.encode_prompt(agent, chat("candidates: apple boat cat drum\ntarget: cat")),
        team.encode_prompt(agent, chat("target: egg")),
        team.encode_prompt(agent, chat("candidates: owl pen nut jar kite lamp moon\ntarget: owl")),
    ]
    tok = team.tokenizer(agent)
    completions = [
        tok(" cat", add_special_tokens=False)["input_ids"] + [tok.eos_token_id],
        tok("egg egg egg hat", add_special_tokens=False)["input_ids"],
        [],
    ]
    return prompts, completions


def test_shared_mode(tiny_paths):
    team = Team.from_config(TeamConfig(mode="shared", model=tiny_paths["word"]), AGENTS)
    assert team.policy_key("speaker") == team.policy_key("listener") == PolicyKey("shared")
    assert team.tokenizer("speaker") is team.tokenizer("listener")
    params = team.trainable_parameters("speaker")
    assert params.keys() == dict(team.model("speaker").named_parameters()).keys()
    assert len(team.trainable_parameters()) == len(params)
    with pytest.raises(KeyError, match="unknown agent"):
        team.policy_key("judge")


def test_logprobs_independent_of_batch_and_padding(tiny_paths):
    team = Team.from_config(TeamConfig(mode="shared", model=tiny_paths["word"]), AGENTS)
    prompts, completions = batch(team)
    together, ents = team.sequence_logprobs("speaker", prompts, completions, with_entropy=True)
    assert [len(x) for x in together] == [len(c) for c in completions]
    assert [len(x) for x in ents] == [len(c) for c in completions]
    for i in range(len(prompts)):
        alone, _ = team.sequence_logprobs("speaker", [prompts[i]], [completions[i]])
        torch.testing.assert_close(together[i], alone[0], atol=1e-5, rtol=0)
    chunked, _ = team.sequence_logprobs("speaker", prompts, completions, batch_size=1)
    for a, b in zip(together, chunked):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    # against a plain unpadded forward pass written out by hand
    model = team.model("speaker")
    ids = torch.tensor([prompts[1] + completions[1]])
    logp = torch.log_softmax(model(ids).logits[0].float(), -1)
    p = len(prompts[1])
    ref = logp[torch.arange(p - 1, ids.shape[1] - 1), ids[0, p:]]
    torch.testing.assert_close(together[1], ref, atol=1e-5, rtol=0)
    # entropies are entropies: between 0 and log(vocab)
    log_vocab = torch.log(torch.tensor(float(len(team.tokenizer("speaker")))))
    assert all(0 <= float(e.detach().min()) and float(e.detach().max()) <= log_vocab for e in ents if len(e))
    # temperature divides the logits
    hot, _ = team.sequence_logprobs("speaker", prompts[:1], completions[:1], temperature=2.0)
    assert not torch.allclose(hot[0], together[0])


def test_rows_sharing_a_context_are_scored_in_one_forward(tiny_paths):
    """G answers to one prompt that differ only in their last token (a group of one-word messages) run
    through the model once; every row gets its own log-probs and the gradient of the sum is unchanged."""
    team = Team.from_config(TeamConfig(mode="shared", model=tiny_paths["word"]), AGENTS)
    tok = team.tokenizer("speaker")
    prompt = team.encode_prompt("speaker", chat("candidates: apple boat cat drum\ntarget: cat"))
    other = team.encode_prompt("speaker", chat("target: egg"))
    words = [tok(w, add_special_tokens=False)["input_ids"] for w in (" cat", " boat", " cat", " drum")]
    two = tok(" egg egg", add_special_tokens=False)["input_ids"]
    prompts = [prompt] * 4 + [other, other, prompt]
    completions = [*words, two, two[:1] + [tok.eos_token_id], two]
    model = team.model("speaker")
    seen: list[int] = []
    hook = model.register_forward_pre_hook(lambda m, args, kw: seen.append(kw["input_ids"].shape[0]),
                                           with_kwargs=True)
    together, ents = team.sequence_logprobs("speaker", prompts, completions, with_entropy=True)
    hook.remove()
    assert seen[-1] == 3  # 7 rows, 3 contexts: prompt (4 one-word rows), other + " egg" (2), prompt + " egg"
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(sum(x.sum() for x in together), params)
    alone = [team.sequence_logprobs("speaker", [p], [c])[0][0] for p, c in zip(prompts, completions)]
    for a, b in zip(together, alone):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    torch.testing.assert_close(together[0], together[2])
    assert not torch.allclose(together[0], together[1])
    for g, h in zip(grads, torch.autograd.grad(sum(x.sum() for x in alone), params)):
        torch.testing.assert_close(g, h, atol=1e-5, rtol=1e-4)
    assert [len(e) for e in ents] == [len(c) for c in completions]


def test_a_prefix_every_row_shares_is_run_once(tiny_paths):
    """The chat template and system message every prompt starts with go through the model once (batch 1),
    the rows only through their own tokens; log-probs, entropies and gradients as with one padded forward."""
    from baselines.policies import logprobs

    team = Team.from_config(TeamConfig(mode="shared", model=tiny_paths["word"]), AGENTS)
    prompts, completions = batch(team)
    model = team.model("speaker")
    n = logprobs.shared_prefix_length(model, prompts)
    assert n >= logprobs.MIN_SHARED_PREFIX
    params = [p for p in model.parameters() if p.requires_grad]

    def score(share: bool = True) -> tuple[list[tuple[int, ...]], list[torch.Tensor], list[torch.Tensor], tuple]:
        shapes: list[tuple[int, ...]] = []
        hook = model.register_forward_pre_hook(lambda m, a, kw: shapes.append(tuple(kw["input_ids"].shape)),
                                               with_kwargs=True)
        lps, ents = team.sequence_logprobs("speaker", prompts, completions, with_entropy=True, share=share)
        hook.remove()
        return shapes, lps, ents, torch.autograd.grad(sum(x.sum() for x in lps), params)

    shapes, lps, ents, grads = score()
    width = max(len(p) for p in prompts) + max(len(c) for c in completions)
    assert shapes == [(1, n), (3, width - n)]
    shapes_plain, lps_plain, ents_plain, grads_plain = score(share=False)
    assert shapes_plain == [(3, width)]
    for a, b in zip([*lps, *ents], [*lps_plain, *ents_plain]):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    for g, h in zip(grads, grads_plain):
        torch.testing.assert_close(g, h, atol=1e-5, rtol=1e-4)
    windowed = Team.from_config(TeamConfig(mode="shared", model=tiny_paths["windowed"]), AGENTS)
    assert logprobs.shared_prefix_length(windowed.model("speaker"), prompts) == 0  # a sliding window: no


def test_entropy_as_a_statistic_stays_out_of_the_graph(tiny_paths):
    """``entropy_grad=False`` (the trainer's choice without an entropy bonus): the same entropies,
    detached, while the log-probs keep their gradient."""
    team = Team.from_config(TeamConfig(mode="shared", model=tiny_paths["word"]), AGENTS)
    prompts, completions = batch(team)
    lp_g, ents_g = team.sequence_logprobs("speaker", prompts, completions, with_entropy=True)
    lp, ents = team.sequence_logprobs("speaker", prompts, completions, with_entropy=True, entropy_grad=False)
    assert all(e.requires_grad for e in ents_g if len(e)) and not any(e.requires_grad for e in ents)
    assert all(x.requires_grad for x in lp if len(x))
    for a, b in zip(ents_g, ents):
        torch.testing.assert_close(a.detach(), b)
    for a, b in zip(lp_g, lp):
        torch.testing.assert_close(a.detach(), b.detach())


def test_random_copy_keeps_config_and_tokenizer_not_weights(tiny_paths, tmp_path):
    """``build_random_copy`` needs only a folder's config and tokenizer files (the GPU speed check's
    SmolLM2 stand-in): same shapes and tokens, other weights, seeded."""
    import shutil

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from baselines.policies import build_random_copy

    source = tmp_path / "config_only"
    source.mkdir()
    for f in Path(tiny_paths["bpe"]).iterdir():
        if not f.name.endswith(".safetensors"):
            shutil.copy(f, source / f.name)
    a = build_random_copy(source, tmp_path / "a", seed=3)
    b = build_random_copy(source, tmp_path / "b", seed=3)
    c = build_random_copy(source, tmp_path / "c", seed=4)
    real = AutoModelForCausalLM.from_pretrained(tiny_paths["bpe"])
    ma, mb, mc = (AutoModelForCausalLM.from_pretrained(p) for p in (a, b, c))
    for key in ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"):
        assert getattr(ma.config, key) == getattr(real.config, key)
    shapes = {k: v.shape for k, v in real.state_dict().items()}
    assert {k: v.shape for k, v in ma.state_dict().items()} == shapes
    emb = "model.embed_tokens.weight"
    assert not torch.equal(ma.state_dict()[emb], real.state_dict()[emb])
    assert torch.equal(ma.state_dict()[emb], mb.state_dict()[emb])  # seeded
    assert not torch.equal(ma.state_dict()[emb], mc.state_dict()[emb])
    text = "candidates: apple boat\ntarget: cat"
    assert AutoTokenizer.from_pretrained(a)(text)["input_ids"] == AutoTokenizer.from_pretrained(
        tiny_paths["bpe"]
    )(text)["input_ids"]
    assert ma.generation_config.eos_token_id == real.generation_config.eos_token_id


def test_gradients_flow_and_training_changes_the_policy(tiny_paths):
    team = Team.from_config(TeamConfig(mode="shared", model=tiny_paths["word"]), AGENTS)
    prompts, completions = batch(team)
    params = team.trainable_parameters("speaker")
    logps, _ = team.sequence_logprobs("speaker", prompts[:2], completions[:2])
    before = float(logps[0].detach().sum())
    (-sum(lp.sum() for lp in logps)).backward()
    grads = [p.grad for p in params.values()]
    assert all(g is not None for g in grads) and sum(float(g.abs().sum()) for g in grads) > 0
    opt = torch.optim.Adam(params.values(), lr=1e-2)
    for _ in range(5):
        opt.zero_grad()
        logps, _ = team.sequence_logprobs("speaker", prompts[:1], completions[:1])
        (-logps[0].sum()).backward()
        opt.step()
    after = float(team.sequence_logprobs("speaker", prompts[:1], completions[:1])[0][0].detach().sum())
    assert after > before + 1.0


def test_lora_mode(tiny_paths):
    team = Team.from_config(TeamConfig(mode="lora", model=tiny_paths["word"], lora_r=4, reference=True), AGENTS)
    keys = [team.policy_key(a) for a in AGENTS]
    assert keys[0].model == keys[1].model and keys[0].adapter != keys[1].adapter
    model = team.model("speaker")
    sp, li = team.trainable_parameters("speaker"), team.trainable_parameters("listener")
    assert sp and li and not set(sp) & set(li)
    assert all("lora_" in n and keys[0].adapter in n for n in sp)
    # only adapter weights are trainable, and both adapters stay trainable whichever is active
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == set(sp) | set(li)
    team.model("listener")
    assert {n for n, p in model.named_parameters() if p.requires_grad} == trainable
    base_count = sum(p.numel() for n, p in model.named_parameters() if "lora_" not in n)
    assert sum(p.numel() for p in sp.values()) < base_count / 5

    prompts, completions = batch(team)
    start_sp = team.sequence_logprobs("speaker", prompts, completions)[0]
    start_li = team.sequence_logprobs("listener", prompts, completions)[0]
    for a, b in zip(start_sp, start_li):  # fresh adapters are identity (B = 0)
        torch.testing.assert_close(a, b)
    with torch.no_grad():
        for n, p in sp.items():
            if "lora_B" in n:
                p.normal_(0, 0.5)
    new_sp = team.sequence_logprobs("speaker", prompts, completions)[0]
    new_li = team.sequence_logprobs("listener", prompts, completions)[0]
    assert not torch.allclose(new_sp[0], start_sp[0], atol=1e-3)
    for a, b in zip(new_li, start_li):
        torch.testing.assert_close(a, b)
    # reference = base without adapter: equals the untouched listener, differs from the speaker
    ref = team.reference_logprobs("speaker", prompts, completions)
    for a, b in zip(ref, start_li):
        torch.testing.assert_close(a, b)
        assert not a.requires_grad
    # gradients reach the active agent's adapter only
    logps, _ = team.sequence_logprobs("listener", prompts[:2], completions[:2])
    sum(lp.sum() for lp in logps).backward()
    assert all(p.grad is not None for p in li.values())
    assert all(p.grad is None for p in sp.values())


def test_separate_heterogeneous_team(tiny_paths):
    cfg = TeamConfig(
        mode="separate", models={"speaker": tiny_paths["word"], "listener": tiny_paths["bpe"]}, reference=True
    )
    team = Team.from_config(cfg, AGENTS)
    assert team.policy_key("speaker") != team.policy_key("listener")
    assert team.model("speaker").config.model_type == "qwen2"
    assert team.model("listener").config.model_type == "llama"
    text = "candidates: apple boat cat drum"
    assert team.encode_prompt("speaker", chat(text)) != team.encode_prompt("listener", chat(text))
    assert not set(map(id, team.trainable_parameters("speaker").values())) & set(
        map(id, team.trainable_parameters("listener").values())
    )
    for agent in AGENTS:
        prompts, completions = batch(team, agent)
        logps, _ = team.sequence_logprobs(agent, prompts, completions)
        ref = team.reference_logprobs(agent, prompts, completions)
        for a, b in zip(logps, ref):
            torch.testing.assert_close(a.detach(), b)
    with pytest.raises(ValueError, match="unknown agents"):
        Team.from_config(
            TeamConfig(mode="separate", models={"judge": tiny_paths["word"]}, model=tiny_paths["word"]), AGENTS
        )
    with pytest.raises(ValueError, match="no checkpoint"):
        Team.from_config(TeamConfig(mode="separate", models={"speaker": tiny_paths["word"]}), AGENTS)


@pytest.mark.parametrize("mode", ["shared", "lora", "separate"])
def test_save_and_load(tiny_paths, tmp_path, mode):
    cfg = TeamConfig(
        mode=mode, model=tiny_paths["word"], models={"listener": tiny_paths["bpe"]} if mode == "separate" else {}
    )
    team = Team.from_config(cfg, AGENTS)
    with torch.no_grad():
        for p in team.trainable_parameters().values():
            p.add_(0.05 * torch.randn_like(p))
    team.save(tmp_path / "ckpt")
    loaded = Team.load(tmp_path / "ckpt")
    assert loaded.policy_keys() == team.policy_keys()
    for agent in AGENTS:
        prompts, completions = batch(team, agent)
        a = team.sequence_logprobs(agent, prompts, completions)[0]
        b = loaded.sequence_logprobs(agent, prompts, completions)[0]
        for x, y in zip(a, b):
            torch.testing.assert_close(x, y)
    fresh = Team.from_config(cfg, AGENTS)
    with pytest.raises(ValueError, match="policies"):
        fresh.load_state_dict({"nope": {}})
    exported = team.export_pretrained(tmp_path / "hf")
    assert len(exported) == len(team.policy_keys())


def test_bad_inputs(tiny_paths):
    team = Team.from_config(TeamConfig(mode="shared", model=tiny_paths["word"]), AGENTS)
    with pytest.raises(ValueError, match="empty prompt"):
        team.sequence_logprobs("speaker", [[]], [[5]])
    with pytest.raises(ValueError, match="outside the model vocabulary"):
        team.sequence_logprobs("speaker", [[1, 2]], [[10**6]])
    with pytest.raises(ValueError, match="prompts but"):
        team.sequence_logprobs("speaker", [[1, 2]], [])
    with pytest.raises(RuntimeError, match="no reference"):
        team.reference_logprobs("speaker", [[1, 2]], [[3]])
    with pytest.raises(ValueError, match="mode"):
        Team.from_config(TeamConfig(mode="mixed", model=tiny_paths["word"]), AGENTS)
    with pytest.raises(ValueError, match="needs TeamConfig.model"):
        Team.from_config(TeamConfig(mode="lora"), AGENTS)
    with pytest.raises(ValueError, match="distinct"):
        Team.from_config(TeamConfig(model=tiny_paths["word"]), ["a", "a"])
    empty, _ = team.sequence_logprobs("speaker", [[1, 2]], [[]])
    assert empty[0].shape == (0,)


def _saved_numel(team: Team, prompts, completions) -> tuple[int, list[torch.Tensor]]:
    """Elements autograd saves for backward during one scoring pass, and the log-probs."""
    total = 0

    def pack(t):
        nonlocal total
        total += t.numel()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logps, _ = team.sequence_logprobs("speaker", prompts, completions)
    return total, logps


@pytest.mark.parametrize("mode", ["shared", "lora"])  # (LoRA: peft's wrapping must not switch it off)
def test_gradient_checkpointing(tiny_paths, mode):
    from baselines.generation import GenerationConfig, GenRequest, TransformersBackend

    torch.manual_seed(0)  # the same LoRA initialization in both teams
    plain = Team.from_config(TeamConfig(mode=mode, model=tiny_paths["word"]), AGENTS)
    torch.manual_seed(0)
    ckpt = Team.from_config(
        TeamConfig(mode=mode, model=tiny_paths["word"], gradient_checkpointing=True), AGENTS
    )
    prompts, completions = batch(plain)
    saved_plain, lp_plain = _saved_numel(plain, prompts, completions)
    saved_ckpt, lp_ckpt = _saved_numel(ckpt, prompts, completions)
    assert saved_ckpt < saved_plain / 2  # activations are recomputed, not stored
    for a, b in zip(lp_plain, lp_ckpt):
        torch.testing.assert_close(a, b)
    sum(lp.sum() for lp in lp_plain).backward()
    sum(lp.sum() for lp in lp_ckpt).backward()
    grads_plain = plain.trainable_parameters("speaker")
    for name, p in ckpt.trainable_parameters("speaker").items():
        torch.testing.assert_close(p.grad, grads_plain[name].grad, atol=1e-5, rtol=1e-4)
    cfg = GenerationConfig(max_new_tokens=6, temperature=0)
    reqs = [GenRequest("speaker", prompt_ids=p) for p in prompts]
    a = TransformersBackend(plain, cfg).generate(reqs)
    b = TransformersBackend(ckpt, cfg).generate(reqs)
    assert [o.completion_ids for o in a] == [o.completion_ids for o in b]
