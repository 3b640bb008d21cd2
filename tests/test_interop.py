"""The envs under other projects' wrappers: Gymnasium's vector envs, SuperSuit's, PettingZoo's
conversions, flattening, the ``acting`` flag and PettingZoo's flag (issue 31).

The per-task checks (truthful ``acting``, fixed parallel info schema, total policies,
``state_test``, ``aec_to_parallel(env(max_cycles=N))``, vector batching of the spaces) run on
every registered task in ``test_compliance.py`` (they are part of ``check_env``).
"""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.vector.utils import batch_space, iterate

from llm_marl_envs import make_parallel
from llm_marl_envs.core import BatchedFreeText, FreeText, TextNotFlattenableError, text_observation_space
from llm_marl_envs.testing_interop import check_total_policies
from llm_marl_envs.toy import signal_game_v0


class EchoEnv(gym.Env):
    """A one-agent env with a ``FreeText`` action: the observation is the last action received."""

    def __init__(self) -> None:
        self.action_space = FreeText(100)
        self.observation_space = text_observation_space(100)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return {"text": "", "acting": 1}, {}

    def step(self, action):
        if not isinstance(action, str):
            raise TypeError(f"expected one whole string, got {action!r}")
        return {"text": action, "acting": 1}, float(len(action)), False, False, {}


def test_batched_free_text_iterates_whole_strings():
    batched = batch_space(FreeText(100), 2)
    assert isinstance(batched, BatchedFreeText) and batched.contains(("owl", "giraffe"))
    assert list(iterate(batched, ["owl", "cat"])) == ["owl", "cat"]
    assert list(iterate(batched, ("owl", "giraffe"))) == ["owl", "giraffe"]
    assert list(iterate(FreeText(100), ["ab", "cd"])) == ["ab", "cd"]  # SuperSuit's call (single space)
    with pytest.raises(TypeError, match="one character"):
        list(iterate(FreeText(100), "owl"))  # one string is not a batch
    samples = batched.sample()
    assert len(samples) == 2 and all(isinstance(s, str) for s in samples)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_gymnasium_vector_envs_give_each_env_its_own_string(kind):
    fns = [EchoEnv, EchoEnv]
    vec = gym.vector.SyncVectorEnv(fns) if kind == "sync" else gym.vector.AsyncVectorEnv(fns, shared_memory=False)
    try:
        obs, _ = vec.reset(seed=0)
        assert obs["text"] == ("", "") and list(obs["acting"]) == [1, 1]
        for actions in (["owl", "giraffe"], ["ab", "cd"], ["x" * 99, "✓ ünïcode\n"]):
            obs, rewards, _, _, _ = vec.step(actions)
            assert list(obs["text"]) == actions
            assert list(rewards) == [len(a) for a in actions]
    finally:
        vec.close()


def test_async_vector_env_default_shared_memory_carries_each_step_text():
    """AsyncVectorEnv's default (shared_memory=True): every step's texts, unicode included, not the first ones."""
    vec = gym.vector.AsyncVectorEnv([EchoEnv, EchoEnv])
    live = gym.vector.AsyncVectorEnv([EchoEnv, EchoEnv], copy=False)
    try:
        obs, _ = vec.reset(seed=0)
        assert obs["text"] == ("", "")
        view, _ = live.reset(seed=0)
        for actions in (["owl", "giraffe"], ["x" * 100, "✓ ünïcode 你好 😀\n"], ["", "b"]):
            obs, rewards, _, _, _ = vec.step(actions)
            assert obs["text"] == tuple(actions) and list(rewards) == [len(a) for a in actions]
            live.step(actions)
            assert tuple(view["text"]) == tuple(actions)  # copy=False: a live view of the shared memory
    finally:
        vec.close()
        live.close()


def test_supersuit_vector_env_gives_each_agent_its_own_string():
    import supersuit as ss

    vec = ss.pettingzoo_env_to_vec_env_v1(make_parallel("toy/signal_game_v0"))
    vec = ss.concat_vec_envs_v1(vec, 2, num_cpus=0, base_class="gymnasium")
    vec.reset(seed=0)
    records = [v.par_env.unwrapped.record for v in vec.vec_envs]
    vec.step(["speaker zero", "listener zero", "speaker one", "listener one"])  # speakers act in cycle 1
    assert [r.steps[0].action for r in records] == ["speaker zero", "speaker one"]
    vec.close()


