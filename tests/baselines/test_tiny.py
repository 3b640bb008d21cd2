"""Tiny local models: tokenizers, chat template, save/load through the Auto classes."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from baselines.policies.corpus import signal_game_texts
from baselines.policies.tiny import CHAT_TEMPLATE, build_tiny_model, build_tokenizer, qwen25_05b_shape_config
from llm_marl_envs.toy.signal_game_v0 import DEFAULT_WORDS


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return signal_game_texts(episodes=8)


@pytest.fixture(scope="module")
def word_dir(tmp_path_factory, texts):
    return build_tiny_model(tmp_path_factory.mktemp("word"), texts=texts, extra_words=("zebra",))


@pytest.fixture(scope="module")
def bpe_dir(tmp_path_factory, texts):
    return build_tiny_model(tmp_path_factory.mktemp("bpe"), texts=texts, tokenizer="bpe", arch="llama")


def _ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def test_signal_game_words_are_single_tokens(word_dir):
    tok = AutoTokenizer.from_pretrained(word_dir)
    for word in (*DEFAULT_WORDS, "zebra", "candidates", "target", "message"):
        assert len(_ids(tok, word)) == 1, word
        assert len(_ids(tok, " " + word)) == 1, word
        assert tok.decode(_ids(tok, word)) == word
    obs = "candidates: apple boat cat drum\ntarget: cat"
    ids = _ids(tok, obs)
    assert len(ids) == 10  # candidates : apple boat cat drum \n target : cat
    assert tok.decode(ids) == obs


@pytest.mark.parametrize("which", ["word", "bpe"])
def test_any_text_round_trips(which, word_dir, bpe_dir):
    tok = AutoTokenizer.from_pretrained(word_dir if which == "word" else bpe_dir)
    for text in ["", "héllo ∑ wörld 🙂", "def f(x):\n\treturn x ** 2  # done", "   \n\n", "<not special>"]:
        assert tok.decode(_ids(tok, text)) == text


def test_chat_template(word_dir):
    tok = AutoTokenizer.from_pretrained(word_dir)
    assert tok.chat_template == CHAT_TEMPLATE
    messages = [
        {"role": "system", "content": "You are the speaker."},
        {"role": "user", "content": "target: cat"},
    ]
    prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert prompt == "<s><|system|>You are the speaker.</s><|user|>target: cat</s><|assistant|>"
    no_gen = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    assert no_gen == prompt.removesuffix("<|assistant|>")
    ids = _ids(tok, prompt)
    assert ids[0] == tok.bos_token_id and ids[-1] == tok.convert_tokens_to_ids("<|assistant|>")
    assert tok.decode(ids, skip_special_tokens=True) == "You are the speaker.target: cat"
    with pytest.raises(Exception, match="unsupported chat role"):
        tok.apply_chat_template([{"role": "tool", "content": "x"}], tokenize=False)


def test_saved_tokenizer_matches_built_one(texts, word_dir, bpe_dir):
    # transformers 5 rebuilds qwen2 tokenizers as Qwen2Tokenizer from vocab+merges: must be identical.
    for path, kind in ((word_dir, "word"), (bpe_dir, "bpe")):
        built = build_tokenizer(texts, kind=kind, extra_words=("zebra",) if kind == "word" else ())
        loaded = AutoTokenizer.from_pretrained(path)
        assert len(loaded) == len(built)
        for text in [*texts[:20], "zebra héllo\n\n  x"]:
            assert _ids(loaded, text) == _ids(built, text)
        assert (loaded.bos_token_id, loaded.eos_token_id, loaded.pad_token_id) == (1, 2, 0)


def test_models_load_back(word_dir, bpe_dir):
    for path, model_type in ((word_dir, "qwen2"), (bpe_dir, "llama")):
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path)
        assert model.config.model_type == model_type
        assert model.config.vocab_size == len(tok)
        assert model.generation_config.eos_token_id == tok.eos_token_id
        ids = torch.tensor([_ids(tok, "candidates: apple")])
        assert model(ids).logits.shape == (1, ids.shape[1], len(tok))


def test_seed_fixes_weights(tmp_path, texts):
    a = AutoModelForCausalLM.from_pretrained(build_tiny_model(tmp_path / "a", texts=texts[:5], seed=3))
    b = AutoModelForCausalLM.from_pretrained(build_tiny_model(tmp_path / "b", texts=texts[:5], seed=3))
    c = AutoModelForCausalLM.from_pretrained(build_tiny_model(tmp_path / "c", texts=texts[:5], seed=4))
    wa, wb, wc = (m.model.embed_tokens.weight for m in (a, b, c))
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="tokenizer kind"):
        build_tokenizer(["x"], kind="chars")
    with pytest.raises(ValueError, match="arch"):
        build_tiny_model(tmp_path, texts=["x"], arch="gpt2")
    with pytest.raises(ValueError, match="divisible"):
        build_tiny_model(tmp_path, texts=["x"], hidden_size=30, num_heads=4)


def test_qwen25_05b_shape():
    config = qwen25_05b_shape_config()
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    n = sum(p.numel() for p in model.parameters())
    assert 490e6 < n < 500e6  # Qwen2.5-0.5B: 494M parameters with tied embeddings


def test_sliding_window_attention_is_local_after_reloading(tmp_path, texts):
    path = build_tiny_model(tmp_path / "sw", texts=texts, sliding_window=4, init_std=0.3, num_layers=2)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    assert model.config.sliding_window == 4 and set(model.config.layer_types) == {"sliding_attention"}
    ids = torch.randint(10, 200, (1, 20))
    with torch.no_grad():
        base = model(ids).logits[0, -1]
        far, near = ids.clone(), ids.clone()
        far[0, 5] = (far[0, 5] + 1) % 200 + 10  # 14 positions back: beyond 2 layers x 3 steps
        near[0, -3] = (near[0, -3] + 1) % 200 + 10  # inside the window
        assert torch.allclose(model(far).logits[0, -1], base, atol=1e-6)
        assert not torch.allclose(model(near).logits[0, -1], base, atol=1e-4)
    with pytest.raises(ValueError, match="qwen2"):
        build_tiny_model(tmp_path / "llama", texts=texts, arch="llama", sliding_window=4)
