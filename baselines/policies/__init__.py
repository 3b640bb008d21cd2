"""Policies: tiny local models, the agent-to-model team map, batched token scoring."""

from baselines.policies.corpus import env_texts, signal_game_texts
from baselines.policies.loading import load_model, load_tokenizer
from baselines.policies.logprobs import completion_logprobs
from baselines.policies.team import PolicyKey, Team, TeamConfig
from baselines.policies.tiny import (
    build_random_copy,
    build_shape_model,
    build_tiny_model,
    build_tokenizer,
    qwen25_05b_shape_config,
)

__all__ = [
    "PolicyKey",
    "Team",
    "TeamConfig",
    "build_random_copy",
    "build_shape_model",
    "build_tiny_model",
    "build_tokenizer",
    "completion_logprobs",
    "env_texts",
    "load_model",
    "load_tokenizer",
    "qwen25_05b_shape_config",
    "signal_game_texts",
]
