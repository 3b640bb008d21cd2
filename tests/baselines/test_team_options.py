"""Team options of the trainer: the single-model baseline (one adapter plays every seat) and a team of
different pretrained models, each agent's model and device given in the config or on the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from baselines.config import load_config
from baselines.policies import Team, build_tiny_model
from baselines.policies.corpus import signal_game_texts
from baselines.train import build_parser, main, resolve_config
from baselines.trainer import Trainer
from tests.baselines.test_rollout import build_signal_model, signal_kwargs

QUIET = ["rollout.tasks_per_step=4", "rollout.group_size=4", "log.tensorboard=false", "log.progress=false",
         "log.plot=false"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_signal_model(tmp_path_factory.mktemp("tiny"), signal_kwargs())


def test_single_model_is_one_adapter_for_every_seat_from_yaml_and_cli(model_dir, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"model": {"sharing": "single_model", "path": str(model_dir)}}))
    assert resolve_config(build_parser().parse_intermixed_args(["--sharing", "single_model"])).model.sharing == \
        "single_model"
    trainer = Trainer(load_config(path, QUIET), tmp_path / "run")
    team = trainer.team
    assert team.policy_key("speaker") == team.policy_key("listener") and team.policy_key("speaker").adapter
    assert len(trainer.param_sets) == 1 and trainer.param_sets[0].agents == ["speaker", "listener"]
    assert all("lora_" in n for n in team.trainable_parameters(None))  # the adapter only, the base frozen
    before = {n: p.detach().clone() for n, p in team.trainable_parameters(None).items()}
    for _ in range(2):  # LoRA's B starts at 0: A moves from the second step on
        m = trainer.train_step()
        assert m["agent/speaker/grad_norm"] > 0 and m["agent/listener/grad_norm"] > 0
    after = team.trainable_parameters(None)
    assert all(not torch.equal(before[n], after[n].detach()) for n in before)
    team.save(tmp_path / "saved")
    assert json.loads((tmp_path / "saved" / "team.json").read_text())["config"]["shared_adapter"] is True
    reloaded = Team.load(tmp_path / "saved")
    assert reloaded.policy_keys() == team.policy_keys()


def test_a_team_of_two_pretrained_models_of_different_shapes_trains_end_to_end_from_the_cli(tmp_path):
    texts = signal_game_texts(episodes=8)
    speaker = build_tiny_model(tmp_path / "qwen", texts=texts, seed=0, init_std=0.3, sliding_window=4)
    listener = build_tiny_model(tmp_path / "llama", texts=texts, tokenizer="bpe", arch="llama", hidden_size=48,
                                num_layers=1, seed=1)
    out = main(["--steps", "2", "--no-eval", "--out", str(tmp_path), "--name", "run",
                "--agent-model", f"speaker={speaker}", "--agent-model", f"listener={listener}",
                "--agent-device", "listener=cpu", *QUIET])
    saved = yaml.safe_load((Path(out["run_dir"]) / "config.yaml").read_text())
    assert saved["model"]["sharing"] == "separate"
    assert saved["model"]["agents"] == {"speaker": {"path": str(speaker), "device": None},
                                        "listener": {"path": str(listener), "device": "cpu"}}
    team = Team.load(Path(out["run_dir"]) / "team")
    assert team.model("speaker").config.model_type == "qwen2" and team.model("listener").config.model_type == "llama"
    assert team.model("speaker").config.hidden_size == 64 and team.model("listener").config.hidden_size == 48
    for agent, start in (("speaker", speaker), ("listener", listener)):
        fresh = Team.from_config(team.config, team.agents).trainable_parameters(agent)
        trained = team.trainable_parameters(agent)
        assert any(not torch.equal(fresh[n], trained[n]) for n in trained), agent  # both models trained
        assert team.checkpoint(agent) == str(start)
    records = [json.loads(line) for line in (Path(out["run_dir"]) / "metrics.jsonl").read_text().splitlines()]
    trained_steps = [r for r in records if "reward" in r]
    assert len(trained_steps) == 2
    assert all(r["agent/speaker/grad_norm"] > 0 and r["agent/listener/grad_norm"] > 0 for r in trained_steps)


@pytest.mark.parametrize("argv,match", [
    (["--agent-model", "speaker"], "AGENT=VALUE"),
    (["--agent-model", "speaker=/x", "model.sharing=lora"], "needs model.sharing=separate"),
    (["--agent-device", "talker=cpu"], "unknown agents"),
])
def test_per_agent_options_reject_bad_input_clearly(argv, match, model_dir, tmp_path):
    with pytest.raises((SystemExit, ValueError), match=match):
        main(["--steps", "1", "--no-eval", "--out", str(tmp_path), f"model.path={model_dir}", *QUIET, *argv])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (run on the GPU machine)")
@pytest.mark.parametrize("scheme", ["grpo", "maac"])
def test_each_agent_on_its_own_device_trains_end_to_end(scheme, tmp_path):
    """speaker on the GPU, listener on the CPU: generation, the update and a critic across both devices."""
    texts = signal_game_texts(episodes=8)
    speaker = build_tiny_model(tmp_path / "qwen", texts=texts, seed=0, init_std=0.3, sliding_window=4)
    listener = build_tiny_model(tmp_path / "llama", texts=texts, tokenizer="bpe", arch="llama", hidden_size=48,
                                num_layers=1, seed=1)
    config = load_config(overrides=[f"scheme={scheme}", "model.sharing=separate", f"model.agents.speaker.path={speaker}",
                                    "model.agents.speaker.device=cuda:0", f"model.agents.listener.path={listener}",
                                    "model.agents.listener.device=cpu", *QUIET])
    trainer = Trainer(config, tmp_path / "run")
    assert trainer.team.device("speaker").type == "cuda" and trainer.team.device("listener").type == "cpu"
    before = {a: {n: p.detach().cpu().clone() for n, p in trainer.team.trainable_parameters(a).items()}
              for a in ("speaker", "listener")}
    for _ in range(2):
        m = trainer.train_step()
        assert m["skipped_updates"] == 0 and m["agent/speaker/grad_norm"] > 0 and m["agent/listener/grad_norm"] > 0
    for agent, params in before.items():
        now = trainer.team.trainable_parameters(agent)
        assert all(not torch.equal(p, now[n].detach().cpu()) for n, p in params.items()), agent
    assert 0 <= trainer.evaluate(16) <= 1
