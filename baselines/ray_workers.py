"""Environment workers and sandbox pools as Ray actors (optional extra ``.[ray]``; docs/scaling.md).

Generation stays batched on the trainer's GPUs; what runs beside it -- code execution, retrieval,
the environments themselves -- can live on other machines of a Ray cluster:

- :class:`RaySandbox` has the :class:`llm_marl_envs.sandbox.Sandbox` interface (``run``,
  ``run_batch``, ``close``) and spreads jobs over ``n_actors`` :class:`SandboxActor` s, each
  owning a real local sandbox pool on its node. Pass it where a task takes ``sandbox=``::

      env = llm_marl_envs.make("code/helper_main_v0", sandbox=RaySandbox(n_actors=4))

- :class:`RayRetriever` has the :class:`llm_marl_envs.retrieval.Retriever` contract over replicas
  of an index built on the actors' nodes (``retriever=`` of the search tasks).
- :class:`RayEnvWorkers` holds ``n_workers`` :class:`EnvWorker` actors, each stepping its own
  instances of a registered task: a vectorized AEC interface (:meth:`RayEnvWorkers.reset`,
  :meth:`RayEnvWorkers.step`: whose turn it is and that agent's chat, per environment) and
  :meth:`RayEnvWorkers.play_random`, episodes of the task's scripted random policy run inside the
  workers (the benchmark's load).

:func:`local_cluster` starts a private single-node cluster bound to 127.0.0.1 (tests, benchmarks);
on a real cluster, call ``ray.init(address="auto")`` yourself and build these classes as usual.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import ray

import llm_marl_envs
from llm_marl_envs.retrieval import Passage, RetrievalError, Retriever
from llm_marl_envs.sandbox import ExecResult, Job, Sandbox, SandboxConfig


@contextlib.contextmanager
def local_cluster(num_cpus: int = 2, object_store_mb: int = 100) -> Iterator[None]:
    """A fresh local Ray cluster on loopback only (no dashboard, no external address), shut down
    on exit. Refuses to run inside an already initialized Ray session; raises if Ray would not
    bind to 127.0.0.1.

    Ray resolves "127.0.0.1" to the machine's routable address unless it believes clusters are
    off (its ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` switch, read when ray is imported); within
    this context the switch is off for this process and the cluster's processes."""
    if ray.is_initialized():
        raise RuntimeError("ray is already initialized; local_cluster starts its own private cluster")
    from ray._private import ray_constants  # the switch above, as ray read it at import

    saved_env = {k: os.environ.get(k) for k in ("RAY_ADDRESS", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")}
    # ray.init installs its own SIGTERM/SIGINT handlers in this process: give the caller its own back
    saved_signals = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    saved_switch = ray_constants.ENABLE_RAY_CLUSTER
    os.environ.pop("RAY_ADDRESS", None)  # never join a cluster named by the environment
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, _node_ip_address="127.0.0.1",
                 object_store_memory=object_store_mb << 20, log_to_driver=False)
        address = ray.nodes()[0]["NodeManagerAddress"]
        if address != "127.0.0.1":
            raise RuntimeError(f"the local Ray node bound {address}, not 127.0.0.1")
        yield
    finally:
        ray.shutdown()
        for sig, handler in saved_signals.items():
            signal.signal(sig, handler)
        ray_constants.ENABLE_RAY_CLUSTER = saved_switch
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# ------------------------------------------------------------------------------ sandbox
@ray.remote(num_cpus=0)
class SandboxActor:
    """One real :class:`~llm_marl_envs.sandbox.Sandbox` pool living in a Ray worker process."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.sandbox = Sandbox(config)

    def size(self) -> int:
        return self.sandbox.size

    def run_batch(self, jobs: list[Job]) -> list[ExecResult]:
        return self.sandbox.run_batch(jobs)

    def close(self) -> None:
        self.sandbox.close()


class RaySandbox:
    """The :class:`~llm_marl_envs.sandbox.Sandbox` interface over ``n_actors`` :class:`SandboxActor` s.

    ``run_batch`` deals the jobs to the actors in proportion to their pool sizes (contiguous slices,
    results in job order); ``run`` sends one job to the next actor in turn. ``num_cpus`` per actor
    is what Ray reserves (scheduling only: each actor's pool size comes from ``config``)."""

    def __init__(self, n_actors: int = 1, config: SandboxConfig | None = None, *, num_cpus: float = 1) -> None:
        if n_actors < 1:
            raise ValueError(f"n_actors must be >= 1, got {n_actors}")
        self.actors = [SandboxActor.options(num_cpus=num_cpus).remote(config) for _ in range(n_actors)]
        self.sizes = ray.get([a.size.remote() for a in self.actors])
        self._next = 0
        self._closed = False
        self.jobs_sent = 0  #: jobs sent to the actors so far

    @property
    def size(self) -> int:
        """Jobs that can run at once over all actors."""
        return sum(self.sizes)

    @property
    def closed(self) -> bool:
        return self._closed

    def run(self, program: str, tests: Sequence[Any], *, setup: str = "", timeout_s: float | None = None,
            ) -> ExecResult:
        actor = self.actors[self._next % len(self.actors)]
        self._next += 1
        self.jobs_sent += 1
        return ray.get(actor.run_batch.remote([Job(program, list(tests), setup, timeout_s)]))[0]

    def run_batch(self, jobs: Sequence[Job]) -> list[ExecResult]:
        if self._closed:
            raise RuntimeError("RaySandbox is closed")
        jobs = list(jobs)
        self.jobs_sent += len(jobs)
        total, bounds, acc = self.size, [0], 0
        for s in self.sizes:
            acc += s
            bounds.append(round(len(jobs) * acc / total))
        refs = [a.run_batch.remote(jobs[lo:hi]) for a, lo, hi in zip(self.actors, bounds, bounds[1:]) if hi > lo]
        return [r for part in ray.get(refs) for r in part]

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            ray.get([a.close.remote() for a in self.actors])
            for a in self.actors:
                ray.kill(a)

    def __enter__(self) -> RaySandbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ------------------------------------------------------------------------------ retrieval
@ray.remote(num_cpus=0)
class RetrieverActor:
    """A retriever built on the actor's node by ``factory`` (e.g. a BM25 index over a corpus)."""

    def __init__(self, factory: Callable[[], Retriever]) -> None:
        self.retriever = factory()

    def batch_search(self, queries: list[str], k: int) -> list[list[Passage]]:
        return self.retriever.batch_search(queries, k)


class RayRetriever:
    """The :class:`~llm_marl_envs.retrieval.Retriever` contract over ``n_actors`` replicas built by
    ``factory`` (a picklable callable, e.g. ``functools.partial(BM25Retriever, docs, cache_dir=False)``).

    ``batch_search`` splits the queries over the replicas (results in query order); ``search`` goes
    to the next replica in turn. A failed actor raises :class:`RetrievalError` (infrastructure),
    never an empty result. Pass it to a search task as ``retriever=``."""

    def __init__(self, factory: Callable[[], Retriever], n_actors: int = 1, *, num_cpus: float = 1) -> None:
        if n_actors < 1:
            raise ValueError(f"n_actors must be >= 1, got {n_actors}")
        self.actors = [RetrieverActor.options(num_cpus=num_cpus).remote(factory) for _ in range(n_actors)]
        self._next = 0

    def _get(self, refs: list[Any]) -> list[Any]:
        try:
            return ray.get(refs)
        except ray.exceptions.RayError as err:
            raise RetrievalError(f"Ray retriever actor failed: {err}") from err

    def search(self, query: str, k: int) -> list[Passage]:
        actor = self.actors[self._next % len(self.actors)]
        self._next += 1
        return self._get([actor.batch_search.remote([query], k)])[0][0]

    def batch_search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        queries = list(queries)
        n = len(self.actors)
        bounds = [len(queries) * i // n for i in range(n + 1)]
        refs = [a.batch_search.remote(queries[lo:hi], k) for a, lo, hi in zip(self.actors, bounds, bounds[1:])
                if hi > lo]
        return [r for part in self._get(refs) for r in part]

    def close(self) -> None:
        for a in self.actors:
            ray.kill(a)


def connect_sandbox(config: Any, spec: Any) -> RaySandbox:
    """The trainer's ``ray.sandbox_actors`` pools for task ``spec`` (a :class:`baselines.config.RayConfig`):
    joins ``config.address`` unless Ray is already initialized; the task must take ``sandbox=``."""
    import inspect

    if "sandbox" not in inspect.signature(spec.load().raw_env.__init__).parameters:
        raise ValueError(f"ray.sandbox_actors is set but {spec.name} takes no sandbox= argument")
    if not ray.is_initialized():
        ray.init(address=config.address, include_dashboard=False)
    workers = SandboxConfig(workers=config.sandbox_workers)
    return RaySandbox(n_actors=config.sandbox_actors, config=workers)


# ------------------------------------------------------------------------------ environments
@ray.remote(num_cpus=1)
class EnvWorker:
    """``n_envs`` instances of one registered task, stepped inside a Ray worker process."""

    def __init__(self, name: str, kwargs: dict[str, Any], n_envs: int) -> None:
        spec = llm_marl_envs.spec(name)
        self.module = spec.load()
        self.envs = [spec.make(**kwargs) for _ in range(n_envs)]

    def _turn(self, env: Any) -> dict[str, Any]:
        record = env.unwrapped.record
        if record.done:
            return {"done": True, "agent": None, "chat": None, "total_reward": float(record.total_reward)}
        agent = env.agent_selection
        return {"done": False, "agent": agent, "chat": env.observe_chat(agent),
                "total_reward": float(record.total_reward)}

    def reset(self, seeds: list[int]) -> list[dict[str, Any]]:
        for env, seed in zip(self.envs, seeds, strict=True):
            env.reset(seed=seed)
        return [self._turn(env) for env in self.envs]

    def step(self, actions: list[Any]) -> list[dict[str, Any]]:
        """One action per environment for the agent whose turn it is (ignored where done)."""
        out = []
        for env, action in zip(self.envs, actions, strict=True):
            if not env.unwrapped.record.done:
                env.step(action)
            out.append(self._turn(env))
        return out

    def play_random(self, n_episodes: int, seed: int) -> dict[str, Any]:
        """``n_episodes`` episodes of the task's scripted random policy over this worker's envs."""
        return play_random(self.envs, self.module, n_episodes, seed)


def play_random(envs: list[Any], module: Any, n_episodes: int, seed: int) -> dict[str, Any]:
    """Episode i (seeded ``seed + i``) of ``module.random_policy`` on ``envs[i % len(envs)]``:
    total AEC steps, the returns, seconds (what an :class:`EnvWorker` runs; also run locally as
    the benchmark's reference)."""
    rng = np.random.default_rng(seed)
    steps, returns, start = 0, [], time.perf_counter()
    for i in range(n_episodes):
        env = envs[i % len(envs)]
        env.reset(seed=seed + i)
        while not env.unwrapped.record.done:
            env.step(module.random_policy(env, env.agent_selection, rng))
            steps += 1
        returns.append(float(env.unwrapped.record.total_reward))
    return {"steps": steps, "returns": returns, "seconds": time.perf_counter() - start}


class RayEnvWorkers:
    """``n_workers`` :class:`EnvWorker` actors with ``envs_per_worker`` environments each, seen as
    one vector of ``n_workers * envs_per_worker`` environments (worker-major order)."""

    def __init__(self, name: str, kwargs: dict[str, Any] | None = None, *, n_workers: int = 2,
                 envs_per_worker: int = 1, num_cpus: float = 1) -> None:
        if n_workers < 1 or envs_per_worker < 1:
            raise ValueError(f"need n_workers >= 1 and envs_per_worker >= 1, got {n_workers}, {envs_per_worker}")
        llm_marl_envs.spec(name)  # unknown names fail here, with the registry's error
        self.envs_per_worker = envs_per_worker
        self.workers = [EnvWorker.options(num_cpus=num_cpus).remote(name, dict(kwargs or {}), envs_per_worker)
                        for _ in range(n_workers)]

    @property
    def n_envs(self) -> int:
        return len(self.workers) * self.envs_per_worker

    def _fan(self, method: str, values: Sequence[Any]) -> list[dict[str, Any]]:
        if len(values) != self.n_envs:
            raise ValueError(f"expected {self.n_envs} values (one per environment), got {len(values)}")
        k = self.envs_per_worker
        refs = [getattr(w, method).remote(list(values[i * k:(i + 1) * k])) for i, w in enumerate(self.workers)]
        return [turn for part in ray.get(refs) for turn in part]

    def reset(self, seeds: Sequence[int]) -> list[dict[str, Any]]:
        """Reset environment i with ``seeds[i]``; per environment: done, agent, chat, total_reward."""
        return self._fan("reset", [int(s) for s in seeds])

    def step(self, actions: Sequence[Any]) -> list[dict[str, Any]]:
        """Step environment i with ``actions[i]`` (the current agent's action)."""
        return self._fan("step", actions)

    def play_random(self, episodes_per_worker: int, seed: int = 0) -> dict[str, Any]:
        """Scripted random episodes in every worker at once: total steps, returns, wall seconds."""
        start = time.perf_counter()
        parts = ray.get([w.play_random.remote(episodes_per_worker, seed + 1_000_003 * i)
                         for i, w in enumerate(self.workers)])
        return {"steps": sum(p["steps"] for p in parts), "returns": [r for p in parts for r in p["returns"]],
                "seconds": time.perf_counter() - start}

    def close(self) -> None:
        for w in self.workers:
            ray.kill(w)
