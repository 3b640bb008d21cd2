"""The sampling modes added for CoMLRL's trainers: the rows GAE needs (step, turn reward), ReMax's greedy
rollout in the same rollout call, and MAGRPO's cross joint mode (every combination of answers a child)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from baselines.advantages import AdvantageConfig, compute_advantages
from baselines.generation import GenerationConfig, TransformersBackend
from baselines.rollout import Task, branching_nodes, sample
from tests.baselines.test_rollout import decode, make_backend, namer_dir, pool_for, signal_kwargs, target_of

__all__ = ["namer_dir"]  # the module-scoped fixture, shared


class RecordingBackend:
    """The real backend; records each call's batch size and temperature."""

    def __init__(self, backend) -> None:
        self.backend, self.config, self.calls = backend, backend.config, []

    def generate(self, requests, config=None):
        self.calls.append((len(requests), (config or self.config).temperature))
        return self.backend.generate(requests, config)


def test_episode_rows_carry_their_step_and_their_turns_reward(namer_dir):
    _, backend = make_backend(namer_dir)
    table = sample("episodes", pool_for(signal_kwargs(n_rounds=2)), [Task(3)], backend, group_size=3).table
    for e in range(3):
        rows = np.flatnonzero(table.episode == e)
        assert table.step[rows].tolist() == [0, 1, 2, 3]  # speaker, listener, speaker, listener
        for i in rows:
            assert table.turn_reward[i] == table.reward_components[i]["correct"]


def test_remax_plays_one_greedy_episode_per_task_in_the_same_rollout_call(namer_dir):
    team, backend = make_backend(namer_dir, seed=4)
    recording = RecordingBackend(backend)
    tasks = [Task(s) for s in (3, 5, 8)]
    result = sample("episodes", pool_for(signal_kwargs(n_rounds=2)), tasks, recording, group_size=4, gamma=0.5,
                    greedy_baseline=True)
    # every agent-step round: the 12 sampled episodes, then the 3 greedy ones at temperature 0
    assert recording.calls == [(12, 1.0), (3, 0.0)] * 4
    table = result.table
    assert len(table) == 3 * 4 * 4 and len(result.returns) == 12  # the greedy episodes are no training rows
    # the baseline is what a greedy episode of the task returns: play them again, alone
    greedy = TransformersBackend(team, GenerationConfig(max_new_tokens=2, temperature=0.0))
    alone = sample("episodes", pool_for(signal_kwargs(n_rounds=2)), tasks, greedy, group_size=1, gamma=0.5).table
    for task in ("seed3", "seed5", "seed8"):
        for turn in (0, 1):
            expected = alone.return_to_go[(alone.task == task) & (alone.turn == turn)][0]
            assert np.all(table.baseline[(table.task == task) & (table.turn == turn)] == expected)
    adv = compute_advantages(table, "remax", AdvantageConfig(gamma=0.5))
    np.testing.assert_allclose(adv.advantages, table.return_to_go - table.baseline)
    with pytest.raises(ValueError, match="played by rollout.mode=episodes"):
        sample("joint_tree", pool_for(signal_kwargs()), tasks, backend, group_size=2, greedy_baseline=True)


