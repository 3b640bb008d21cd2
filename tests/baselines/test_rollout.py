"""Rollout: lock-step batched play, the four sampling modes, and the rows they record.

The policies are real tiny ``transformers`` models built locally. A freshly initialized
model almost never names a candidate of the signal game, so some tests first teach it, by
a few supervised steps, to imitate the env's scripted *random* policy (name a random
candidate): rewards then vary within groups, which is what the assertions need.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

import llm_marl_envs
from baselines.advantages import compute_advantages, magrpo_returns
from baselines.generation import GenerationConfig, TransformersBackend
from baselines.policies import Team, TeamConfig, build_tiny_model
from baselines.rollout import EnvPool, Task, sample
from baselines.trainer import env_texts
from llm_marl_envs.toy.signal_game_v0 import words_of

SIGNAL = "toy/signal_game_v0"
WORDS = ["apple", "boat", "cat", "drum"]


def signal_kwargs(**kw):
    return {"n_candidates": 4, "message_length": 1, "words": WORDS, **kw}


def build_signal_model(path: Path, kwargs: dict, *, imitate_steps: int = 0, seed: int = 0) -> Path:
    """A tiny model over signal-game texts; optionally taught to imitate the random policy."""
    spec = llm_marl_envs.spec(SIGNAL)
    build_tiny_model(path, texts=env_texts(spec.make(**kwargs), spec.load(), n_episodes=16), extra_words=WORDS,
                     seed=seed)
    if imitate_steps:
        team = Team.from_config(TeamConfig(mode="shared", model=str(path)), ["speaker", "listener"])
        imitate_random_policy(team, kwargs, imitate_steps, seed=seed)
        model = team.model("speaker")
        model.save_pretrained(path)
    return path


def imitate_random_policy(team: Team, kwargs: dict, steps: int, *, seed: int = 0, n_episodes: int = 64) -> None:
    """Supervised steps towards the env's scripted random policy (a random candidate word + EOS)."""
    spec = llm_marl_envs.spec(SIGNAL)
    env, module = spec.make(**kwargs), spec.load()
    rng = np.random.default_rng(seed)
    data: dict[str, tuple[list, list]] = {a: ([], []) for a in team.agents}
    for i in range(n_episodes):
        env.reset(seed=i)
        while not env.unwrapped.record.done:
            agent = env.agent_selection
            action = module.random_policy(env, agent, rng)
            tok = team.tokenizer(agent)
            data[agent][0].append(team.encode_prompt(agent, env.observe_chat(agent)))
            data[agent][1].append(tok(action, add_special_tokens=False)["input_ids"] + [tok.eos_token_id])
            env.step(action)
    params = list(team.trainable_parameters(None).values())
    opt = torch.optim.Adam(params, lr=1e-2)
    for _ in range(steps):
        opt.zero_grad()
        loss = 0.0
        for agent, (prompts, completions) in data.items():
            logps, _ = team.sequence_logprobs(agent, prompts, completions)
            loss = loss - torch.stack([lp.sum() for lp in logps]).mean()
        loss.backward()
        opt.step()


@pytest.fixture(scope="module")
def namer_dir(tmp_path_factory) -> Path:
    """Tiny model that names a random candidate most of the time."""
    return build_signal_model(tmp_path_factory.mktemp("namer"), signal_kwargs(), imitate_steps=25)


def make_backend(model_dir: Path, *, max_new_tokens: int = 2, seed: int = 0):
    team = Team.from_config(TeamConfig(mode="shared", model=str(model_dir)), ["speaker", "listener"])
    return team, TransformersBackend(team, GenerationConfig(max_new_tokens=max_new_tokens, seed=seed))


class CountingBackend:
    """The real backend, counting its calls and request batch sizes."""

    def __init__(self, backend) -> None:
        self.backend = backend
        self.batches: list[int] = []

    def generate(self, requests):
        self.batches.append(len(requests))
        return self.backend.generate(requests)


def pool_for(kwargs: dict) -> EnvPool:
    return EnvPool(lambda: llm_marl_envs.make(SIGNAL, **kwargs))


