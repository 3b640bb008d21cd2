"""The texts of ``code/tree_search_v0``: the agents' instructions and the prompt of each node.

Kept apart from the environment (which decides where a node goes, runs it and scores it) so
that what an agent is shown reads in one place: a draft prompt (the problem statement) or a
refinement prompt (the parent's program and its public-test feedback).
"""

from __future__ import annotations

from collections.abc import Sequence

from llm_marl_envs.code.search_problems import FUNCTION, SearchProblem
from llm_marl_envs.code.tree import SearchTree

DEFAULT_INSTRUCTIONS = (
    "You are {agent}, one of {n} programmers who together search for a correct solution to a "
    "programming problem. You will be asked either to write a solution from scratch or to "
    "improve a previous candidate using its test results. Answer with one complete Python "
    "program in a ```python code block."
)


def role_instructions(names: Sequence[str], agent_instructions: str | Sequence[str] | None) -> list[str]:
    """Each agent's system prompt: one text for all (default :data:`DEFAULT_INSTRUCTIONS`) or one
    per agent, with ``{agent}`` and ``{n}`` filled in. Raises ValueError on a count mismatch."""
    if agent_instructions is None or isinstance(agent_instructions, str):
        texts = [agent_instructions or DEFAULT_INSTRUCTIONS] * len(names)
    else:
        texts = list(agent_instructions)
        if len(texts) != len(names):
            raise ValueError(f"{len(texts)} agent_instructions for {len(names)} agents")
    return [t.replace("{agent}", a).replace("{n}", str(len(names))) for a, t in zip(names, texts)]


def node_prompt(problem: SearchProblem, tree: SearchTree, parent_id: int) -> str:
    """What the agent writing the next node is told: a draft (``parent_id < 0``) or a refinement
    of node ``parent_id`` (its program and the public-test feedback it got)."""
    p = problem
    if p.kind == FUNCTION:
        task = (f"Write the Python function `{p.entry_point}` described below (complete code, "
                "including the imports it needs).")  # fmt: skip
    else:
        task = "Write a complete Python program that reads the input from stdin and prints the answer to stdout."
    head = f"Problem {p.task_id}. {task}\n\n{p.statement.strip()}\n"
    if parent_id < 0:
        return head + "\nWrite a new solution from scratch. Answer with one ```python code block."
    parent = tree[parent_id]
    return (
        f"{head}\nA previous candidate (node #{parent.id}, by {parent.agent}):\n```python\n"
        f"{parent.program}\n```\n\nIts results:\n{parent.feedback}\n\n"
        "Fix it: answer with one complete corrected program in a ```python code block."
    )
