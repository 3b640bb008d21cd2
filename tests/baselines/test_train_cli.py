"""The command line: YAML config + flags + key=value overrides, outputs, resume, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from baselines.config import TrainConfig, load_config, parse_override
from baselines.train import main
from tests.baselines.test_rollout import build_signal_model, signal_kwargs


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_signal_model(tmp_path_factory.mktemp("tiny"), signal_kwargs())


def test_overrides_parse_yaml_values():
    assert parse_override("optim.lr=1e-3") == (["optim", "lr"], 0.001)
    assert parse_override("advantage.scale_by_std=false") == (["advantage", "scale_by_std"], False)
    assert parse_override("env.kwargs.words=[a, b]") == (["env", "kwargs", "words"], ["a", "b"])
    with pytest.raises(ValueError, match="key=value"):
        parse_override("optim.lr")


def test_precedence_defaults_file_flags_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"scheme": "dr_mas", "steps": 7, "optim": {"lr": 0.01, "epochs": 3}}))
    cfg = load_config(path, ["optim.lr=0.02"], base={"steps": 9})
    assert (cfg.scheme, cfg.steps, cfg.optim.lr, cfg.optim.epochs) == ("dr_mas", 9, 0.02, 3)
    assert cfg.optim.max_grad_norm == TrainConfig().optim.max_grad_norm
    assert cfg.rollout_mode == "episodes"
    assert load_config(overrides=["scheme=magrpo"]).rollout_mode == "joint_tree"
    # another environment does not inherit the signal game's kwargs
    assert load_config(base={"env": {"name": "code/helper_main_v0"}}).env.kwargs == {}


@pytest.mark.parametrize("bad,match", [("optim.lrr=1", "unknown config key"), ("scheme=ppo", "unknown scheme"),
                                       ("optim.lr=fast", "expected a number"),
                                       ("model.sharing=mixed", "is not one of"),
                                       ("scheme=iac rollout.mode=joint_tree", "needs rollout.mode=episodes")])
def test_bad_config_values_raise_clear_errors(bad, match):
    with pytest.raises(ValueError, match=match):
        load_config(overrides=bad.split())


def test_cli_run_writes_every_output_and_resumes(model_dir, tmp_path):
    cfg_file = tmp_path / "run.yaml"
    cfg_file.write_text(yaml.safe_dump({"rollout": {"tasks_per_step": 3, "group_size": 2}, "log": {"save_every": 1}}))
    out = main(["--config", str(cfg_file), "--scheme", "dr_mas", "--steps", "2", "--out", str(tmp_path),
                "--name", "run", "--eval-episodes", "8", f"model.path={model_dir}", "log.progress=false"])
    run = Path(out["run_dir"])
    assert run == tmp_path / "run"
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["scheme"] == "dr_mas" and saved["rollout"]["tasks_per_step"] == 3
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "reward" in r] == [1, 2]
    assert records[-1]["eval/reward"] == out["final_reward"]
    assert "agent/speaker/grad_norm" in records[0] and "agent/listener/amplification" in records[0]
    assert list((run / "tb").glob("events.out.tfevents.*"))
    assert (run / "checkpoints" / "step_1.pt").is_file() and (run / "checkpoints" / "step_2.pt").is_file()
    assert (run / "curves.png").stat().st_size > 1000
    assert (run / "team" / "team.json").is_file()

    again = main(["--resume", str(run / "checkpoints" / "step_1.pt"), "--steps", "3", "--no-eval"])
    assert again["steps"] == 3
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()
             if "reward" in json.loads(line)]
    assert steps == [1, 2, 3]  # records after the checkpoint were replaced by the resumed run's


def test_print_config(capsys):
    main(["--print-config", "--scheme", "at_grpo", "rollout.group_size=5"])
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["scheme"] == "at_grpo" and printed["rollout"]["group_size"] == 5


CONFIGS = Path(__file__).resolve().parents[2] / "baselines" / "configs"


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_loads(path):
    config = load_config(path)
    assert config.steps > 0


def test_signal_game_yaml_spells_out_the_embedded_default():
    assert load_config(CONFIGS / "signal_game.yaml").to_dict() == TrainConfig().to_dict()
