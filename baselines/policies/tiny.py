"""Tiny local language models for tests and CPU experiments (no network, no hub).

:func:`build_tiny_model` writes a directory that loads back through the ordinary
``AutoTokenizer.from_pretrained`` / ``AutoModelForCausalLM.from_pretrained`` path:

* a tokenizer defined here with the HF ``tokenizers`` library (byte-level BPE on Qwen2's
  pre-tokenizer, so any text round-trips), wrapped as a ``PreTrainedTokenizerFast`` with
  ``<s>``/``</s>``/``<pad>``/``<unk>`` and role tokens, and a jinja chat template
  (system / user / assistant, ``add_generation_prompt``):

  - ``"word"``: merges learned without a size limit, so every word found in ``texts`` (or
    given in ``extra_words``) is ONE token, both alone (``"cat"``) and after a space
    (``" cat"``); ``"candidates: apple boat"`` is ``candidates``, ``:``, `` apple``, `` boat``.
    Decoding gives the text back exactly (a word after a space decodes with its space).
  - ``"bpe"``: a byte-level BPE of ``bpe_vocab_size`` tokens trained in memory on ``texts``.

* a small Qwen2 or Llama config with random weights (seeded).

:func:`qwen25_05b_shape_config` gives a Qwen2 config of Qwen2.5-0.5B's shape, for speed
benchmarks with random weights on a GPU. :func:`build_random_copy` keeps a real model's config,
tokenizer and chat template and draws new weights: a model that measures speed just like the real
one where its weights cannot travel (it needs only the folder's config and tokenizer files).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    LlamaConfig,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
    Qwen2Config,
)
from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

from baselines.models.presets import resolve_model

BOS, EOS, PAD, UNK = "<s>", "</s>", "<pad>", "<unk>"
ROLE_TOKENS: tuple[str, ...] = ("<|system|>", "<|user|>", "<|assistant|>")
SPECIAL_TOKENS: tuple[str, ...] = (PAD, BOS, EOS, UNK, *ROLE_TOKENS)

# Each message is "<|role|>content</s>"; the assistant's turn ends with EOS, which is what the
# model learns to emit to stop. The prompt for a new answer ends with "<|assistant|>".
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- for message in messages -%}"
    "{%- if message['role'] not in ['system', 'user', 'assistant'] -%}"
    "{{ raise_exception('unsupported chat role: ' + message['role']) }}"
    "{%- endif -%}"
    "{{ '<|' + message['role'] + '|>' + message['content'] + eos_token }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|assistant|>' }}{%- endif -%}"
)

# Both tokenizer kinds share Qwen2's byte-level pipeline (NFC, Qwen2's pre-tokenizer regex, byte-level
# BPE). transformers 5 rebuilds a ``qwen2`` checkpoint's tokenizer as ``Qwen2Tokenizer`` from the
# saved vocab and merges, so the pipeline must be exactly that one for the saved tokenizer to load
# back unchanged through ``AutoTokenizer`` (``llama`` checkpoints load ``tokenizer.json`` as is).
_LETTERS = re.compile(r"[^\W\d_]+", re.UNICODE)
_UNBOUNDED = 1 << 22

TokenizerKind = Literal["word", "bpe"]
Arch = Literal["qwen2", "llama"]


def _byte_level_bpe() -> Tokenizer:
    tok = Tokenizer(
        models.BPE(unk_token=None, continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False)
    )
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    return tok


def word_corpus(texts: Iterable[str], extra_words: Iterable[str] = ()) -> list[str]:
    """Training lines for the word tokenizer: the texts, and every word alone and after a space."""
    texts = list(texts)
    words = {w for text in [*texts, *extra_words] for w in _LETTERS.findall(text)}
    return [*texts, *sorted(words), *(" " + w for w in sorted(words))]


def build_tokenizer(
    texts: Iterable[str] = (),
    *,
    kind: TokenizerKind = "word",
    extra_words: Iterable[str] = (),
    bpe_vocab_size: int = 512,
) -> PreTrainedTokenizerFast:
    """A locally defined byte-level tokenizer (see the module docstring) with special tokens and chat template.

    ``"word"`` trains BPE merges without a vocabulary limit, so every pre-token seen in ``texts``
    (a word, a word after a space, a punctuation run) and every word of ``extra_words`` becomes
    one token; ``"bpe"`` stops at ``bpe_vocab_size`` tokens. Either way, any text round-trips.
    """
    texts = list(texts)
    if kind == "word":
        corpus, vocab_size = word_corpus(texts, extra_words), _UNBOUNDED
    elif kind == "bpe":
        corpus, vocab_size = [*texts, *extra_words], max(bpe_vocab_size, 256 + len(SPECIAL_TOKENS))
    else:
        raise ValueError(f"unknown tokenizer kind {kind!r}; expected 'word' or 'bpe'")
    tok = _byte_level_bpe()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        additional_special_tokens=list(ROLE_TOKENS),
        clean_up_tokenization_spaces=False,
        padding_side="left",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tiny_config(
    arch: Arch,
    tokenizer: PreTrainedTokenizerFast,
    *,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    max_position_embeddings: int = 4096,
    init_std: float = 0.02,
    tie_embeddings: bool = True,
    sliding_window: int | None = None,
) -> Qwen2Config | LlamaConfig:
    """A small decoder config whose vocabulary and special ids match ``tokenizer``.

    ``init_std`` is the weights' initialization std (transformers' ``initializer_range``);
    ``tie_embeddings`` shares the input embedding and the output layer. ``sliding_window``
    (Qwen2 only) limits every layer's attention to the last ``sliding_window`` positions
    (Mistral-style local attention; the receptive field still grows with depth).
    """
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size {hidden_size} must be divisible by num_heads {num_heads}")
    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=max(1, num_heads // 2) if num_heads % 2 == 0 else num_heads,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=tie_embeddings,
        initializer_range=init_std,
    )
    if arch == "qwen2":
        if sliding_window is not None:
            if sliding_window < 1:
                raise ValueError(f"sliding_window must be >= 1, got {sliding_window}")
            common.update(use_sliding_window=True, sliding_window=sliding_window, max_window_layers=0)
        return Qwen2Config(**common)
    if sliding_window is not None:
        raise ValueError(f"sliding_window is supported for arch 'qwen2' only, not {arch!r}")
    if arch == "llama":
        return LlamaConfig(**common)
    raise ValueError(f"unknown arch {arch!r}; expected 'qwen2' or 'llama'")


def build_tiny_model(
    path: str | Path,
    *,
    texts: Iterable[str] = (),
    tokenizer: TokenizerKind = "word",
    arch: Arch = "qwen2",
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    seed: int = 0,
    extra_words: Iterable[str] = (),
    bpe_vocab_size: int = 512,
    init_std: float = 0.02,
    embed_std: float | None = None,
    head_std: float | None = None,
    qk_std: float | None = None,
    tie_embeddings: bool = True,
    sliding_window: int | None = None,
) -> Path:
    """Build a tiny random-weight causal LM with a local tokenizer and save it to ``path``.

    Initialization: every weight ~ N(0, ``init_std``), except the input embedding
    (``embed_std``), the attention query/key projections (``qk_std``; small values give
    near-uniform attention at init) and, when ``tie_embeddings`` is False, the output layer
    (``head_std``); None means ``init_std``. These knobs set how strongly the initial
    next-token distribution depends on the prompt (docs/training.md, "Measured results").

    Returns ``path``; load it with ``AutoTokenizer.from_pretrained(path)`` and
    ``AutoModelForCausalLM.from_pretrained(path)`` (no network involved).
    """
    if head_std is not None and tie_embeddings and head_std != (embed_std if embed_std is not None else init_std):
        raise ValueError("head_std differs from the embedding's std but tie_embeddings=True shares them")
    path = Path(path)
    tok = build_tokenizer(texts, kind=tokenizer, extra_words=extra_words, bpe_vocab_size=bpe_vocab_size)
    config = tiny_config(
        arch, tok, hidden_size=hidden_size, num_layers=num_layers, num_heads=num_heads, init_std=init_std,
        tie_embeddings=tie_embeddings, sliding_window=sliding_window,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
        with torch.no_grad():
            if embed_std is not None:
                embedding = model.get_input_embeddings()
                embedding.weight.normal_(0.0, embed_std)
                if embedding.padding_idx is not None:
                    embedding.weight[embedding.padding_idx].zero_()
            if qk_std is not None:
                for name, module in model.named_modules():
                    if name.endswith(("q_proj", "k_proj")):
                        module.weight.normal_(0.0, qk_std)
            if head_std is not None and not tie_embeddings:
                model.get_output_embeddings().weight.normal_(0.0, head_std)
    return _save(model, tok, path)


def qwen25_05b_shape_config(
    vocab_size: int = 151_936,
    *,
    bos_token_id: int | None = None,
    eos_token_id: int = 151_643,
    pad_token_id: int = 151_643,
) -> Qwen2Config:
    """A Qwen2 config with Qwen2.5-0.5B's shape (24 layers, 896 hidden, 14/2 heads), for random-init benchmarks."""
    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        max_position_embeddings=32_768,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        bos_token_id=bos_token_id,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
    )


