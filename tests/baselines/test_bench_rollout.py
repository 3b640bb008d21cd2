"""The rollout benchmark's workload and references, on a tiny model (a few tokens: a smoke run, not a timing)."""

from __future__ import annotations

import math

from baselines.bench.rollout import BenchConfig, env_requests, grouped, plain_generate, run
from baselines.generation import GenerationConfig, TransformersBackend
from baselines.policies import Team, TeamConfig


def test_workload_is_tasks_times_group():
    distinct, agents = env_requests(("toy/signal_game_v0",), 3, seed=0)
    reqs = grouped(distinct, 4)
    assert len(reqs) == 12 and set(agents) == {r.agent for r in distinct}
    assert [r.messages for r in reqs[:4]] == [distinct[0].messages] * 4  # G copies in a row, like the trainer
    assert len({str(r.messages) for r in distinct}) == 3


def test_plain_reference_draws_the_backends_tokens(tiny_paths):
    distinct, agents = env_requests(("toy/signal_game_v0",), 3, seed=0)
    reqs = grouped(distinct, 2)
    team = Team.from_config(TeamConfig(mode="shared", model=tiny_paths["word"]), agents)
    gen = GenerationConfig(max_new_tokens=6, seed=5)
    backend = TransformersBackend(team, gen)
    backend.generate(reqs[:1])  # the measured call is not the backend's first: seeds follow its counter
    call = backend._calls
    outs = backend.generate(reqs)
    plain = plain_generate(team, [o.prompt_ids for o in outs], reqs[0].agent, gen, gen.seed + call, "cpu")
    assert plain.tokens == sum(len(o.completion_ids) for o in outs)


def test_bench_runs_and_reports_ratios(capsys):
    result = run(BenchConfig(tasks=2, group=2, max_new_tokens=3, sequential_requests=2, rounds=2))
    assert set(result) == {"vs_plain", "vs_sequential"}
    assert all(math.isfinite(v) and v > 0 for v in result.values())
    out = capsys.readouterr().out
    assert "2 tasks x 2 samples = 4 requests" in out and out.count("round ") == 2


def test_bench_random_weights_of_a_model_one_decode_call(tiny_paths, capsys):
    """``--random-weights --decode-segment 0 --warmup-rounds 1``: the GPU speed check's settings."""
    cfg = BenchConfig(tasks=1, group=2, max_new_tokens=3, sequential_requests=1, model=tiny_paths["word"],
                      random_weights=True, decode_segment=None, warmup_rounds=1)  # fmt: skip
    result = run(cfg)
    assert all(math.isfinite(v) and v > 0 for v in result.values())
    out = capsys.readouterr().out
    assert "(random weights)" in out and "decode segments of all tokens" in out and out.count("round ") == 1
