"""A shared model cannot mask one agent to its action words and leave another free: a clear error."""

from __future__ import annotations

import pytest

from baselines.config import TrainConfig
from baselines.trainer import mask_words
from llm_marl_envs.core import make_env_fn
from llm_marl_envs.toy import signal_game_v0


class _FreeListener(signal_game_v0.raw_env):
    def action_words(self, agent):
        return None if agent == "listener" else super().action_words(agent)


def test_mixed_action_words_on_one_model_is_an_error():
    env = make_env_fn(_FreeListener)()
    config = TrainConfig()
    with pytest.raises(ValueError, match=r"\['speaker'\] declare action_words but \['listener'\]"):
        mask_words(config, env, ["speaker", "listener"])
    assert mask_words(config, env, ["speaker"])  # one adapter per agent: each gets its own mask
    assert mask_words(config, env, ["listener"]) is None