@pytest.mark.parametrize("space", [FreeText(10), text_observation_space(1_000_000)])
def test_flatten_refuses_free_text_clearly(space):
    value = space.sample()
    for call in (lambda: gym.spaces.flatten_space(space), lambda: gym.spaces.flatten(space, value)):
        with pytest.raises(TextNotFlattenableError, match="free text has no fixed-size numeric form"):
            call()
    with pytest.raises(ValueError, match="cannot be flattened"):  # a Dict asks is_np_flattenable first
        gym.spaces.flatdim(space)
    assert not space.is_np_flattenable


def test_pettingzoo_flag_does_not_change_who_acts():
    """Setting PettingZoo's ``is_parallelizable`` (as its error message advises) changes nobody's turn."""
    par = make_parallel("toy/signal_game_v0")
    raw = par.unwrapped
    assert raw.metadata["is_parallelizable"] and not raw.simultaneous_turns
    raw.metadata["is_parallelizable"] = False
    _, infos = par.reset(seed=0)
    assert {a: i["acting"] for a, i in infos.items()} == {"speaker": True, "listener": False}
    turns = signal_game_v0.env()
    assert not turns.metadata["is_parallelizable"]  # the turn schedule of a sequential task
    turns.unwrapped.metadata["is_parallelizable"] = True
    turns.reset(seed=0)
    assert turns.unwrapped.cycle_actors == frozenset({"speaker", "listener"})  # its own turn, unchanged


def test_a_task_declaring_pettingzoos_flag_itself_is_told_about_simultaneous_turns():
    class Declared(signal_game_v0.raw_env):
        metadata = {**signal_game_v0.raw_env.metadata, "is_parallelizable": True}

    with pytest.warns(UserWarning, match="simultaneous_turns"):
        env = Declared()
    assert not env.metadata["is_parallelizable"] and not env.simultaneous_turns


def test_helper_main_simultaneous_turns_follow_visibility():
    from llm_marl_envs.code import helper_main_v0

    blind = helper_main_v0.env(dataset="humaneval", split="eval", eval_fraction=0.05)
    seq = helper_main_v0.env(dataset="humaneval", split="eval", eval_fraction=0.05, visibility="sequential")
    assert blind.metadata["is_parallelizable"] and blind.unwrapped.simultaneous_turns
    assert not seq.metadata["is_parallelizable"] and not seq.unwrapped.simultaneous_turns


def test_render_accepts_and_ignores_a_mode():
    env = signal_game_v0.env(render_mode="ansi")
    env.reset(seed=0)
    env.step("egg")
    assert env.render("rgb_array") == env.render() == env.unwrapped.render("human") != ""
    par = signal_game_v0.parallel_env(render_mode="ansi")
    par.reset(seed=0)
    assert par.render("human") == par.render() == par.unwrapped.render() != ""


def test_acting_flag_in_observations_tells_noop_slots():
    par = signal_game_v0.parallel_env(n_rounds=2)
    obs, infos = par.reset(seed=0)
    seen = []
    while par.agents:
        seen.append({a: (o["acting"], infos[a]["acting"]) for a, o in obs.items()})
        actions = {a: signal_game_v0.best_policy(par.aec_env, a) for a in par.agents}
        assert [a for a, text in actions.items() if text] == [a for a in par.agents if obs[a]["acting"]]
        obs, _, _, _, infos = par.step(actions)
    assert seen == [{"speaker": (1, True), "listener": (0, False)}, {"speaker": (0, False), "listener": (1, True)}] * 2


def test_check_env_catches_a_policy_that_raises_for_a_non_acting_agent(monkeypatch):
    from llm_marl_envs import EnvSpec

    spec = EnvSpec("toy/signal_game_v0", "llm_marl_envs.toy.signal_game_v0", "test")
    check_total_policies(spec)
    monkeypatch.setattr(signal_game_v0, "best_policy", signal_game_v0.best_policy.__wrapped__)  # not total
    with pytest.raises(AssertionError, match="best_policy.*raised"):
        check_total_policies(spec)
