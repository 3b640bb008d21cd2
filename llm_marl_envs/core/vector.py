"""Vector environments for LLM tasks: N envs stepped with a list of texts, results as lists.

An LLM trainer batches generation over many episodes; these classes batch the environments
to match. Each sub-env is an AEC task; a step gives each env one action -- for the agent
whose turn it is there (``agents[i]``) -- and returns, per env, the next agent to act and its
observation text. Episodes reset automatically: when env ``i``'s episode ends, the step's
``infos[i]["final"]`` holds the finished episode's return and flags, and ``agents[i]`` /
``observations[i]`` are already those of the new episode.

- :class:`SyncTextVectorEnv` steps the envs one after the other in this process;
- :class:`SubprocTextVectorEnv` runs each env in its own process (built there from its
  factory, pickled with cloudpickle), so sandbox runs and retrieval of different envs
  overlap. A failing sub-env raises :class:`VectorEnvError` naming it, with its traceback.
  Each env process is confined to its share of the CPUs (:func:`cpu_shares`;
  ``partition_cpus=False`` turns it off), and so is the sandbox pool it starts: a code task's
  step is mostly a sandbox job, and every process's pool pins its workers the same way, so
  without the shares the jobs of all envs would queue on the same CPU (see
  docs/benchmarks.md, "Vector env").

Seeding: ``reset(seed=s)`` seeds env ``i`` with ``s + i``; its k-th automatic reset uses
``s + i + k * num_envs``, so every episode of a run has its own seed and runs are reproducible.
For SuperSuit's and Gymnasium's vector envs see :mod:`llm_marl_envs.core.text_batching` (each env
gets its own whole string) and the parallel API (:mod:`llm_marl_envs.core.parallel`).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import cloudpickle


@dataclass
class VectorStep:
    """What ``reset``/``step`` return: one entry per env."""

    agents: list[str]  #: who acts next in each env
    observations: list[str]  #: that agent's observation text
    rewards: list[float] = field(default_factory=list)  #: team reward earned in this step
    terminated: list[bool] = field(default_factory=list)  #: the episode ended in this step (terminated)
    truncated: list[bool] = field(default_factory=list)  #: ... or was truncated
    infos: list[dict[str, Any]] = field(default_factory=list)


class VectorEnvError(RuntimeError):
    """A sub-environment raised; the message names it and carries its traceback."""


class _Slot:
    """One sub-env with its auto-reset bookkeeping (used in-process and in the workers)."""

    def __init__(self, env: Any, index: int, num_envs: int) -> None:
        self.env, self.index, self.num_envs = env, index, num_envs
        self.base_seed: int | None = None
        self.episodes = 0

    def _reset(self, options: dict | None) -> tuple[str, str]:
        seed = None if self.base_seed is None else self.base_seed + self.index + self.episodes * self.num_envs
        self.env.reset(seed=seed, options=options)
        self.episodes += 1
        self.options = options
        agent = self.env.agent_selection
        return agent, self.env.observe(agent)["text"]

    def reset(self, seed: int | None, options: dict | None) -> tuple[str, str]:
        self.base_seed, self.episodes = seed, 0
        return self._reset(options)

    def step(self, action: Any) -> tuple[str, str, float, bool, bool, dict]:
        env, raw = self.env, self.env.unwrapped
        before = raw.record.total_reward
        env.step(action)
        reward = raw.record.total_reward - before
        info = dict(raw.infos.get(env.agent_selection, {})) if raw.agents else {}
        if not raw.record.done:
            agent = env.agent_selection
            return agent, env.observe(agent)["text"], reward, False, False, info
        record = raw.record
        info["final"] = {"episode_return": record.total_reward, "terminated": record.terminated,
                         "truncated": record.truncated, "turns": len(record.turns)}  # fmt: skip
        agent, text = self._reset(self.options)
        return agent, text, reward, record.terminated, record.truncated, info

    def chat(self) -> list[dict]:
        return self.env.unwrapped.observe_chat(self.env.agent_selection)


def _gather(results: Sequence[tuple]) -> VectorStep:
    agents, texts, rewards, terms, truncs, infos = (list(x) for x in zip(*results))
    return VectorStep(agents, texts, [float(r) for r in rewards], terms, truncs, infos)


def _check_actions(actions: Sequence[Any], n: int) -> list[Any]:
    if isinstance(actions, (str, bytes)) or not isinstance(actions, Sequence):
        raise TypeError(f"actions must be a list of {n} texts, got {type(actions).__name__}")
    if len(actions) != n:
        raise ValueError(f"expected {n} actions (one per env), got {len(actions)}")
    return list(actions)


class SyncTextVectorEnv:
    """``num_envs`` envs stepped one after the other in this process."""

    def __init__(self, env_fns: Sequence[Callable[[], Any]]) -> None:
        if not env_fns:
            raise ValueError("a vector env needs at least one env factory")
        self.num_envs = len(env_fns)
        self._slots = [_Slot(fn(), i, self.num_envs) for i, fn in enumerate(env_fns)]
        self._started = False

    @property
    def envs(self) -> list[Any]:
        return [s.env for s in self._slots]

    def reset(self, seed: int | None = None, options: dict | None = None) -> VectorStep:
        self._started = True
        agents, texts = (list(x) for x in zip(*(s.reset(seed, options) for s in self._slots)))
        return VectorStep(agents, texts, [0.0] * self.num_envs, [False] * self.num_envs,
                          [False] * self.num_envs, [{} for _ in self._slots])  # fmt: skip

    def step(self, actions: Sequence[Any]) -> VectorStep:
        if not self._started:
            raise RuntimeError("call reset() before step()")
        actions = _check_actions(actions, self.num_envs)
        return _gather([s.step(a) for s, a in zip(self._slots, actions)])

    def chats(self) -> list[list[dict]]:
        """The acting agent's observation of each env as chat messages."""
        return [s.chat() for s in self._slots]

    def close(self) -> None:
        for s in self._slots:
            s.env.close()


