"""Texts an environment shows its agents, to build a tiny model's tokenizer that covers them.

``env_texts(make_env, policy)`` plays a few seeded episodes of any registered task and
collects every chat message an agent saw or wrote (system instructions, observations,
answers). Feed the result to :func:`baselines.policies.tiny.build_tiny_model` as ``texts``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Policy = Callable[[Any, str, np.random.Generator], str]


def env_texts(make_env: Callable[[], Any], policy: Policy, *, episodes: int = 8, seed: int = 0) -> list[str]:
    """Distinct message texts of ``episodes`` episodes of ``make_env()`` played by ``policy(env, agent, rng)``.

    ``make_env`` builds a PettingZoo AEC env with ``observe_chat`` (every ``TextCollabEnv``);
    the env is reset with seeds ``seed, seed+1, ...``.
    """
    rng = np.random.default_rng(seed)
    texts: dict[str, None] = {}
    for episode in range(episodes):
        env = make_env()
        env.reset(seed=seed + episode)
        for agent in env.agent_iter():
            for message in env.unwrapped.observe_chat(agent):
                texts[message["content"]] = None
            _, _, term, trunc, _ = env.last()
            action = None if term or trunc else policy(env, agent, rng)
            if action is not None:
                texts[action] = None
            env.step(action)
        env.close()
    return list(texts)


def signal_game_texts(*, episodes: int = 16, seed: int = 0, **env_kwargs: Any) -> list[str]:
    """Texts of ``toy/signal_game_v0`` (random play) plus every vocabulary word, for a word tokenizer."""
    from llm_marl_envs.toy import signal_game_v0 as game

    texts = env_texts(lambda: game.env(**env_kwargs), game.random_policy, episodes=episodes, seed=seed)
    words = env_kwargs.get("words", game.DEFAULT_WORDS)
    return [*texts, " ".join(words), "result: correct", "result: wrong, target was"]
