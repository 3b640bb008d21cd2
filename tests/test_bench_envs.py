"""The environment benchmark runs and reports a ratio (the figure itself lives in docs/benchmarks.md)."""

from llm_marl_envs.bench import envs


def test_env_benchmark_runs(capsys):
    ratio = envs.main(["--steps", "300", "--repeats", "1"])
    assert ratio > 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("ratio")