def _worker(remote: Any, payload: bytes, index: int, num_envs: int, cpus: list[int] | None = None) -> None:
    slot = None
    if cpus:
        try:
            os.sched_setaffinity(0, cpus)  # before the env (and its sandbox pool) is built
        except OSError:
            pass
    try:
        slot = _Slot(cloudpickle.loads(payload)(), index, num_envs)
        remote.send(("ok", None))
    except Exception:
        remote.send(("error", traceback.format_exc()))
    while True:
        try:
            cmd, data = remote.recv()
        except (EOFError, KeyboardInterrupt):
            break
        if cmd == "close":
            if slot is not None:
                slot.env.close()
            remote.send(("ok", None))
            break
        try:
            if slot is None:
                raise RuntimeError("the env could not be built")
            result = getattr(slot, cmd)(*data)
            remote.send(("ok", result))
        except Exception:
            remote.send(("error", traceback.format_exc()))
    remote.close()


def cpu_shares(num_envs: int) -> list[list[int] | None]:
    """The CPUs each of ``num_envs`` env processes is confined to: the allowed CPUs dealt out
    round robin (env ``i`` gets every CPU ``j`` with ``j % num_envs == i``; with more envs than
    CPUs, CPU ``i % n``). None for all on a single CPU, or where affinity is unsupported."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return [None] * num_envs
    if len(allowed) < 2:
        return [None] * num_envs
    groups = min(num_envs, len(allowed))
    return [[c for j, c in enumerate(allowed) if j % groups == i % groups] for i in range(num_envs)]


class SubprocTextVectorEnv:
    """``num_envs`` envs, each in its own process; ``step`` runs them concurrently.

    ``partition_cpus``: confine env process ``i`` (and the sandbox workers it starts) to
    ``cpu_shares(num_envs)[i]``.
    """

    def __init__(self, env_fns: Sequence[Callable[[], Any]], context: str | None = None,
                 partition_cpus: bool = True) -> None:
        if not env_fns:
            raise ValueError("a vector env needs at least one env factory")
        self.num_envs = len(env_fns)
        ctx = mp.get_context(context)
        self._remotes, self._procs = [], []
        shares = cpu_shares(self.num_envs) if partition_cpus else [None] * self.num_envs
        for i, fn in enumerate(env_fns):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(child, cloudpickle.dumps(fn), i, self.num_envs, shares[i]),
                               daemon=True)
            proc.start()
            child.close()
            self._remotes.append(parent)
            self._procs.append(proc)
        self._closed = False
        self._started = False
        try:
            self._receive()
        except VectorEnvError:
            self.close()  # the other workers were built fine: stop them
            raise

    def _receive(self) -> list[Any]:
        out, errors = [], []
        for i, remote in enumerate(self._remotes):
            try:
                status, value = remote.recv()
            except EOFError:
                status, value = "error", f"the worker process of env {i} died (exit code {self._procs[i].exitcode})"
            if status == "error":
                errors.append(f"env {i}:\n{value}")
            out.append(value)
        if errors:
            raise VectorEnvError("sub-environment failure in " + "\n".join(errors))
        return out

    def _call(self, cmd: str, per_env: Sequence[tuple]) -> list[Any]:
        if self._closed:
            raise RuntimeError("the vector env is closed")
        for remote, data in zip(self._remotes, per_env):
            remote.send((cmd, data))
        return self._receive()

    def reset(self, seed: int | None = None, options: dict | None = None) -> VectorStep:
        self._started = True
        agents, texts = (list(x) for x in zip(*self._call("reset", [(seed, options)] * self.num_envs)))
        return VectorStep(agents, texts, [0.0] * self.num_envs, [False] * self.num_envs,
                          [False] * self.num_envs, [{} for _ in range(self.num_envs)])  # fmt: skip

    def step(self, actions: Sequence[Any]) -> VectorStep:
        if not self._started:
            raise RuntimeError("call reset() before step()")
        actions = _check_actions(actions, self.num_envs)
        return _gather(self._call("step", [(a,) for a in actions]))

    def chats(self) -> list[list[dict]]:
        return self._call("chat", [()] * self.num_envs)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for remote in self._remotes:
            try:
                remote.send(("close", None))
                remote.recv()
            except (BrokenPipeError, EOFError, OSError):
                pass
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
