"""The search benchmark module runs end to end (tiny sizes; the figures themselves are not asserted)."""

from llm_marl_envs.bench.search import bench_env, bench_retrieval


def test_bench_search_runs_on_a_tiny_corpus():
    r = bench_retrieval(2000, n_queries=20, n_ref_queries=5)
    assert r["passages"] == 2000 and r["qps"] > 0 and r["p99_ms"] >= r["p50_ms"] > 0 and r["ref_qps"] > 0
    e = bench_env(3)
    assert e["episodes_per_s"] > 0 and e["last_return"] == 1.0  # the scripted team wins
