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


def test_lora_team_masks_each_agent_to_its_own_words(tmp_path):
    """Message words disjoint from the candidates: in a LoRA team the speaker samples only message words
    and the listener only candidates (one mask per adapter), and the training forward scores the
    sampled tokens exactly as the sampler did (same masked distribution)."""
    import torch

    from baselines.config import load_config
    from baselines.trainer import Trainer

    kwargs = {"words": ["cat", "dog", "fox", "owl"], "n_candidates": 4, "message_length": 1,
              "message_words": ["red", "blue", "green", "pink"]}
    config = load_config(overrides=[f"env.kwargs={kwargs}", "model.sharing=lora", "rollout.tasks_per_step=6",
                                    "rollout.group_size=4", "generation.max_new_tokens=1", "log.tensorboard=false",
                                    "log.progress=false", "model.mask_eos=false"])
    trainer = Trainer(config, tmp_path)
    assert trainer.team.per_agent_masks and trainer.backend_options()["mixed_adapters"] is False
    table = trainer.collect(trainer.next_tasks()).table
    said = {"speaker": set(), "listener": set()}
    for agent in said:
        rows = [i for i in range(len(table)) if table.agent[i] == agent]
        said[agent] = {trainer.team.decode(agent, table.completion_ids[i]).strip() for i in rows}
        logps, _ = trainer.team.sequence_logprobs(agent, [table.prompt_ids[i] for i in rows],
                                                  [table.completion_ids[i] for i in rows])
        for i, lp in zip(rows, logps):
            torch.testing.assert_close(lp.detach(), torch.tensor(table.old_logprobs[i]), atol=1e-4, rtol=0)
    # model.mask_eos=false: a one-word answer is a word, never the empty answer EOS would make
    assert said["speaker"] and said["speaker"] <= {"red", "blue", "green", "pink"}
    assert said["listener"] and said["listener"] <= {"cat", "dog", "fox", "owl"}
    tok = trainer.team.tokenizer("speaker")
    from baselines.policies.vocab_mask import word_token_ids

    assert tok.eos_token_id in word_token_ids(tok, ["red"]) and tok.eos_token_id not in word_token_ids(tok, ["red"], eos=False)
