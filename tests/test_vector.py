"""The text vector envs: typed errors, failing sub-envs, seeding and auto-reset alike in both versions."""

from __future__ import annotations

from functools import partial

import pytest

import llm_marl_envs
from llm_marl_envs.core.vector import SubprocTextVectorEnv, SyncTextVectorEnv, VectorEnvError
from llm_marl_envs.toy import signal_game_v0

make_signal = partial(llm_marl_envs.make, "toy/signal_game_v0", n_rounds=1)


def _broken_env():
    raise RuntimeError("cannot build this env")


def _run(vec, steps: int) -> list:
    out = vec.reset(seed=3)
    trace = [(out.agents, out.observations)]
    for _ in range(steps):
        # the speaker names the target it sees; the listener repeats the word it was given
        out = vec.step([o.split("target: ")[-1] if a == "speaker" else o.split("message: ")[-1]
                        for a, o in zip(out.agents, out.observations)])
        trace.append((out.agents, out.observations, out.rewards, out.terminated, out.infos))
    return trace


def test_sync_and_subprocess_agree_and_auto_reset():
    sync = SyncTextVectorEnv([make_signal] * 3)
    sub = SubprocTextVectorEnv([make_signal] * 3)
    try:
        a, b = _run(sync, 6), _run(sub, 6)
    finally:
        sync.close()
        sub.close()
    assert a == b
    finals = [info["final"] for step in a[1:] for info in step[4] if "final" in info]
    assert len(finals) == 9 and all(f["episode_return"] == 1.0 and f["terminated"] for f in finals)
    assert a[2][2] == [1.0, 1.0, 1.0] and a[2][0] == ["speaker"] * 3  # reward, then the next episode
    assert a[2][1] != a[4][1]  # each automatic reset draws a new seed


def test_seeds_match_single_envs():
    vec = SyncTextVectorEnv([make_signal] * 2)
    out = vec.reset(seed=10)
    for i in range(2):
        env = signal_game_v0.env(n_rounds=1)
        env.reset(seed=10 + i)
        assert out.observations[i] == env.observe("speaker")["text"]


def test_bad_actions_and_broken_envs_are_typed_errors():
    vec = SyncTextVectorEnv([make_signal] * 2)
    with pytest.raises(RuntimeError, match="reset"):
        vec.step(["a", "b"])
    vec.reset(seed=0)
    with pytest.raises(ValueError, match="expected 2 actions"):
        vec.step(["only one"])
    with pytest.raises(TypeError, match="list of 2 texts"):
        vec.step("a string is not a list")
    with pytest.raises(VectorEnvError, match="(?s)env 1.*cannot build this env"):
        SubprocTextVectorEnv([make_signal, _broken_env])
    with pytest.raises(ValueError, match="at least one"):
        SyncTextVectorEnv([])


def test_subprocess_envs_share_out_the_cpus():
    # Each env process (and the sandbox pool it starts, which inherits its affinity) gets its
    # own share of the CPUs, so the sandbox jobs of different envs do not queue on one CPU.
    import os

    from llm_marl_envs.core.vector import cpu_shares

    allowed = sorted(os.sched_getaffinity(0))
    shares = cpu_shares(3)
    if len(allowed) < 2:
        assert shares == [None] * 3
        return
    assert sorted(c for share in shares[:min(3, len(allowed))] for c in share) == allowed
    assert all(share == shares[i % len(allowed)] for i, share in enumerate(shares))
    vec = SubprocTextVectorEnv([make_signal] * 2)
    free = SubprocTextVectorEnv([make_signal] * 2, partition_cpus=False)
    try:
        assert [sorted(os.sched_getaffinity(p.pid)) for p in vec._procs] == cpu_shares(2)
        assert [sorted(os.sched_getaffinity(p.pid)) for p in free._procs] == [allowed, allowed]
    finally:
        vec.close()
        free.close()
