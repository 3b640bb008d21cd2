"""Sandbox pools and environment workers as Ray actors, on a private local Ray cluster (loopback only).

Skipped only where ray is not installed (``pip install -e ".[ray]"``). One cluster per module,
started and shut down here; every result is compared with the same work done locally.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")

import llm_marl_envs  # noqa: E402
from baselines.ray_workers import RayEnvWorkers, RayRetriever, RaySandbox, local_cluster  # noqa: E402
from llm_marl_envs.sandbox import AssertTest, IOTest, Job, Sandbox, SandboxConfig  # noqa: E402
from llm_marl_envs.toy import signal_game_v0  # noqa: E402
from tests.baselines.test_trainer_code_env import ENV, bpe_dir  # noqa: E402,F401  (the fixture)

pytestmark = pytest.mark.slow  # starting Ray takes 10-30 s on a loaded 2-core machine

SIGNAL = "toy/signal_game_v0"
KWARGS = {"n_candidates": 4}


@pytest.fixture(scope="module")
def cluster():
    with local_cluster(num_cpus=2):
        node = ray.nodes()[0]
        assert node["NodeManagerAddress"] == "127.0.0.1"  # loopback only
        yield


def wait_until_dead(actor, timeout_s: float = 60.0) -> None:
    """Block until a killed ``RetrieverActor`` refuses calls (its death reached this driver)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get(actor.batch_search.remote([], 1), timeout=10)
        except ray.exceptions.RayActorError:
            return
        except ray.exceptions.GetTimeoutError:
            pass
        time.sleep(0.1)
    pytest.fail(f"a killed Ray actor still answered after {timeout_s:.0f} s")


def jobs() -> list[Job]:
    add = "def add(a, b):\n    return a + b\n"
    return [
        Job(add, [AssertTest("assert add(1, 2) == 3"), AssertTest("assert add(2, 2) == 5")]),
        Job("def add(a, b):\n    raise ValueError('no')\n", [AssertTest("assert add(1, 2) == 3")]),
        Job("print(int(input()) * 2)", [IOTest("21\n", "42\n"), IOTest("1\n", "3\n")]),
        Job("while True:\n    pass\n", [AssertTest("assert True")], timeout_s=0.5),
        Job(add, [AssertTest("assert add(0, 0) == 0")]),
    ] * 2


def summary(results) -> list[tuple]:
    return [(r.passed, r.total, tuple(t.error_type for t in r.tests), r.infra_error is None) for r in results]


def test_ray_sandbox_gives_the_local_results(cluster):
    config = SandboxConfig(workers=1)
    with Sandbox(config) as local:
        expected = summary(local.run_batch(jobs()))
    with RaySandbox(n_actors=2, config=config, num_cpus=0) as remote:
        assert remote.size == 2
        assert summary(remote.run_batch(jobs())) == expected  # in job order, over both actors
        one = remote.run("def f():\n    return 1\n", [AssertTest("assert f() == 2")])
        assert (one.passed, one.total, one.tests[0].error_type) == (0, 1, "AssertionError")
    assert expected[0][:2] == (1, 2) and expected[3][2] == ("TimeoutError",)


def test_env_workers_step_like_local_envs(cluster):
    workers = RayEnvWorkers(SIGNAL, KWARGS, n_workers=2, envs_per_worker=2)
    mirrors = [llm_marl_envs.make(SIGNAL, **KWARGS) for _ in range(workers.n_envs)]
    seeds = [11, 12, 13, 14]
    turns = workers.reset(seeds)
    for env, seed in zip(mirrors, seeds):
        env.reset(seed=seed)
    n_steps = 0
    while not all(t["done"] for t in turns):
        for env, turn in zip(mirrors, turns):
            assert turn["done"] == env.unwrapped.record.done
            if not turn["done"]:
                assert (turn["agent"], turn["chat"]) == (env.agent_selection, env.observe_chat(env.agent_selection))
        actions = [None if env.unwrapped.record.done else signal_game_v0.best_policy(env, env.agent_selection)
                   for env in mirrors]
        for env, action in zip(mirrors, actions):
            if action is not None:
                env.step(action)
        turns = workers.step(actions)
        n_steps += 1
    assert n_steps >= 2
    assert [t["total_reward"] for t in turns] == [float(e.unwrapped.record.total_reward) for e in mirrors]
    workers.close()


