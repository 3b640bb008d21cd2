"""The tiny default model of ``python -m baselines.train`` for any task, for bridge examples and tests.

Same builder and settings as the trainer (:func:`baselines.trainer_setup.env_texts` for the tokenizer
corpus, :class:`baselines.config_sections.ModelConfig` defaults for the shape), saved to a folder
that loads back with ``from_pretrained``; optionally masked to the task's ``action_words``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from baselines.config_sections import ModelConfig
from baselines.policies import build_tiny_model
from baselines.policies.vocab_mask import restrict_vocabulary, word_token_ids
from baselines.trainer_setup import env_texts
from llm_marl_envs.bridges import make_task_env, task_module


def build_task_tiny_model(task: str, path: str | Path, *, env_kwargs: Mapping[str, Any] | None = None,
                          seed: int = 0) -> Path:
    """Build the trainer's default tiny model over ``task``'s texts into ``path``; returns ``path``."""
    m = ModelConfig()
    env = make_task_env(task, env_kwargs)
    texts = env_texts(env, task_module(task))
    words = [str(w) for w in (env_kwargs or {}).get("words", ())]
    return build_tiny_model(path, texts=texts, tokenizer=m.tokenizer, extra_words=words,
                            hidden_size=m.tiny_hidden_size, num_layers=m.tiny_layers, num_heads=m.tiny_heads,
                            seed=seed, init_std=m.tiny_init_std, embed_std=m.tiny_embed_std,
                            head_std=m.tiny_head_std, qk_std=m.tiny_qk_std,
                            tie_embeddings=m.tiny_tie_embeddings, sliding_window=m.tiny_sliding_window)


def mask_to_action_words(model, tokenizer, task: str, env_kwargs: Mapping[str, Any] | None = None):
    """Restrict ``model``'s outputs to the words the task declares (``action_words``) plus EOS, as the
    trainer does; sampling and TRL's training forward then see the same distribution. Returns the hook
    handle, or None when the task declares no words (free text)."""
    env = make_task_env(task, env_kwargs)
    declared = getattr(env.unwrapped, "action_words", None)
    if declared is None:
        return None
    words = list(dict.fromkeys(w for agent in env.possible_agents for w in (declared(agent) or ())))
    return restrict_vocabulary(model, word_token_ids(tokenizer, words)) if words else None
