"""A SmolLM2 team plays one held-out episode of every registered task through ``baselines.evaluate``."""

from __future__ import annotations

import json
import math

import pytest

import llm_marl_envs
from baselines import evaluate
from tests.pretrained.conftest import PRESET


@pytest.mark.slow
@pytest.mark.parametrize("env_name", llm_marl_envs.list_envs())
def test_smollm2_team_plays_every_task(env_name, smollm2_env, tmp_path):
    [report] = evaluate.main([
        "--env", env_name, "--model", PRESET, "--episodes", "1", "--samples", "1", "--max-new-tokens", "6",
        "--test-kwargs", "--no-progress", "--out", str(tmp_path),
    ])
    assert report.tasks == 1 and report.episodes + report.infra_excluded == 1
    assert math.isfinite(report.mean_return)
    assert report.gen.completion_tokens > 0
    agents = set(llm_marl_envs.make(env_name, **dict(llm_marl_envs.spec(env_name).test_kwargs)).possible_agents)
    assert set(report.agents) <= agents and report.agents
    stem = env_name.replace("/", "_")
    [line] = (tmp_path / f"{stem}.transcripts.jsonl").read_text().splitlines()
    episode = json.loads(line)
    assert episode["steps"] and all(s["prompt"] for s in episode["steps"])
    summary = json.loads((tmp_path / f"{stem}.summary.json").read_text())
    assert summary["mean_return"] == report.mean_return
    if "split" in summary["env_kwargs"]:
        raw_env = llm_marl_envs.spec(env_name).load().raw_env
        assert summary["env_kwargs"]["split"] == raw_env.held_out_split  # the task's held-out problems
