"""MAGRPO's return-to-go on a real helper/main tree (2 turns, full feedback, real sandbox): what the
``repro_magrpo_code`` experiment rests on."""

from __future__ import annotations

import numpy as np

import llm_marl_envs
from baselines.advantages import magrpo_returns
from baselines.experiments import repro_magrpo_code as exp
from baselines.experiments.repro_menu import MenuBackend, MenuPolicy
from baselines.rollout import EnvPool, Task, sample
from llm_marl_envs.data.humaneval import load_humaneval


def _tree(main_first: float, main_second: float):
    """One tree (G = 2) on HumanEval/0, setup menus; helper: draft at turn 1, repair when informed."""
    problem = next(p for p in load_humaneval() if p.task_id == "HumanEval/0")
    policy = MenuPolicy(exp.OPTIONS)
    policy.logits[("helper", "turn1")] = np.array([20.0, 0.0, 0.0])  # the draft (wrong on every input)
    policy.logits[("helper", "turn2/informed")] = np.array([20.0, 0.0, 0.0])  # the repair
    policy.logits[("main", "turn1")] = np.array([main_first, main_second, -20.0])  # coop / solo
    policy.logits[("main", "turn2/informed")] = np.array([20.0, 0.0, 0.0])  # coop
    backend = MenuBackend(policy, {problem.task_id: exp.menus(problem, "setup")}, exp.feedback_state,
                          np.random.default_rng(0))
    pool = EnvPool(lambda: llm_marl_envs.make("code/helper_main_v0", problems=[problem], max_turns=2,
                                              feedback="full"))
    return sample("joint_tree", pool, [Task(0)], backend, group_size=2, tree_depth=2, gamma=0.9).table


def test_return_to_go_with_gamma_differs_from_gamma_0_on_the_turn_1_rows_of_a_real_helper_main_tree():
    """Turn 1 (draft, coop) scores 1.5 and does not end the episode; its feedback shows the failing
    tests, so the helper's state is 'informed' and turn 2 (repair, coop) scores 4.0 (delta reward 2.5).
    gamma 0 judges turn 1 by 1.5, gamma 0.9 by 1.5 + 0.9 * 2.5; turn-2 rows are the same for both."""
    table = _tree(20.0, 0.0)
    first, second = table.depth == 0, table.depth == 1
    assert first.sum() == 4 and second.sum() == 8  # 2 joint actions x 2 agents, each with 2 children
    np.testing.assert_allclose(table.reward[first], 1.5)
    np.testing.assert_allclose(table.reward[second], 2.5)  # 4.0 - 1.5: the repair was reachable
    r0, r9 = magrpo_returns(table, 0.0), magrpo_returns(table, 0.9)
    np.testing.assert_allclose(r0[first], 1.5)
    np.testing.assert_allclose(r9[first], 1.5 + 0.9 * 2.5)
    np.testing.assert_allclose(r9[second], r0[second])
    np.testing.assert_allclose(table.return_to_go, r9)  # the sampler used the gamma it was given
    view = exp.turn1_view(table, 0.0, 0.9)
    assert view["team_return"] == 4.0 and view["ended_turn1"] == 0.0


def test_solo_main_ends_the_episode_at_turn_1_where_gamma_changes_nothing():
    """Turn 1 (draft, solo) passes every test alone: the episode ends at 2.5 with no children, so its
    return-to-go is 2.5 for every gamma -- the myopic choice the turn-1 reward prefers to 1.5."""
    table = _tree(-20.0, 20.0)
    assert set(table.depth.tolist()) == {0}
    np.testing.assert_allclose(table.reward, 2.5)
    np.testing.assert_allclose(magrpo_returns(table, 0.9), magrpo_returns(table, 0.0))
    assert exp.turn1_view(table, 0.0, 0.9)["ended_turn1"] == 1.0