def decode(team: Team, ids) -> str:
    return team.decode("speaker", ids)


def target_of(team: Team, speaker_prompt) -> str:
    return decode(team, speaker_prompt).rsplit("target:", 1)[1].split()[0]


# ---------------------------------------------------------------------------------- episodes
def test_episodes_batch_every_env_in_one_call_per_agent_step(namer_dir):
    team, backend = make_backend(namer_dir)
    counting = CountingBackend(backend)
    tasks = [Task(s) for s in (3, 5, 7)]
    result = sample("episodes", pool_for(signal_kwargs(n_rounds=2)), tasks, counting, group_size=4, gamma=0.5)
    # 2 rounds x 2 agents = 4 agent-steps per episode; all 12 episodes advance together
    assert counting.batches == [12, 12, 12, 12]
    table = result.table
    assert len(table) == 3 * 4 * 4
    assert sorted(set(table.task.tolist())) == ["seed3", "seed5", "seed7"]
    for task in ("seed3", "seed5", "seed7"):
        rows = table.task == task
        assert sorted(set(table.episode[rows].tolist())) == [0, 1, 2, 3]
        # the G episodes of a task start from the same instance: identical first speaker prompts
        first = [table.prompt_ids[i] for i in np.flatnonzero(rows & (table.agent == "speaker") & (table.turn == 0))]
        assert all(p == first[0] for p in first)
    # reward = the episode's joint return; return_to_go = rewards from the row's turn on, discounted by gamma
    for (task, ep), ret in zip([(t.id, g) for t in tasks for g in range(4)], result.returns):
        rows = (table.task == task) & (table.episode == ep)
        assert np.all(table.reward[rows] == ret)
        turn1 = rows & (table.turn == 1)
        r1 = table.reward_components[np.flatnonzero(turn1)[0]]["correct"]
        assert np.all(table.return_to_go[turn1] == r1)
        assert np.all(table.return_to_go[rows & (table.turn == 0)] == (ret - r1) + 0.5 * r1)
    for i in range(len(table)):
        assert len(table.completion_ids[i]) == len(table.old_logprobs[i]) >= 1
        assert all(lp <= 0 for lp in table.old_logprobs[i])


def test_episode_logprobs_match_the_training_forward(namer_dir):
    team, backend = make_backend(namer_dir)
    table = sample("episodes", pool_for(signal_kwargs()), [Task(1)], backend, group_size=4).table
    for agent in ("speaker", "listener"):
        idx = np.flatnonzero(table.agent == agent)
        logps, _ = team.sequence_logprobs(agent, [table.prompt_ids[i] for i in idx],
                                          [table.completion_ids[i] for i in idx])
        for i, lp in zip(idx, logps):
            assert np.allclose(lp.detach().numpy(), table.old_logprobs[i], atol=1e-4)


def test_sharp_credit_comes_from_the_coalition_value(namer_dir):
    team, backend = make_backend(namer_dir)
    table = sample("episodes", pool_for(signal_kwargs()), [Task(s) for s in range(4)], backend, group_size=4,
                   with_credit=True).table
    assert not np.any(np.isnan(table.credit))
    for i in range(len(table)):
        r = table.reward[i]
        # signal game: v(both) = r, v(listener only) = 1/4, v(speaker only) = v({}) = 0
        expected = {"speaker": 0.5 * (r - 0.25) + 0.5 * 0.0, "listener": 0.5 * r + 0.5 * 0.25}[table.agent[i]]
        assert math.isclose(table.credit[i], expected, abs_tol=1e-12)
    single = sample("episodes", pool_for(signal_kwargs()), [Task(0)], backend, group_size=2, with_credit=True,
                    credit_method="single_mask").table
    for i in range(len(single)):
        r = single.reward[i]
        assert math.isclose(single.credit[i], r - (0.25 if single.agent[i] == "speaker" else 0.0), abs_tol=1e-12)


