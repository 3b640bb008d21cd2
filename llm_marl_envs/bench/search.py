"""Benchmark: BM25 index build time and memory, query throughput and p99 latency, env episodes/s.

Run: ``python -m llm_marl_envs.bench.search [--sizes 10000 1000000] [--queries 500] [--episodes 200]``

For each corpus size the corpus is a synthetic world (:mod:`llm_marl_envs.data.multihop`,
one decoy per entity, so ``size / 2`` entities). Figures:

* corpus generation time; index build time (tokenize + ``bm25s`` indexing + saving to a
  temporary cache dir) and the time to load it back from the cache; resident memory
  added by the index (RSS before/after build, Linux ``/proc``) and the index size on disk;
* query throughput (queries/s) and p50/p99 latency of :meth:`BM25Retriever.search` on the
  world's sub-questions (``k = 5``), next to ``bm25s``' own ``BM25.retrieve`` on the first
  ``--ref-queries`` of the same tokenized queries in the same run (the reference; ratio =
  ours / reference);
* episodes/s of the scripted planner/worker team on the default environment (300 entities),
  next to ``toy/signal_game_v0`` episodes/s (reference for the per-step overhead).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def rss_mb() -> float:
    """Current resident set size of this process in MiB (Linux); NaN elsewhere."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")


def bench_retrieval(size: int, n_queries: int, n_ref_queries: int, k: int = 5) -> dict[str, float]:
    from llm_marl_envs.data.multihop import generate_world
    from llm_marl_envs.retrieval import BM25Retriever
    from llm_marl_envs.retrieval.tokenize import tokenize

    t0 = time.perf_counter()
    world = generate_world(n_entities=max(size // 2, 12), n_questions=n_queries, decoys_per_entity=1, seed=0)
    gen_s = time.perf_counter() - t0
    queries = [q.decomposition[0].question for q in world.questions]
    with tempfile.TemporaryDirectory() as tmp:
        before = rss_mb()
        t0 = time.perf_counter()
        retriever = BM25Retriever(world.documents, cache_dir=tmp)
        build_s = time.perf_counter() - t0
        index_mb = rss_mb() - before
        disk_mb = sum(f.stat().st_size for f in Path(retriever.index_dir).iterdir()) / 2**20
        t0 = time.perf_counter()
        loaded = BM25Retriever(world.documents, cache_dir=tmp)
        load_s = time.perf_counter() - t0
        assert loaded.loaded_from_cache
        del loaded
    lat = []
    for q in queries:
        t0 = time.perf_counter()
        retriever.search(q, k)
        lat.append(time.perf_counter() - t0)
    lat_ms = np.array(lat) * 1e3
    # reference: bm25s' own retrieve on the same queries, tokenized the same way
    model = retriever._bm25
    vocab = retriever._vocab
    toks = [[t for t in tokenize(q) if t in vocab] or [""] for q in queries[:n_ref_queries]]
    ref_lat = []
    for t in toks:
        t0 = time.perf_counter()
        model.retrieve([t], k=k, show_progress=False, n_threads=0)
        ref_lat.append(time.perf_counter() - t0)
    ref_ms = np.array(ref_lat) * 1e3
    return {
        "passages": len(world.documents),
        "generate_s": gen_s,
        "build_s": build_s,
        "load_s": load_s,
        "index_rss_mb": index_mb,
        "index_disk_mb": disk_mb,
        "qps": 1e3 / lat_ms.mean(),
        "p50_ms": float(np.percentile(lat_ms, 50)),
        "p99_ms": float(np.percentile(lat_ms, 99)),
        "ref_qps": 1e3 / ref_ms.mean(),
        "ref_p99_ms": float(np.percentile(ref_ms, 99)),
    }


def episodes_per_second(env, policy, n: int) -> tuple[float, float]:
    steps = 0
    t0 = time.perf_counter()
    for i in range(n):
        env.reset(seed=i)
        for agent in env.agent_iter():
            _, _, term, trunc, _ = env.last()
            env.step(None if term or trunc else policy(env, agent))
            steps += 1
    dt = time.perf_counter() - t0
    return n / dt, steps / dt


def bench_env(n: int) -> dict[str, float]:
    from llm_marl_envs.search import planner_worker_v0 as pw
    from llm_marl_envs.toy import signal_game_v0 as sg

    env = pw.env(cache_dir=False)
    eps, sps = episodes_per_second(env, pw.best_policy, n)
    ret = float(np.mean([r.reward for r in env.unwrapped.record.turns if r.reward]))
    ref_eps, _ = episodes_per_second(sg.env(), sg.best_policy, n)
    return {"episodes_per_s": eps, "steps_per_s": sps, "last_return": ret, "ref_signal_game_eps": ref_eps}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000])
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--ref-queries", type=int, default=100, help="queries for the (slow) bm25s reference")
    ap.add_argument("--episodes", type=int, default=200)
    args = ap.parse_args()
    print(f"cpu cores visible: {os.cpu_count()}")
    for size in args.sizes:
        r = bench_retrieval(size, args.queries, args.ref_queries)
        print(
            f"[bm25 {r['passages']:>9,} passages] generate {r['generate_s']:.1f}s | build+save {r['build_s']:.1f}s"
            f" | load from cache {r['load_s']:.2f}s | index RSS +{r['index_rss_mb']:.0f} MiB"
            f" (disk {r['index_disk_mb']:.0f} MiB)"
        )
        print(
            f"    search k=5: {r['qps']:.0f} queries/s, p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms"
            f" | bm25s.retrieve reference: {r['ref_qps']:.0f} q/s, p99 {r['ref_p99_ms']:.2f} ms"
            f" | ratio (ours/ref qps) {r['qps'] / r['ref_qps']:.2f}"
        )
    e = bench_env(args.episodes)
    print(
        f"[env] scripted planner/worker team, 300-entity world: {e['episodes_per_s']:.0f} episodes/s"
        f" ({e['steps_per_s']:.0f} AEC steps/s) | signal_game reference {e['ref_signal_game_eps']:.0f} episodes/s"
        f" | ratio {e['episodes_per_s'] / e['ref_signal_game_eps']:.3f}"
    )


if __name__ == "__main__":
    main()
