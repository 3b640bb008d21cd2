"""Fixtures of the real-model tests: SmolLM2-135M-Instruct converted once per session into a tmp cache."""

from __future__ import annotations

import pytest

from baselines.models import PreparedModel, prepare_preset
from tests.baselines.conftest import one_torch_thread  # noqa: F401  (autouse: the cores are shared)

PRESET = "smollm2-135m-instruct"


@pytest.fixture(scope="session")
def smollm2_cache(tmp_path_factory) -> tuple[str, PreparedModel]:
    """(cache dir, the first preparation of the preset there -- a real GGUF conversion)."""
    cache = str(tmp_path_factory.mktemp("llm_marl_cache"))
    return cache, prepare_preset(PRESET, cache)


@pytest.fixture
def smollm2_env(smollm2_cache, monkeypatch) -> str:
    """``$LLM_MARL_CACHE`` pointed at the session cache, so the preset name resolves there; its folder."""
    cache, prepared = smollm2_cache
    monkeypatch.setenv("LLM_MARL_CACHE", cache)
    return str(prepare_preset(PRESET).path)