# ---------------------------------------------------------------------------------- AT-GRPO
def test_branching_groups_hold_the_k_candidates_of_one_state_scored_on_their_own_copies(namer_dir):
    team, backend = make_backend(namer_dir, max_new_tokens=1)
    k = 6
    tasks = [Task(s) for s in range(6)]
    result = sample("branching", pool_for(signal_kwargs()), tasks, backend, group_size=k)
    table = result.table
    assert len(table) == len(tasks) * 2 * k  # one decision per agent per task, K candidates each
    groups = {g: np.flatnonzero(table.group == g) for g in set(table.group.tolist())}
    assert len(groups) == len(tasks) * 2
    mixed = 0
    for idx in groups.values():
        assert len(idx) == k
        assert len({table.task[i] for i in idx}) == 1 and len({table.agent[i] for i in idx}) == 1
        assert len({table.turn[i] for i in idx}) == 1
        assert all(table.prompt_ids[i] == table.prompt_ids[idx[0]] for i in idx)  # one identical state
        assert sorted(table.branch[idx].tolist()) == list(range(k))
        if table.agent[idx[0]] == "listener":
            # each listener candidate is scored on its own copy: reward 1 iff IT names the target
            speaker_rows = np.flatnonzero((table.task == table.task[idx[0]]) & (table.agent == "speaker"))
            target = target_of(team, table.prompt_ids[speaker_rows[0]])
            for i in idx:
                named = {w for w in words_of(decode(team, table.completion_ids[i])) if w in WORDS}
                # the listener sees only the candidates, which are all four words here
                assert table.reward[i] == float(named == {target}), (decode(team, table.completion_ids[i]), target)
            mixed += len(set(table.reward[idx].tolist())) > 1
            # the chosen speaker candidate is the listener rows' parent
            assert len({table.parent[i] for i in idx}) == 1 and table.parent[idx[0]] in table.node[speaker_rows]
    assert mixed >= 1, "no listener group had candidates with different rewards"
    adv = compute_advantages(table, "at_grpo")
    assert len(np.unique(adv.groups)) == len(groups)


def test_branching_continues_from_the_best_candidate(namer_dir):
    team, backend = make_backend(namer_dir, max_new_tokens=1)
    result = sample("branching", pool_for(signal_kwargs(n_rounds=2)), [Task(s) for s in range(4)], backend,
                    group_size=4)
    table = result.table
    for task in set(table.task.tolist()):
        rows = np.flatnonzero(table.task == task)
        depth = table.depth[rows]
        assert sorted(set(depth.tolist())) == [0, 1, 2, 3]  # 2 rounds x 2 agents
        for d in (1, 2, 3):
            prev = rows[depth == d - 1]
            parent = table.parent[rows[depth == d]][0]
            chosen = prev[table.node[prev] == parent]
            assert len(chosen) == 1
            assert table.reward[chosen[0]] == table.reward[prev].max()  # greedy: the best candidate
            # tie-break: the lowest-branch candidate among the best
            best = prev[table.reward[prev] == table.reward[prev].max()]
            assert table.branch[chosen[0]] == table.branch[best].min()


# ---------------------------------------------------------------------------------- MAGRPO
def test_joint_tree_structure_and_return_to_go(namer_dir):
    team, backend = make_backend(namer_dir, max_new_tokens=1)
    g, gamma = 3, 0.9
    counting = CountingBackend(backend)
    result = sample("joint_tree", pool_for(signal_kwargs(n_rounds=3)), [Task(11), Task(12)], counting,
                    group_size=g, tree_depth=2, gamma=gamma)
    table = result.table
    # per task: level 0 has g nodes, level 1 g^2, level 2 (past tree_depth) one child each: g^2
    n_nodes = g + g * g + g * g
    assert len(table) == 2 * n_nodes * 2
    # one generate call per agent-step of each level, covering both tasks
    assert counting.batches == [2 * g, 2 * g, 2 * g * g, 2 * g * g, 2 * g * g, 2 * g * g]
    for task in ("seed11", "seed12"):
        rows = table.task == task
        nodes = {}
        for i in np.flatnonzero(rows):
            nodes.setdefault(int(table.node[i]), []).append(i)
        assert len(nodes) == n_nodes
        for idx in nodes.values():
            assert sorted(table.agent[idx].tolist()) == ["listener", "speaker"]  # joint action = both agents
            assert len({table.reward[i] for i in idx}) == 1
        # siblings: g children per branching node, grouped by the parent state id
        parents = {int(table.parent[idx[0]]) for idx in nodes.values()}
        for p in parents:
            children = [n for n, idx in nodes.items() if table.parent[idx[0]] == p]
            depth = table.depth[nodes[children[0]][0]]
            assert len(children) == (g if depth < 2 else 1)
        # return-to-go by hand: R = r + gamma * mean(children R)
        for node, idx in nodes.items():
            assert np.allclose(table.return_to_go[idx], _return_by_hand(table, nodes, node, gamma))
    assert np.allclose(table.return_to_go, magrpo_returns(table, gamma))
    # leaves are full episodes: g^2 root-to-leaf paths per task
    assert len(result.returns) == 2 * g * g
    adv = compute_advantages(table, "magrpo")
    sizes = np.bincount(adv.groups)
    assert set(sizes.tolist()) == {1, g}  # g siblings per agent per branching node; chains are singletons


