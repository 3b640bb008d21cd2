"""``choose_problem``: one way for every task to pick its problem (named, or drawn from the rng)."""

from __future__ import annotations

import numpy as np
import pytest

import llm_marl_envs
from llm_marl_envs.data.problems import choose_problem


class _P:
    def __init__(self, task_id: str) -> None:
        self.task_id = task_id


def test_named_problem_with_and_without_an_index_and_unknown_names():
    problems = [_P("a"), _P("b"), _P("c")]
    rng = np.random.default_rng(0)
    assert choose_problem(problems, rng, "b").task_id == "b"
    assert choose_problem(problems, rng, "c", {"a": 0, "b": 1, "c": 2}).task_id == "c"
    for by_id in (None, {"a": 0}):
        with pytest.raises(KeyError, match="unknown task_id 'zz'"):
            choose_problem(problems, rng, "zz", by_id)
    drawn = {choose_problem(problems, np.random.default_rng(s)).task_id for s in range(30)}
    assert drawn == {"a", "b", "c"}


@pytest.mark.parametrize("name", ["code/helper_main_v0", "code/coder_tester_v0"])
def test_tasks_reset_on_a_named_problem_and_refuse_unknown_ones(name):
    env = llm_marl_envs.make(name)
    env.reset(seed=0, options={"task_id": "HumanEval/3"})
    assert env.unwrapped.problem.task_id == "HumanEval/3"
    with pytest.raises(KeyError, match="unknown task_id"):
        env.reset(seed=0, options={"task_id": "nope"})
