"""Fixtures shared by the baselines tests: one torch thread, and tiny local models built once."""

from __future__ import annotations

import pytest
import torch

from baselines.policies import build_tiny_model
from baselines.policies.corpus import signal_game_texts


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Tiny models run fastest on one thread, and the test machine's cores are shared."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session")
def tiny_paths(tmp_path_factory) -> dict[str, str]:
    """A qwen2 model with the word tokenizer, a llama model with a bpe tokenizer, and the default
    run's kind of model (qwen2, word tokenizer, init std 0.3, 4-position sliding window)."""
    texts = signal_game_texts(episodes=8)
    root = tmp_path_factory.mktemp("tiny_models")
    return {
        "word": str(build_tiny_model(root / "word", texts=texts, seed=0)),
        "bpe": str(
            build_tiny_model(root / "bpe", texts=texts, tokenizer="bpe", arch="llama", hidden_size=48, seed=1)
        ),
        "windowed": str(build_tiny_model(root / "windowed", texts=texts, seed=2, init_std=0.3, sliding_window=4)),
    }


def chat(user: str, role: str = "speaker") -> list[dict[str, str]]:
    return [{"role": "system", "content": f"You are the {role}."}, {"role": "user", "content": user}]