def _return_by_hand(table, nodes: dict, node: int, gamma: float) -> float:
    """R(node) = r(node) + gamma * mean(R(children)), recursively over the node dict."""
    kids = [n for n, idx in nodes.items() if table.parent[idx[0]] == node]
    r = table.reward[nodes[node][0]]
    return r + (gamma * np.mean([_return_by_hand(table, nodes, c, gamma) for c in kids]) if kids else 0.0)


# ---------------------------------------------------------------------------------- MARS2
def test_flat_tree_for_envs_without_a_search_tree(namer_dir):
    team, backend = make_backend(namer_dir)
    result = sample("env_tree", pool_for(signal_kwargs()), [Task(2), Task(4)], backend, group_size=4)
    table = result.table
    assert result.info["tree"] == "flat"
    assert set(table.episode.tolist()) == {0}  # one tree per task
    for task in ("seed2", "seed4"):
        rows = np.flatnonzero(table.task == task)
        assert len(rows) == 8 and len(set(table.node[rows].tolist())) == 8
        roots = rows[table.parent[rows] == -1]
        assert len(roots) == 4 and set(table.agent[roots].tolist()) == {"speaker"}
    adv = compute_advantages(table, "mars2")
    assert len(np.unique(adv.groups)) == 2


def test_env_tree_rows_are_the_tree_search_nodes(tmp_path):
    spec = llm_marl_envs.spec("code/tree_search_v0")
    kwargs = dict(spec.test_kwargs)
    env = spec.make(**kwargs)
    path = build_tiny_model(tmp_path / "bpe", texts=env_texts(env, spec.load(), n_episodes=4), tokenizer="bpe",
                            bpe_vocab_size=400)
    agents = list(env.unwrapped.possible_agents)
    team = Team.from_config(TeamConfig(mode="shared", model=str(path)), agents)
    backend = TransformersBackend(team, GenerationConfig(max_new_tokens=8, seed=0))
    pool = EnvPool(lambda: spec.make(**kwargs))
    result = sample("env_tree", pool, [Task(0), Task(1)], backend, group_size=2)
    table = result.table
    assert result.info["tree"] == "env"
    per_episode = kwargs["max_nodes"]
    assert len(table) + result.info["infra_errors"] == 2 * 2 * per_episode
    for task, ep in {(t, e) for t, e in zip(table.task.tolist(), table.episode.tolist())}:
        rows = np.flatnonzero((table.task == task) & (table.episode == ep))
        assert sorted(table.node[rows].tolist()) == list(range(len(rows)))
        for i in rows:
            p = table.parent[i]
            assert p == -1 or (p < table.node[i] and table.depth[i] == table.depth[rows[table.node[rows] == p][0]] + 1)
            assert table.reward_components[i].get("node_score") == table.reward[i]
    adv = compute_advantages(table, "mars2")
    assert len(np.unique(adv.groups)) == len({(t, e) for t, e in zip(table.task.tolist(), table.episode.tolist())})
