"""TRL bridge: GRPOTrainer trains the tiny default model through the episode rollout_func on the
signal game above chance, and trains one seat of helper/main against a scripted partner."""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import pytest

from tests.bridges.conftest import need

pytest.importorskip("torch")

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "bridges.md"
SIGNAL = "toy/signal_game_v0"
SIGNAL_KWARGS = {"n_candidates": 4, "message_length": 1, "words": ["apple", "boat", "cat", "drum"]}  # chance 0.25


def _config(tmp_path: Path, **kwargs):
    from trl import GRPOConfig

    base = dict(output_dir=str(tmp_path / "out"), use_cpu=True, beta=0.0, logging_steps=1, report_to="none",
                save_strategy="no", lr_scheduler_type="constant", warmup_steps=0, disable_tqdm=True)
    return GRPOConfig(**{**base, **kwargs})


def test_the_published_script_prints_the_documented_figure(capsys):
    """docs/bridges.md quotes what ``python -m baselines.experiments.trl_signal_game --seed 0`` prints; it must
    print it (stock GRPOTrainer, our rollout_func, the trainer's tiny model, 30 steps)."""
    need("trl")
    from baselines.experiments import trl_signal_game

    documented = re.search(r"^(seed 0: mean team return, first 5 steps [\d.]+, last 5 steps [\d.]+)$", GUIDE.read_text(),
                           re.M)
    assert documented, "docs/bridges.md quotes the script's seed-0 line"
    printed = trl_signal_game.main(["--seed", "0"])
    assert printed in capsys.readouterr().out
    numbers = [float(x) for x in re.findall(r"\d\.\d+", printed)]
    assert numbers == pytest.approx([float(x) for x in re.findall(r"\d\.\d+", documented.group(1))], abs=0.01), printed
    assert numbers[0] < 0.45 and numbers[1] > 0.6  # from chance (0.25) to clearly above


def test_rollout_rows_hold_one_seat_with_task_text_between_answers(tmp_path, monkeypatch):
    """One row per prompt copy, of the named seat: its answers (env_mask 1) and the task text between them (0)."""
    need("trl")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    import llm_marl_envs
    from baselines.bridges.tiny import build_task_tiny_model
    from baselines.bridges.trl import (
        episode_dataset,
        episode_prompt,
        make_rollout_func,
        parse_prompt,
        team_return_reward,
    )

    assert parse_prompt([{"role": "user", "content": episode_prompt(SIGNAL, 4, "speaker")}]) == (SIGNAL, 4, "speaker")
    kwargs = {**SIGNAL_KWARGS, "n_rounds": 2}  # two turns: the rows interleave answers and task text
    path = build_task_tiny_model(SIGNAL, tmp_path / "tiny", env_kwargs=kwargs, seed=0)
    tokenizer = AutoTokenizer.from_pretrained(path)
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(path), processing_class=tokenizer,
                          reward_funcs=team_return_reward, args=_config(tmp_path, max_steps=1, num_generations=2,
                          per_device_train_batch_size=2, max_completion_length=2),
                          train_dataset=episode_dataset(SIGNAL, range(2), env_kwargs=kwargs),
                          rollout_func=make_rollout_func(SIGNAL, env_kwargs=kwargs))
    prompts = [episode_prompt(SIGNAL, 7, "listener")] * 2 + [episode_prompt(SIGNAL, 8, "speaker")] * 2
    out = trainer.rollout_func(prompts, trainer)
    assert out["seat"] == ["listener", "listener", "speaker", "speaker"] and out["logprobs"] is None
    env = llm_marl_envs.make(SIGNAL, **kwargs)
    env.reset(seed=8)  # the speaker's first prompt is fixed by the seed
    first = tokenizer.apply_chat_template(env.observe_chat("speaker"), tokenize=False, add_generation_prompt=True)
    for i in range(4):
        ids, mask = out["completion_ids"][i], out["env_mask"][i]
        assert len(ids) == len(mask) and 0 in mask  # task text between the answers
        assert len(_answers(tokenizer, ids, mask)) == 2  # one answer per round
        assert "format_penalty" in out["reward_components"][i] and out["team_return"][i] in (0.0, 1.0, 2.0)
    assert out["prompt_ids"][2] == out["prompt_ids"][3] == tokenizer.encode(first, add_special_tokens=False)


def _answers(tokenizer, ids: list[int], mask: list[int]) -> list[str]:
    runs, current = [], []
    for token, m in zip(ids, mask):
        if m:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return [tokenizer.decode(r, skip_special_tokens=True) for r in runs]


def test_environment_factory_trains_helper_against_scripted_main(tmp_path, monkeypatch):
    """The class alone reaches the direct return; under GRPOTrainer a user's reward function, which TRL calls
    before ``get_reward``, sees every episode finished through the documented accessors."""
    need("trl")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    import llm_marl_envs
    from baselines.bridges.tiny import build_task_tiny_model
    from baselines.bridges.trl_env import seat_dataset, seat_environment, seat_reward
    from llm_marl_envs.testing import play_episode

    task, spec = "code/helper_main_v0", llm_marl_envs.spec("code/helper_main_v0")
    best = spec.load().best_policy
    kwargs = dict(spec.test_kwargs)
    seat = "helper"
    env_class = seat_environment(task, seat, {a: best for a in ("main",)}, env_kwargs=kwargs)
    # the class alone, driven by the scripted helper, reaches the same return as a direct run
    env = env_class()
    env.reset(seed=0)
    env.answer(best(env._env, seat))
    assert env.team_return == env.get_reward() == play_episode(spec.make(**kwargs), best, seed=0) > 0
    assert env.record.done and env.reward_components["tests"] == 1.0  # accessors of the finished episode
    unfinished = env_class()
    unfinished.reset(seed=0)  # the model never answers: the accessors finish the episode with empty answers
    assert unfinished.reward_components["tests"] == 0.0 and unfinished.record.done
    assert 0 <= unfinished.team_return < env.team_return

    import trl

    path = build_task_tiny_model(task, tmp_path / "tiny", env_kwargs=kwargs, seed=0)
    tokenizer = AutoTokenizer.from_pretrained(path)
    template = Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja"  # renders tool calls
    tokenizer.chat_template = template.read_text()
    model = AutoModelForCausalLM.from_pretrained(path)
    args = _config(tmp_path, max_steps=2, learning_rate=1e-4, per_device_train_batch_size=4, num_generations=2,
                   max_completion_length=8, seed=0)
    seen: list[tuple[float, bool]] = []

    def user_reward(environments, **_):  # a user's own reward function: TRL calls it before get_reward
        values = seat_reward("tests")(environments)
        seen.extend((e.team_return, e.record.done) for e in environments)
        return values

    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=args, train_dataset=seat_dataset(range(8)),
                          environment_factory=env_class, reward_funcs=[user_reward, seat_reward()])
    assert [t.__name__ for t in trainer.tools] == ["answer"]  # the accessors are not offered as tools
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    assert trainer.state.global_step == 2
    assert len(seen) == 8 and all(done for _, done in seen)
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logs) == 2
    for h in logs:  # our team_return reward function and the class's get_reward column agree
        assert h["rewards/team_return/mean"] == h[f"rewards/{env_class.__name__}/mean"]
    assert os.path.isdir(tmp_path / "out")
