"""TRL's stock GRPOTrainer learns the signal game through our rollout_func bridge (docs/bridges.md).

Run: python -m baselines.experiments.trl_signal_game --seed 0
It prints the mean team return of every step, then of the first and last five (chance is 0.25).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import warnings

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from baselines.bridges.tiny import build_task_tiny_model, mask_to_action_words  # noqa: E402
from baselines.bridges.trl import episode_dataset, make_rollout_func, team_return_reward  # noqa: E402

TASK = "toy/signal_game_v0"
KWARGS = {"n_candidates": 4, "message_length": 1, "words": ["apple", "boat", "cat", "drum"]}  # chance 0.25


def train(seed: int = 0, steps: int = 30) -> list[float]:
    """Train the trainer's tiny default model (built locally) for ``steps``; the mean team return per step."""
    folder = tempfile.mkdtemp()
    path = build_task_tiny_model(TASK, f"{folder}/tiny", env_kwargs=KWARGS, seed=seed)
    tokenizer, model = AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path)
    mask_to_action_words(model, tokenizer, TASK, KWARGS)  # sample only the game's words, as baselines.train does
    args = GRPOConfig(output_dir=f"{folder}/out", use_cpu=True, seed=seed, max_steps=steps, learning_rate=1e-3,
                      lr_scheduler_type="constant", warmup_steps=0, beta=0.0,
                      per_device_train_batch_size=32, num_generations=8,  # 32 episodes a step: 4 prompts x 8
                      max_completion_length=1, report_to="none", save_strategy="no", logging_steps=1,
                      gradient_checkpointing=False)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=args, reward_funcs=team_return_reward,
                          train_dataset=episode_dataset(TASK, seeds=range(256), env_kwargs=KWARGS),  # (seed, seat)
                          rollout_func=make_rollout_func(TASK, env_kwargs=KWARGS))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    return [h["reward"] for h in trainer.state.log_history if "reward" in h]


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args(argv)
    rewards = train(args.seed, args.steps)
    print("mean team return per step:", " ".join(f"{r:.2f}" for r in rewards))
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    line = f"seed {args.seed}: mean team return, first 5 steps {first:.3f}, last 5 steps {last:.3f}"
    print(line)
    return line


if __name__ == "__main__":
    main()
