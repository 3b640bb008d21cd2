"""Sample table: construction, defaults, validation, selection, concat, jsonl."""

from __future__ import annotations

import math

import numpy as np
import pytest

from baselines.samples import COLUMNS, Row, SampleTable


def _rows() -> list[Row]:
    return [
        Row("q1", 0, "coder", 1.0, turn=0, completion_ids=[5, 6], old_logprobs=[-0.1, -0.2],
            reward_components={"pass": 1.0}),
        Row("q1", 0, "tester", 1.0, turn=1, node=3, parent=1, depth=1, credit=0.25, group="s1"),
        Row("q2", 4, "coder", 0.0, prompt_ids=[1, 2, 3], local_reward=0.5, tool_reward=1.0),
    ]


def test_from_rows_fills_defaults_and_types():
    t = SampleTable.from_rows(_rows())
    assert len(t) == 3
    assert t.task.tolist() == ["q1", "q1", "q2"]
    assert t.episode.dtype == np.int64 and t.episode.tolist() == [0, 0, 4]
    assert t.branch.tolist() == [-1, -1, -1]
    assert t.node.tolist() == [-1, 3, -1] and t.parent.tolist() == [-1, 1, -1]
    assert t.depth.tolist() == [0, 1, 0]
    assert t.reward.dtype == np.float64 and t.reward.tolist() == [1.0, 1.0, 0.0]
    assert np.isnan(t.return_to_go).all()
    assert np.isnan(t.credit[[0, 2]]).all() and t.credit[1] == 0.25
    assert t.local_reward.tolist() == [0.0, 0.0, 0.5]
    assert t.tool_reward.tolist() == [0.0, 0.0, 1.0]
    assert t.group.tolist() == ["", "s1", ""]
    assert t.completion_ids == [[5, 6], [], []]
    assert t.prompt_ids == [[], [], [1, 2, 3]]
    assert t.reward_components == [{"pass": 1.0}, {}, {}]
    assert t.completion_lengths.tolist() == [2, 0, 0]


def test_dict_rows_and_numpy_token_sequences():
    t = SampleTable.from_rows([
        {"task": "q", "episode": 1, "agent": "a", "reward": 0.5,
         "completion_ids": np.array([7, 8, 9]), "old_logprobs": (-1.0, -2.0, -3.0)},
    ])
    assert t.completion_ids == [[7, 8, 9]] and isinstance(t.completion_ids[0], list)
    assert t.old_logprobs == [[-1.0, -2.0, -3.0]]


def test_column_and_row_access():
    t = SampleTable.from_rows(_rows())
    assert t["agent"].tolist() == ["coder", "tester", "coder"]
    assert t.column("turn").tolist() == [0, 1, 0]
    r = t[1]
    assert isinstance(r, Row) and r.agent == "tester" and r.node == 3 and r.group == "s1"
    assert isinstance(r.episode, int) and isinstance(r.reward, float)
    assert t[-1].task == "q2"
    with pytest.raises(KeyError, match="unknown column"):
        t.column("rewards")
    with pytest.raises(IndexError):
        t.row(3)


def test_rows_round_trip():
    rows = _rows()
    t = SampleTable.from_rows(rows)
    back = list(t.rows())
    for got, want in zip(back, rows):
        for name in COLUMNS:
            g, w = getattr(got, name), getattr(want, name)
            assert g == w or (math.isnan(g) and math.isnan(w)), name
    assert SampleTable.from_rows(back).equals(t)


def test_missing_required_column_is_named():
    with pytest.raises(ValueError, match=r"row 1: missing required column\(s\) \['reward'\]"):
        SampleTable.from_rows([{"task": "q", "episode": 0, "agent": "a", "reward": 1.0},
                               {"task": "q", "episode": 0, "agent": "a"}])
    with pytest.raises(ValueError, match="missing required column"):
        SampleTable.from_columns(task=["q"], episode=[0], reward=[1.0])


def test_unknown_column_is_rejected():
    with pytest.raises(ValueError, match=r"unknown column\(s\) \['rewards'\]"):
        SampleTable.from_rows([{"task": "q", "episode": 0, "agent": "a", "reward": 1.0, "rewards": 2}])


def test_length_mismatch_is_reported():
    with pytest.raises(ValueError, match="column 'episode' has 1 rows, column 'task' has 2"):
        SampleTable.from_columns(task=["q", "q"], episode=[0], agent=["a", "b"], reward=[0.0, 1.0])


def test_logprob_length_must_match_completion():
    with pytest.raises(ValueError, match="row 0: 2 completion tokens but 1 old_logprobs"):
        SampleTable.from_rows([Row("q", 0, "a", 1.0, completion_ids=[1, 2], old_logprobs=[-0.5])])


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_reward_must_be_finite(bad):
    with pytest.raises(ValueError, match="'reward' is not finite at row"):
        SampleTable.from_rows([Row("q", 0, "a", bad)])


def test_integer_columns_reject_floats_and_empty_names():
    with pytest.raises(ValueError, match="'episode' must hold integers"):
        SampleTable.from_rows([{"task": "q", "episode": 0.5, "agent": "a", "reward": 1.0}])
    with pytest.raises(ValueError, match="'agent' has empty names"):
        SampleTable.from_rows([Row("q", 0, "", 1.0)])


def test_select_mask_and_indices():
    t = SampleTable.from_rows(_rows())
    s = t.select(np.array([True, False, True]))
    assert s.task.tolist() == ["q1", "q2"] and s.prompt_ids == [[], [1, 2, 3]]
    s2 = t.select([2, 0])
    assert s2.agent.tolist() == ["coder", "coder"] and s2.episode.tolist() == [4, 0]
    assert s2.completion_ids == [[], [5, 6]]
    assert len(t.select(np.zeros(3, dtype=bool))) == 0
    assert t[1:].task.tolist() == ["q1", "q2"]
    with pytest.raises(ValueError, match="boolean mask has shape"):
        t.select(np.array([True, False]))


def test_concat_and_append():
    rows = _rows()
    a = SampleTable.from_rows(rows[:2])
    b = SampleTable.from_rows(rows[2:])
    c = SampleTable.concat([a, b])
    assert c.equals(SampleTable.from_rows(rows))
    a.append(rows[2])
    assert a.equals(c)
    assert len(SampleTable.concat([])) == 0


def test_replace_validates():
    t = SampleTable.from_rows(_rows())
    t2 = t.replace(return_to_go=[1.0, 2.0, 3.0])
    assert t2.return_to_go.tolist() == [1.0, 2.0, 3.0] and np.isnan(t.return_to_go).all()
    with pytest.raises(ValueError, match="has 2 rows"):
        t.replace(return_to_go=[1.0, 2.0])
    with pytest.raises(ValueError, match="unknown column"):
        t.replace(foo=[1, 2, 3])


def test_jsonl_round_trip_keeps_nan_as_null(tmp_path):
    t = SampleTable.from_rows(_rows())
    path = tmp_path / "samples.jsonl"
    t.to_jsonl(path)
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    assert '"credit": null' in lines[0] and '"credit": 0.25' in lines[1]
    back = SampleTable.from_jsonl(path)
    assert back.equals(t)
    assert set(COLUMNS) <= set(back.row(0).__dict__)


def test_empty_table():
    t = SampleTable.empty()
    assert len(t) == 0 and t.reward.shape == (0,) and t.episode.dtype == np.int64
    assert not t.equals(SampleTable.from_rows(_rows()[:1]))
