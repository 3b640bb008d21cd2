"""Trainer: one real optimization step per scheme, per-agent optimizers and metrics, update guards."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from baselines.advantages import AdvantageResult, compute_advantages
from baselines.config import load_config
from baselines.policies.vocab_mask import word_token_ids
from baselines.trainer import Trainer, mask_words
from tests.baselines.test_rollout import build_signal_model, signal_kwargs

SCHEMES = ("grpo", "dr_mas", "magrpo", "at_grpo", "mars2", "sharp", "rloo", "remax", "reinforce", "iac", "maac")
PER_AGENT = ("reward", "adv_mean", "adv_std", "grad_norm", "kl", "clip_frac", "entropy", "response_len",
             "mu", "sigma", "amplification")


@pytest.fixture(scope="module")
def namer_dir(tmp_path_factory) -> Path:
    return build_signal_model(tmp_path_factory.mktemp("namer"), signal_kwargs(), imitate_steps=25)


def small_config(model_dir: Path, *overrides: str):
    cfg = load_config(overrides=["rollout.tasks_per_step=6", "rollout.group_size=4", "generation.max_new_tokens=1",
                                 "log.tensorboard=false", "log.progress=false", f"model.path={model_dir}",
                                 *overrides])
    return cfg


def snapshot(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in trainer.team.trainable_parameters(None).items()}


@pytest.mark.parametrize("scheme", SCHEMES)
def test_one_step_per_scheme_changes_every_trained_parameter(scheme, namer_dir, tmp_path):
    trainer = Trainer(small_config(namer_dir, f"scheme={scheme}"), tmp_path)
    before = snapshot(trainer)
    metrics = trainer.train_step()
    after = snapshot(trainer)
    unchanged = [n for n in before if torch.equal(before[n], after[n])]
    assert not unchanged, f"{scheme}: parameters not updated: {unchanged[:5]}"
    assert metrics["skipped_updates"] == 0
    for agent in ("speaker", "listener"):
        for key in PER_AGENT:
            value = metrics[f"agent/{agent}/{key}"]
            assert np.isfinite(value), (agent, key)
        assert metrics[f"agent/{agent}/grad_norm"] > 0
    assert metrics["tokens_per_s/train"] > 0 and metrics["tokens_per_s/generation"] > 0
    assert 0 <= metrics["reward"] <= 1


def test_shared_model_logs_separate_per_agent_gradient_norms(namer_dir, tmp_path):
    trainer = Trainer(small_config(namer_dir), tmp_path)
    assert len(trainer.param_sets) == 1 and trainer.param_sets[0].agents == ["speaker", "listener"]
    m = trainer.train_step()
    g_s, g_l = m["agent/speaker/grad_norm"], m["agent/listener/grad_norm"]
    assert g_s > 0 and g_l > 0 and g_s != g_l


@pytest.mark.parametrize("sharing", ["lora", "separate"])
def test_per_agent_optimizers_and_learning_rates(sharing, namer_dir, tmp_path):
    trainer = Trainer(small_config(namer_dir, f"model.sharing={sharing}", "optim.agent_lr={speaker: 0.005}"),
                      tmp_path)
    assert [s.agents for s in trainer.param_sets] == [["speaker"], ["listener"]]
    lrs = {s.agents[0]: s.optimizer.param_groups[0]["lr"] for s in trainer.param_sets}
    assert lrs == {"speaker": 0.005, "listener": trainer.config.optim.lr}
    own = {a: {n: p.detach().clone() for n, p in trainer.team.trainable_parameters(a).items()}
           for a in ("speaker", "listener")}
    assert not set(own["speaker"]) & set(own["listener"]) or sharing == "separate"
    trainer.train_step()
    if sharing == "lora":  # LoRA's B starts at 0, so A gets its first non-zero gradient at step 2
        trainer.train_step()
    for agent, params in own.items():
        now = trainer.team.trainable_parameters(agent)
        unchanged = [n for n, p in params.items() if torch.equal(p, now[n].detach())]
        assert not unchanged, (agent, unchanged[:5])


def test_shared_weights_with_different_learning_rates_is_an_error(namer_dir, tmp_path):
    with pytest.raises(ValueError, match="share the weights"):
        Trainer(small_config(namer_dir, "optim.agent_lr={speaker: 0.005}"), tmp_path)


def test_non_finite_update_is_skipped(namer_dir, tmp_path):
    trainer = Trainer(small_config(namer_dir), tmp_path)
    table = trainer.collect(trainer.next_tasks()).table
    adv = compute_advantages(table, "grpo")
    bad = adv.advantages.copy()
    bad[0] = np.nan
    before = snapshot(trainer)
    result = trainer.update(table, AdvantageResult(bad, adv.keep, adv.groups, adv.values, adv.stats))
    assert result["skipped"] == 1
    after = snapshot(trainer)
    assert all(torch.equal(before[n], after[n]) for n in before)
    assert all(p.grad is None for s in trainer.param_sets for p in s.params)


def test_epochs_and_minibatches_take_several_optimizer_steps(namer_dir, tmp_path):
    trainer = Trainer(small_config(namer_dir, "optim.epochs=2", "optim.minibatch_size=16"), tmp_path)
    trainer.train_step()
    state = trainer.param_sets[0].optimizer.state_dict()["state"]
    rows = 6 * 4 * 2  # tasks x G x agents
    assert {int(s["step"]) for s in state.values()} == {2 * int(np.ceil(rows / 16))}


def test_kl_to_the_frozen_reference(namer_dir, tmp_path):
    trainer = Trainer(small_config(namer_dir, "loss.kl_coef=0.1", "optim.lr=0.01"), tmp_path)
    assert trainer.team.has_reference
    first = trainer.train_step()
    second = trainer.train_step()
    assert first["agent/speaker/kl_ref"] == pytest.approx(0.0, abs=1e-6)  # policy == reference at step 1
    assert second["agent/speaker/kl_ref"] > 0


def test_kl_to_the_start_is_measured_without_entering_the_loss(namer_dir, tmp_path):
    """``log.kl_to_start``: every step logs each agent's KL to its starting policy (the adapter-free base),
    0 at the first step, and the weights move exactly as without it."""
    runs = {}
    for flag in (True, False):
        trainer = Trainer(small_config(namer_dir, "model.sharing=lora", "optim.lr=0.01",
                                       f"log.kl_to_start={str(flag).lower()}"), tmp_path / str(flag))
        metrics = [trainer.train_step() for _ in range(3)]
        runs[flag] = (snapshot(trainer), metrics)
    weights, metrics = runs[True]
    for agent in ("speaker", "listener"):
        assert metrics[0][f"agent/{agent}/kl_ref"] == pytest.approx(0.0, abs=1e-6)
        assert metrics[2][f"agent/{agent}/kl_ref"] > 0
        assert f"agent/{agent}/kl_ref" not in runs[False][1][2]
        assert 0.0 <= metrics[0][f"agent/{agent}/zero_var_groups"] <= 1.0
    assert all(torch.equal(weights[n], runs[False][0][n]) for n in weights)


@pytest.mark.parametrize("sharing", ["shared", "lora", "separate"])
def test_env_action_words_mask_every_policy_and_its_reference(sharing, namer_dir, tmp_path):
    trainer = Trainer(small_config(namer_dir, f"model.sharing={sharing}", "loss.kl_coef=0.1"), tmp_path)
    team = trainer.team
    tok = team.tokenizer("speaker")
    allowed = set(word_token_ids(tok, trainer.config.env.kwargs["words"]))
    prompt = torch.tensor([team.encode_prompt("speaker", [{"role": "user", "content": "target: cat"}])])
    for agent in trainer.agents:
        with torch.no_grad():
            probs = torch.softmax(team.model(agent)(prompt).logits[0, -1], -1)
            word, other = sorted(allowed)[0], min(set(range(len(tok))) - allowed)
            ref = team.reference_logprobs(agent, [prompt[0].tolist()] * 2, [[word], [other]])
        assert set(torch.nonzero(probs > 1e-12).flatten().tolist()) <= allowed, agent
        assert probs[sorted(allowed)].sum() == pytest.approx(1.0, abs=1e-6)
        # the reference (== the policy before any update) is masked the same way
        assert ref[0].item() == pytest.approx(torch.log(probs[word]).item(), abs=1e-5)
        assert ref[1].item() < -1e6


def test_mask_words_sources(namer_dir):
    import llm_marl_envs

    signal = llm_marl_envs.make("toy/signal_game_v0", words=["apple", "boat", "cat"], n_candidates=3)
    config = small_config(namer_dir)
    assert mask_words(config, signal, ["speaker", "listener"]) == ["apple", "boat", "cat"]
    config.model.restrict_to_words = ["cat"]
    assert mask_words(config, signal, ["speaker"]) == ["cat"]  # an explicit list wins
    config.model.restrict_to_words, config.model.mask_to_action_words = None, False
    assert mask_words(config, signal, ["speaker"]) is None
    code = load_config(overrides=["env.name=code/helper_main_v0"])
    assert code.model.mask_to_action_words and code.model.restrict_to_words is None
    helper = llm_marl_envs.make("code/helper_main_v0")
    assert mask_words(code, helper, list(helper.possible_agents)) is None  # free text: no mask


def test_zero_variance_share_counts_groups_of_equal_values():
    from baselines.step_metrics import zero_variance_share

    groups, values = np.array([0, 0, 1, 1, 2]), np.array([1.0, 1.0, 0.0, 1.0, 5.0])
    assert zero_variance_share(groups, values) == 0.5  # group 2 is a singleton: not counted
    assert np.isnan(zero_variance_share(np.array([3]), np.array([1.0])))
