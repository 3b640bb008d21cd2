"""Building what a training run needs: the tokenizer corpus, the team of models, the run folder.

Split out of :mod:`baselines.trainer` so the training loop, the update and these set-up helpers
each live in their own module; everything here is a plain function of the config.
"""

from __future__ import annotations

import random
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines.config import TrainConfig
from baselines.policies import Team, TeamConfig, build_tiny_model
from baselines.policies.vocab_mask import word_token_ids


def env_texts(env: Any, module: Any, n_episodes: int = 32, seed: int = 0) -> list[str]:
    """Texts seen in ``n_episodes`` episodes of the env's scripted random policy (tokenizer corpus)."""
    rng = np.random.default_rng(seed)
    texts: list[str] = []
    for i in range(n_episodes):
        env.reset(seed=seed + i)
        for _ in range(10_000):
            if env.unwrapped.record.done:
                break
            agent = env.agent_selection
            action = module.random_policy(env, agent, rng)
            texts.append(str(action))
            env.step(action)
        for agent in env.unwrapped.possible_agents:
            texts.extend(m["content"] for m in env.observe_chat(agent))
    return texts


def chance_reward(env: Any, module: Any, n_episodes: int = 1000, seed: int = 10**6) -> float:
    """Mean episode return of the env's scripted random policy (the "chance" level)."""
    rng = np.random.default_rng(seed)
    total = 0.0
    for i in range(n_episodes):
        env.reset(seed=seed + i)
        for _ in range(10_000):
            if env.unwrapped.record.done:
                break
            env.step(module.random_policy(env, env.agent_selection, rng))
        total += env.unwrapped.record.total_reward
    return total / n_episodes


def build_team(config: TrainConfig, agents: list[str], texts: list[str], run_dir: Path, env: Any = None) -> Team:
    """Load ``config.model.path``, or build the tiny local model over ``texts`` when it is None;
    then apply the word mask of :func:`mask_words` (``env`` declares its ``action_words``): one per model,
    or, in LoRA mode when the agents' words differ, one per agent's adapter."""
    path = config.model.path
    own = {a for a, m in config.model.agents.items() if m.path is not None}
    if path is None and set(agents) - own:  # some agent plays the team's model: the tiny one
        tiny_dir = Path(config.model.tiny_dir) if config.model.tiny_dir else run_dir / "tiny_model"
        extra = [str(w) for w in config.env.kwargs.get("words", ())]
        build_tiny_model(tiny_dir, texts=texts, tokenizer=config.model.tokenizer, extra_words=extra,
                         hidden_size=config.model.tiny_hidden_size, num_layers=config.model.tiny_layers,
                         num_heads=config.model.tiny_heads, seed=config.seed,
                         init_std=config.model.tiny_init_std, embed_std=config.model.tiny_embed_std,
                         head_std=config.model.tiny_head_std, qk_std=config.model.tiny_qk_std,
                         tie_embeddings=config.model.tiny_tie_embeddings,
                         sliding_window=config.model.tiny_sliding_window)
        path = str(tiny_dir)
    team = Team.from_config(team_config(config, path, agents), agents)
    eos = config.model.mask_eos
    for slot, slot_agents in team.models_and_agents().items():
        if config.model.sharing == "lora":  # one adapter per agent: each agent may have its own mask
            words_of = {a: mask_words(config, env, [a]) for a in slot_agents}
            if len({tuple(w) if w else None for w in words_of.values()}) > 1:
                team.restrict_agent_vocabularies(slot, {a: word_token_ids(team.tokenizer(a), w, eos) if w else None
                                                        for a, w in words_of.items()})
                continue
        words = mask_words(config, env, slot_agents)
        if words:
            team.restrict_vocabulary(slot, word_token_ids(team.tokenizer(slot_agents[0]), words, eos))
    return team


def team_config(config: TrainConfig, path: str | None, agents: list[str]) -> TeamConfig:
    """The :class:`TeamConfig` of ``config.model`` (``path``: the shared / fallback checkpoint):
    ``single_model`` is LoRA with one adapter for every agent; ``model.agents`` gives agents their
    own checkpoint and device (``separate``)."""
    m = config.model
    unknown = sorted(set(m.agents) - set(agents))
    if unknown:
        raise ValueError(f"model.agents names unknown agents {unknown}; this task's agents: {agents}")
    single = m.sharing == "single_model"
    return TeamConfig(mode="lora" if single else m.sharing, model=path, shared_adapter=single,
                      models={a: c.path for a, c in m.agents.items() if c.path is not None},
                      devices={a: c.device for a, c in m.agents.items() if c.device is not None},
                      lora_r=m.lora_r, lora_alpha=m.lora_alpha, dtype=m.dtype, device=config.device,
                      reference=config.loss.kl_coef > 0 or config.log.kl_to_start,
                      gradient_checkpointing=m.gradient_checkpointing)


def mask_words(config: TrainConfig, env: Any, agents: list[str]) -> list[str] | None:
    """Words the model serving ``agents`` is restricted to: ``model.restrict_to_words``, else the env's
    ``action_words`` of those agents (when ``model.mask_to_action_words``), else None (no mask)."""
    if config.model.restrict_to_words:
        return list(config.model.restrict_to_words)
    if not config.model.mask_to_action_words or env is None:
        return None
    declared = [getattr(env.unwrapped, "action_words", lambda agent: None)(agent) for agent in agents]
    free = [a for a, words in zip(agents, declared) if words is None]
    if free and len(free) < len(agents):  # one mask per model: it cannot serve both kinds of agent
        masked = [a for a in agents if a not in free]
        raise ValueError(f"{masked} declare action_words but {free} write free text with the same model: set "
                         "model.sharing to lora or separate, or model.mask_to_action_words=false")
    if free:
        return None  # free-text agents only: no mask
    return list(dict.fromkeys(w for words in declared for w in words))


def default_run_dir(config: TrainConfig) -> Path:
    """``log.out_dir``/``log.run_name``, or ``<env>-<scheme>-<UTC time>`` when no name is given."""
    name = config.log.run_name or (
        f"{config.env.name.replace('/', '_')}-{config.scheme}-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}")
    return Path(config.log.out_dir) / name


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
