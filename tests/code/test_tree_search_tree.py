"""The search tree and its node records (code/tree.py)."""

from __future__ import annotations

import json

import pytest

from llm_marl_envs.code.tree import SearchTree


def _tree() -> SearchTree:
    t = SearchTree()
    for parent, agent, score in [(-1, "a", 0.5), (-1, "b", 1.0), (0, "a", 1.0), (2, "b", None), (0, "b", 0.0)]:
        t.add(parent_id=parent, agent=agent, turn=len(t), program=f"p{len(t)}", score=score, passed=0, total=2,
              status="failed" if score is not None else "infra_error", prompt_feedback="pf", feedback="fb",
              infra_error=None if score is not None else "pool died")  # fmt: skip
    return t


def test_ids_parents_depths_children():
    t = _tree()
    assert [n.id for n in t.nodes] == [0, 1, 2, 3, 4]
    assert [n.parent_id for n in t.nodes] == [-1, -1, 0, 2, 0]
    assert [n.depth for n in t.nodes] == [0, 0, 1, 2, 1]
    assert [n.kind for n in t.nodes] == ["draft", "draft", "refine", "refine", "refine"]
    assert t[0].children == [2, 4] and t[2].children == [3]
    assert [n.id for n in t.children_of(-1)] == [0, 1]
    assert [n.id for n in t.subtree(0)] == [0, 2, 3, 4]
    assert t.depth_counts() == {0: 2, 1: 2, 2: 1}


def test_best_is_highest_public_score_earliest_on_ties_never_infra():
    t = _tree()
    assert t.best().id == 1  # nodes 1 and 2 both score 1.0: the earliest wins
    t2 = SearchTree()
    t2.add(parent_id=-1, agent="a", turn=0, program="", score=None, passed=0, total=1, status="infra_error")
    assert t2.best() is None
    t2.add(parent_id=-1, agent="a", turn=1, program="", score=0.0, passed=0, total=1, status="failed")
    assert t2.best().id == 1


def test_records_are_plain_json_with_every_field():
    recs = _tree().to_records()
    json.dumps(recs)
    assert set(recs[0]) == {
        "id", "parent_id", "depth", "agent", "turn", "kind", "program", "score", "passed", "total", "status",
        "prompt_feedback", "feedback", "infra_error", "hidden_score", "children",
    }  # fmt: skip
    assert recs[3]["infra_error"] == "pool died" and recs[3]["score"] is None
    recs[0]["children"].append(99)  # a copy: the tree does not change
    assert _tree()[0].children == [2, 4]


def test_render_draws_every_node_under_its_parent():
    text = _tree().render(best_id=1)
    assert text.splitlines() == [
        "problem",
        "|-- #0 a score=0.50 (0/2) failed",
        "|   |-- #2 a score=1.00 (0/2) failed",
        "|   |   `-- #3 b infra-error infra_error",
        "|   `-- #4 b score=0.00 (0/2) failed",
        "`-- #1 b score=1.00 (0/2) failed  <- best",
    ]


def test_unknown_parent_is_rejected():
    with pytest.raises(ValueError):
        SearchTree().add(parent_id=0, agent="a", turn=0, program="", score=0.0, passed=0, total=1, status="failed")
