"""Runs the TorchRL recipes of docs/environments.md ("Using the environments from RLlib, TorchRL
and Tianshou"); TorchRL comes with the ``interop`` extra. RLlib's and Tianshou's recipes were run
once with the versions the section names (their dependencies are too heavy for CI)."""

from __future__ import annotations

import functools
import re
import warnings
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "environments.md"


def _recipes(library: str) -> list[str]:
    section = GUIDE.read_text().split("## Using the environments from RLlib, TorchRL and Tianshou", 1)[1]
    section = section.split("\n## ", 1)[0]
    return [b for b in re.findall(r"```python\n(.*?)```", section, re.S) if f"from {library}" in b]


def _run(code: str) -> dict:
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, "environments.md (recipe)", "exec"), namespace)
    return namespace


def test_the_section_has_a_recipe_per_library():
    assert [len(_recipes(lib)) for lib in ("torchrl", "ray", "tianshou")] == [2, 1, 1]


def test_torchrl_pettingzoo_wrapper_recipe_plays_an_episode():
    pytest.importorskip("torchrl")
    ns = _run(_recipes("torchrl")[0])
    raw = ns["par"].unwrapped
    assert raw.record.done and ns["episode_return"] == raw.record.total_reward == 2.0
    assert ns["td"]["next", "state"].startswith("candidates:")  # return_state=True: the task's state


@functools.cache
def _torchrl_wrapper() -> type:
    return _run(_recipes("torchrl")[0])["TextPettingZooWrapper"]


def test_torchrl_wrapper_plays_every_task(env_spec):
    """The recipe's wrapper on every registered task: specs, state, fixed infos, the team reward."""
    pytest.importorskip("torchrl")
    from tensordict import NonTensorStack

    best = env_spec.load().best_policy
    par = env_spec.parallel_env(**env_spec.test_kwargs)
    env = _torchrl_wrapper()(env=par, return_state=True, use_mask=True)
    td, total = env.reset(seed=0), 0.0
    group0 = next(iter(env.group_map))  # every agent gets the team reward
    for _ in range(1000):
        for group, agents in env.group_map.items():
            td[group, "action"] = NonTensorStack(*[best(par.aec_env, a) for a in agents])
        td = env.step(td)
        total += float(td["next", group0, "reward"][0])
        if td["next", "done"].all():
            break
        td = env.step_mdp(td)
    assert par.unwrapped.record.done and total == par.unwrapped.record.total_reward
    assert isinstance(td["next", "state"], str)


def test_torchrl_chat_history_recipe_renders_the_agent_chat():
    pytest.importorskip("torchrl")
    ns = _run(_recipes("torchrl")[1])
    env, tokenizer = ns["env"], ns["tokenizer"]
    assert env.unwrapped.record.total_reward == 2.0
    last = env.unwrapped.record.steps[-1]  # the chat the last agent answered, as it saw it
    assert ns["prompt"] == tokenizer.apply_chat_template(last.prompt, tokenize=False, add_generation_prompt=True)