def build_shape_model(
    path: str | Path, config: Qwen2Config | LlamaConfig, *, texts: Iterable[str] = (), seed: int = 0
) -> Path:
    """Save a random-weight model of ``config``'s shape with a local word tokenizer (for speed benchmarks).

    The tokenizer's special ids replace the config's; ids beyond the tokenizer's vocabulary
    decode to nothing (random weights sample them), which is fine for timing.
    """
    path = Path(path)
    tok = build_tokenizer(texts, kind="word")
    if config.vocab_size < len(tok):
        raise ValueError(f"config vocab_size {config.vocab_size} < tokenizer size {len(tok)}")
    config.bos_token_id, config.eos_token_id, config.pad_token_id = (
        tok.bos_token_id,
        tok.eos_token_id,
        tok.pad_token_id,
    )
    return _save(_random_model(config, seed), tok, path)


def build_random_copy(source: str | Path, path: str | Path, *, seed: int = 0) -> Path:
    """Save a model with ``source``'s config, tokenizer and generation config and random weights.

    ``source`` is a model preset or a local folder; only its config and tokenizer files are read,
    so a folder without weights will do. The result generates at the real model's speed per token
    (same shapes, same vocabulary) but not its text: random weights rarely emit EOS, so every row
    runs to ``max_new_tokens``. For speed benchmarks only.
    """
    source, path = Path(resolve_model(str(source))), Path(path)
    config = AutoConfig.from_pretrained(source)
    tok = AutoTokenizer.from_pretrained(source)
    try:
        generation = GenerationConfig.from_pretrained(source)
    except OSError:  # no generation_config.json: take the special ids from the config
        generation = GenerationConfig.from_model_config(config)
    return _save(_random_model(config, seed), tok, path, generation)


def _random_model(config: PretrainedConfig, seed: int) -> PreTrainedModel:
    """A model of ``config`` with weights drawn from ``seed`` (the global RNG is left untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return AutoModelForCausalLM.from_config(config)


def _save(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    path: Path,
    generation: GenerationConfig | None = None,
) -> Path:
    """Save ``model`` with ``generation`` (default: the tokenizer's special ids) and ``tok`` into ``path``."""
    model.generation_config = generation or GenerationConfig(
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id
    )
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path
