"""The environment benchmark runs and reports a ratio (the figure itself lives in docs/benchmarks.md)."""

from llm_marl_envs.bench import envs


def test_env_benchmark_runs(capsys):
    ratio = envs.main(["--steps", "300", "--repeats", "1", "--task-steps", "4"])
    assert ratio > 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("ratio")
    assert sum("AEC steps/s" in line and "scripted best" in line for line in lines) == len(envs.TASKS)
