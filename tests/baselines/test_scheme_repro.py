"""Checks the paper reproductions rest on: AT-GRPO groups on a multi-turn task, MARS2 shaping on real trees."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import llm_marl_envs
from baselines.advantages import AdvantageConfig, compute_advantages
from baselines.rollout import EnvPool, Task, sample
from baselines.samples import Row, SampleTable
from tests.baselines.test_rollout import build_signal_model, make_backend, signal_kwargs


@pytest.fixture(scope="module")
def namer_dir(tmp_path_factory) -> Path:
    return build_signal_model(tmp_path_factory.mktemp("namer"), signal_kwargs(n_rounds=3), imitate_steps=25)


def test_at_grpo_every_group_holds_the_k_candidates_of_one_state_on_every_turn(namer_dir):
    _, backend = make_backend(namer_dir, max_new_tokens=1)
    k, n_rounds = 4, 3
    kwargs = signal_kwargs(n_rounds=n_rounds)
    result = sample("branching", EnvPool(lambda: llm_marl_envs.make("toy/signal_game_v0", **kwargs)),
                    [Task(s) for s in range(3)], backend, group_size=k)
    table = result.table
    groups = {g: np.flatnonzero(table.group == g) for g in set(table.group.tolist())}
    assert len(groups) == 3 * 2 * n_rounds  # one decision per agent, turn and task
    assert sorted({int(t) for t in table.turn}) == [0, 1, 2]
    for idx in groups.values():
        assert len(idx) == k
        for column in (table.task, table.turn, table.agent, table.parent):
            assert len({column[i] for i in idx}) == 1
        assert all(table.prompt_ids[i] == table.prompt_ids[idx[0]] for i in idx)  # one identical state
    # later turns grow from the chosen candidate of the previous decision: parents are earlier nodes
    later = np.flatnonzero(table.turn > 0)
    assert np.all(np.isin(table.parent[later], table.node)) and np.all(table.parent[later] < table.node[later])
    res = compute_advantages(table, "at_grpo", AdvantageConfig(expected_group_size=k))
    assert len(np.unique(res.groups)) == len(groups)


def _tree_table(n_episodes: int = 2) -> SampleTable:
    """Real tree_search trees (sandboxed scoring, Thompson-sampled parents) grown by the random scripted policy."""
    spec = llm_marl_envs.spec("code/tree_search_v0")
    env, module = spec.make(**{**spec.test_kwargs, "max_nodes": 5}), spec.load()
    rng = np.random.default_rng(0)
    rows = []
    for ep in range(n_episodes):
        env.reset(seed=ep)
        for agent in env.agent_iter():
            _, _, term, trunc, _ = env.last()
            env.step(None if term or trunc else module.random_policy(env, agent, rng))
        for rec in env.unwrapped.tree.to_records():
            assert rec["score"] is not None, "sandbox infrastructure error"
            rows.append(Row("t", ep, rec["agent"], float(rec["score"]), node=int(rec["id"]),
                            parent=int(rec["parent_id"]), depth=int(rec["depth"])))
    return SampleTable.from_rows(rows)


def test_mars2_shaping_changes_advantages_on_real_trees_and_is_inert_without_parent_ids():
    table = _tree_table()
    assert np.any(table.parent >= 0) and len(set(table.reward.tolist())) > 1  # real refinements, mixed scores
    plain = compute_advantages(table, "mars2", AdvantageConfig())
    shaped = compute_advantages(table, "mars2", AdvantageConfig(shaping=True))
    assert np.abs(shaped.advantages - plain.advantages).max() > 0.05
    # MARTI recorded no parent ids: every node a child of the problem. The shaping is then an
    # affine map of the reward within each tree, which the tree-wide normalization cancels.
    flat = table.replace(parent=np.full(len(table), -1), depth=np.zeros(len(table), dtype=np.int64))
    inert = compute_advantages(flat, "mars2", AdvantageConfig(shaping=True))
    np.testing.assert_allclose(inert.advantages, plain.advantages, atol=1e-4)


def test_mars2_heterogeneous_team_of_two_tiny_architectures_trains_end_to_end(tmp_path):
    """Tree search with agent_0 a qwen2 model (bpe tokenizer) and agent_1 a llama model (word tokenizer)."""
    from baselines.config import load_config
    from baselines.policies import Team, TeamConfig, build_tiny_model
    from baselines.trainer import Trainer, env_texts

    spec = llm_marl_envs.spec("code/tree_search_v0")
    kwargs = {**spec.test_kwargs, "n_agents": 2, "max_nodes": 4}
    env = spec.make(**kwargs)
    texts = env_texts(env, spec.load(), n_episodes=4)
    agents = list(env.unwrapped.possible_agents)
    assert len(agents) == 2
    paths = {
        agents[0]: str(build_tiny_model(tmp_path / "qwen", texts=texts, tokenizer="bpe", bpe_vocab_size=400)),
        agents[1]: str(build_tiny_model(tmp_path / "llama", texts=texts, arch="llama", hidden_size=48, seed=1)),
    }
    team = Team.from_config(TeamConfig(mode="separate", models=paths), agents)
    cfg = load_config(overrides=["scheme=mars2", "rollout.tasks_per_step=1", "rollout.group_size=2",
                                 "generation.max_new_tokens=8", "advantage.shaping=true", "log.tensorboard=false"],
                      base={"env": {"name": spec.name, "kwargs": kwargs}})
    trainer = Trainer(cfg, tmp_path / "run", team=team)
    assert len(trainer.param_sets) == 2  # one optimizer per architecture
    for _ in range(2):
        m = trainer.train_step()
        assert m["skipped_updates"] == 0 and m["n_trained_rows"] > 0
        for agent in agents:
            assert np.isfinite(m[f"agent/{agent}/grad_norm"]) and m[f"agent/{agent}/n_rows"] > 0


def test_at_grpo_alpha_mix_is_cancelled_in_every_coder_tester_group_and_team_only_silences_the_tester():
    """coder/tester with the menu policy (real sandbox): the team reward is the coder's golden-pass change
    and its local reward the golden pass itself, and the tester cannot move the team reward of its own
    group, so alpha r_team + r_local is an affine map of one value in every group: alpha changes nothing;
    without r_local every tester advantage is 0."""
    from baselines.experiments import repro_at_grpo_alpha as alpha_exp
    from baselines.experiments.repro_menu import MenuBackend, MenuPolicy

    problems = alpha_exp.choose_problems(2)
    texts = {p.task_id: alpha_exp.menu(alpha_exp.from_code_problem(p)) for p in problems}
    backend = MenuBackend(MenuPolicy(alpha_exp.OPTIONS), texts, alpha_exp.turn_state, np.random.default_rng(0))
    pool = EnvPool(lambda: llm_marl_envs.make("code/coder_tester_v0", problems=problems, max_turns=2))
    k = 4
    table = sample("branching", pool, [Task(s) for s in range(3)], backend, group_size=k).table
    tester = table.agent == "tester"
    assert len(set(table.local_reward[tester].tolist())) > 1  # the tester's menu entries score differently
    info = alpha_exp.alpha_informative(table, k)
    assert info["informative/alpha=0"] == info["informative/alpha=0.5"] == 0.0
    assert info["informative/team_only"] > 0
    team_only = alpha_exp.config_advantages(table, 1.0, False, k)
    assert np.all(team_only[tester] == 0) and np.any(alpha_exp.config_advantages(table, 1.0, True, k)[tester] != 0)


def test_menu_policy_step_moves_probability_towards_the_positive_advantage_entry():
    from baselines.experiments.repro_menu import MenuPolicy

    policy = MenuPolicy({"a": ("x", "y", "z")})
    before = policy.probs("a", "s").copy()
    policy.update("a", "s", np.array([1, 2]), np.array([1.0, -1.0]), lr=1.0, n_rows=2)
    after = policy.probs("a", "s")
    assert after[1] > before[1] and after[2] < before[2] and np.isclose(after.sum(), 1.0)
    assert np.allclose(policy.probs("a", "other state"), 1 / 3)  # states are independent


def test_mars2_per_agent_grouping_differs_from_tree_wide_on_real_trees():
    from baselines.experiments.repro_mars2 import SHAPING, per_agent

    table = _tree_table(n_episodes=3)
    wide = compute_advantages(table, "mars2", SHAPING)
    mine = per_agent(table, SHAPING)
    np.testing.assert_allclose(mine.values, wide.values)  # the same shaped rewards, grouped differently
    for g in np.unique(mine.groups):
        rows = mine.groups == g
        assert len(set(table.agent[rows].tolist())) == 1 and len(set(table.episode[rows].tolist())) == 1
    assert len(np.unique(mine.groups)) > len(np.unique(wide.groups))
    assert np.abs(mine.advantages - wide.advantages).max() > 0.05


def test_dr_mas_few_rows_setting_amplifies_the_speaker_and_dr_mas_equalizes_the_agents():
    """The ``few_rows`` setting of ``repro_dr_mas``: the speaker holds 1/8 of the rows, its rewards are 4R,
    so the lemma's factor is at least 5.5 (between 5.56 and 7 for any reward distribution); GRPO's
    advantages give the speaker several times the listener's second moment, Dr. MAS the same."""
    from baselines.experiments import repro_dr_mas

    a2 = {}
    for scheme in ("grpo", "dr_mas"):
        (run,) = repro_dr_mas.main(["--setting", "few_rows", "--schemes", scheme, "--steps", "1", "--seeds", "0",
                                    "--eval-episodes", "0", "rollout.tasks_per_step=2"])
        m = run.metrics[0]
        assert m["agent/listener/n_rows"] == 7 * m["agent/speaker/n_rows"] == 7 * 2 * 8
        assert m["agent/speaker/amplification"] > 5.5 and m["agent/listener/amplification"] < 0.5
        a2[scheme] = {a: m[f"agent/{a}/adv_std"] ** 2 + m[f"agent/{a}/adv_mean"] ** 2 for a in ("speaker", "listener")}
    assert a2["grpo"]["speaker"] > 3 * a2["grpo"]["listener"]
    assert a2["dr_mas"]["speaker"] == pytest.approx(a2["dr_mas"]["listener"], rel=1e-5)
    assert a2["dr_mas"]["speaker"] > 0.5