def test_env_workers_play_the_scripted_policy_like_local(cluster):
    workers = RayEnvWorkers(SIGNAL, KWARGS, n_workers=2, envs_per_worker=1)
    played = workers.play_random(episodes_per_worker=20, seed=5)
    module = llm_marl_envs.spec(SIGNAL).load()
    env = llm_marl_envs.make(SIGNAL, **KWARGS)
    expected, steps = [], 0
    for w in range(2):
        seed = 5 + 1_000_003 * w
        rng = np.random.default_rng(seed)
        for i in range(20):
            env.reset(seed=seed + i)
            while not env.unwrapped.record.done:
                env.step(module.random_policy(env, env.agent_selection, rng))
                steps += 1
            expected.append(float(env.unwrapped.record.total_reward))
    assert played["returns"] == expected and played["steps"] == steps
    assert 0 < np.mean(expected) < 1  # the random policy wins some rounds, not all
    workers.close()


def test_bad_arguments_are_typed_errors(cluster):
    with pytest.raises(ValueError):
        RaySandbox(n_actors=0)
    with pytest.raises(ValueError):
        RayEnvWorkers(SIGNAL, KWARGS, n_workers=0)
    with pytest.raises(KeyError):
        RayEnvWorkers("toy/no_such_env_v0")


def play_best(env, seed: int) -> float:
    from llm_marl_envs.code import helper_main_v0

    env.reset(seed=seed)
    for agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else helper_main_v0.best_policy(env, agent))
    return env.unwrapped.record.total_reward


def test_a_code_task_scores_through_the_ray_sandbox_as_locally(cluster):
    config = SandboxConfig(workers=1)
    with Sandbox(config) as local, RaySandbox(n_actors=1, config=config, num_cpus=0) as remote:
        local_rewards = [play_best(llm_marl_envs.make(ENV, sandbox=local), seed) for seed in (0, 1)]
        assert [play_best(llm_marl_envs.make(ENV, sandbox=remote), seed) for seed in (0, 1)] == local_rewards
        assert remote.jobs_sent > 0
    assert all(r > 0 for r in local_rewards)


def test_trainer_runs_the_code_task_in_ray_sandbox_actors(cluster, bpe_dir, tmp_path):  # noqa: F811
    """``ray.sandbox_actors``: the trainer's environments score code in the Ray actors."""
    from baselines.config import load_config
    from baselines.trainer import Trainer

    kwargs = {**llm_marl_envs.spec(ENV).test_kwargs, "max_turns": 1}
    cfg = load_config(overrides=["rollout.tasks_per_step=2", "rollout.group_size=2", "generation.max_new_tokens=12",
                                 "log.tensorboard=false", f"model.path={bpe_dir}", "ray.sandbox_actors=1",
                                 "ray.sandbox_workers=1"], base={"env": {"name": ENV, "kwargs": kwargs}})
    trainer = Trainer(cfg, tmp_path)
    result = trainer.collect(trainer.next_tasks())  # the tiny model's code rarely parses: maybe no job
    assert len(result.table) == 2 * 2 * 2
    env = trainer.pool.take(1)[0]
    sent = trainer.sandbox.jobs_sent
    with Sandbox(SandboxConfig(workers=1)) as local:
        assert play_best(env, 3) == play_best(llm_marl_envs.make(ENV, **kwargs, sandbox=local), 3) > 0
    assert trainer.sandbox.jobs_sent > sent  # the pooled env's code went to the Ray actor
    trainer.pool.release()
    with pytest.raises(ValueError, match="sandbox"):  # a task without code: a clear error
        Trainer(load_config(overrides=["ray.sandbox_actors=1", "log.tensorboard=false"]), tmp_path / "toy")


def test_ray_retriever_meets_the_retriever_contract_like_local_bm25(cluster):
    import functools

    from llm_marl_envs.retrieval import BM25Retriever, Document, RetrievalError

    docs = [Document(f"d{i}", f"title {i}", text) for i, text in enumerate([
        "the capital of france is paris", "paris is on the seine", "berlin is the capital of germany",
        "the rhine flows through germany", "rome is the capital of italy"])]
    factory = functools.partial(BM25Retriever, docs, cache_dir=False)
    local = factory()
    remote = RayRetriever(factory, n_actors=2, num_cpus=0)
    queries = ["capital of germany", "paris", "river seine", "capital", "zzz unknown"]
    assert remote.batch_search(queries, 2) == local.batch_search(queries, 2)  # over both replicas, in order
    assert remote.search("rome italy", 3) == local.search("rome italy", 3)
    assert remote.search("zzz unknown", 3) == []  # no match: empty, never padding
    ray.kill(remote.actors[0])  # a lost replica is an infrastructure error, not "no results"
    wait_until_dead(remote.actors[0])  # ray.kill is asynchronous: a call sent at once may still be served
    with pytest.raises(RetrievalError):
        remote.batch_search(queries, 2)
    remote.close()