def test_cross_tree_combines_every_speaker_answer_with_every_listener_answer(namer_dir):
    team, backend = make_backend(namer_dir, max_new_tokens=1, seed=1)
    recording = RecordingBackend(backend)
    g, tasks = 3, [Task(s) for s in range(6)]
    result = sample("cross_tree", pool_for(signal_kwargs()), tasks, recording, group_size=g, tree_depth=1,
                    gamma=0.0)
    table = result.table
    assert len(result.returns) == len(tasks) * g * g  # g speaker answers x g listener answers per task
    assert result.info["tree_nodes_per_task"] == g * g
    shared = 0
    for task in {t.id for t in tasks}:
        speaker = np.flatnonzero((table.task == task) & (table.agent == "speaker"))
        listener = np.flatnonzero((table.task == task) & (table.agent == "listener"))
        assert len(speaker) == g
        messages = Counter(decode(team, table.completion_ids[i]).strip() for i in speaker)
        groups: dict[str, list[int]] = {}
        for i in listener:  # one group of g answers per distinct observation (= per distinct message)
            groups.setdefault(table.group[i], []).append(i)
        assert len(groups) == len(messages) and all(len(rows) == g for rows in groups.values())
        for rows in groups.values():
            assert all(table.prompt_ids[i] == table.prompt_ids[rows[0]] for i in rows)
            message = decode(team, table.prompt_ids[rows[0]]).rsplit("message:", 1)[1].split("\n")[0].strip()
            shared += messages[message] > 1
            for i in rows:  # gamma 0: a listener answer's return is its own turn's outcome
                assert table.return_to_go[i] == table.reward_components[i]["correct"]
            for s in speaker:  # a speaker answer's children: every listener answer to its message
                if decode(team, table.completion_ids[s]).strip() == message:
                    expected = np.mean([table.reward_components[i]["correct"] for i in rows])
                    assert table.return_to_go[s] == pytest.approx(expected)
        assert target_of(team, table.prompt_ids[speaker[0]])  # the speaker's prompt names the target
    assert shared > 0  # some listener answers were combined with several speaker answers (one observation)
    # one generate call per agent-step round: 6 x 3 speaker requests, then 3 per distinct message
    assert recording.calls[0] == (len(tasks) * g, 1.0) and len(recording.calls) == 2
    sizes = set(np.bincount(compute_advantages(table, "magrpo").groups).tolist())
    assert sizes == {g}  # MAGRPO's groups: the g answers sampled from one observation


def test_cross_tree_multi_turn_size_and_return_to_go(namer_dir):
    _, backend = make_backend(namer_dir, max_new_tokens=1, seed=2)
    g = 2
    result = sample("cross_tree", pool_for(signal_kwargs(n_rounds=3)), [Task(1), Task(2)], backend, group_size=g,
                    tree_depth=2, gamma=1.0)
    branching = branching_nodes(g, 2, 2)
    assert branching == 4 + 16
    assert result.info["tree_nodes_per_task"] == branching + 16  # + one chain node per leaf for the 3rd turn
    table = result.table
    assert len(result.returns) == 2 * 16
    first = (table.agent == "speaker") & (table.turn == 0)
    assert first.sum() == 2 * g
    # gamma 1 on balanced trees: the first answers' returns average to the mean leaf (episode) return
    assert table.return_to_go[first].mean() == pytest.approx(np.mean(result.returns))
    with pytest.raises(ValueError, match=r"G=4, tree_depth=2 gives 272 branching nodes .* > rollout.max_tree_nodes=100"):
        sample("cross_tree", pool_for(signal_kwargs(n_rounds=2)), [Task(1)], backend, group_size=4, tree_depth=2,
               max_tree_nodes=100)


@pytest.mark.parametrize("scheme", ["magrpo", "rloo"])
def test_magrpos_trainer_takes_a_step_on_cross_trees(scheme, namer_dir, tmp_path):
    from baselines.config import load_config
    from baselines.trainer import Trainer

    config = load_config(overrides=[f"scheme={scheme}", "rollout.mode=cross_tree", "rollout.tasks_per_step=3",
                                    "rollout.group_size=2", "generation.max_new_tokens=1", "log.tensorboard=false",
                                    f"model.path={namer_dir}"])
    trainer = Trainer(config, tmp_path)
    before = {n: p.detach().clone() for n, p in trainer.team.trainable_parameters(None).items()}
    m = trainer.train_step()
    assert m["rollout/tree_nodes_per_task"] == 4 and m["n_rows"] >= 3 * (2 + 2)
    assert m["agent/speaker/grad_norm"] > 0 and m["agent/listener/grad_norm"] > 0
    assert any(not torch.equal(p, trainer.team.trainable_parameters(None)[n]) for n, p in before.items())
