"""EvalPlus records (HumanEval+ / MBPP+): the base tests and the ``plus_input`` tests, one assert each.

A record (EvalPlus' release JSONL or the Hugging Face ``evalplus/humanevalplus`` /
``mbppplus`` layout) has ``task_id``, ``prompt``, ``entry_point``, ``canonical_solution``
(HumanEval+: the body; MBPP+: the whole program, or ``code``), ``base_input`` and
``plus_input`` (lists of argument lists), ``atol`` and, in the Hugging Face layout, a
``test`` whose ``check`` holds literal ``inputs = [...]`` and ``results = [...]``.

:func:`evalplus_record_to_problem` makes one :class:`CodeProblem` whose ``check`` has one
assert per input (``assert candidate(args) == expected``; a float result is compared
within ``atol``, or ``1e-6`` when ``atol`` is 0, as EvalPlus does). Expected values come
from ``results`` when the record has them; otherwise the reference solution is run on each
input in the sandbox (``sandbox=``, default the shared one) and its ``repr`` read back;
inputs whose result is not a Python literal, or on which the reference fails, are dropped
and counted in ``metadata["dropped_inputs"]``. The prompt is HumanEval+'s own; for MBPP+
(whose prompt is the task text in a docstring) it is built as for MBPP
(:mod:`llm_marl_envs.data.mbpp`). Every test is a hidden candidate: the code tasks show the
prompt's examples and score on the rest (:mod:`llm_marl_envs.data.test_split`).
``metadata`` records ``n_base`` and ``n_plus``.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from llm_marl_envs.data.mbpp import mbpp_record_to_problem
from llm_marl_envs.data.problems import CodeProblem

__all__ = ["EVALPLUS_SETUP", "evalplus_record_to_problem"]

#: put in front of ``check``: the comparison of a float result within a tolerance
EVALPLUS_SETUP = """import math


def _ep_close(got, expected, atol):
    if isinstance(expected, (list, tuple)):
        return isinstance(got, (list, tuple)) and len(got) == len(expected) and all(
            _ep_close(g, e, atol) for g, e in zip(got, expected))
    if isinstance(expected, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        if math.isnan(expected):
            return math.isnan(got)
        return math.isclose(got, expected, rel_tol=1e-07, abs_tol=atol)
    return got == expected
"""


def evalplus_record_to_problem(
    rec: dict[str, Any], examples_in_prompt: int = 1, sandbox: Any = None
) -> CodeProblem:
    """One EvalPlus record as a :class:`CodeProblem` (see the module docstring)."""
    for key in ("task_id", "prompt", "plus_input"):
        if key not in rec:
            raise KeyError(f"missing key {key!r}")
    task_id = str(rec["task_id"]) if not isinstance(rec["task_id"], int) else f"Mbpp/{rec['task_id']}"
    base = _problem_shell(rec, task_id, examples_in_prompt)
    if base.reference_program is None:
        raise ValueError(f"{task_id}: no canonical_solution / code")
    base_inputs = list(rec.get("base_input") or [])
    plus_inputs = list(rec.get("plus_input") or [])
    parsed = _inputs_and_results(str(rec.get("test") or ""))
    if parsed is not None:
        inputs, results = parsed
        dropped = 0
    else:
        inputs = base_inputs + plus_inputs
        results, kept, dropped = _reference_results(base, inputs, sandbox)
        inputs = kept
    if not inputs:
        raise ValueError(f"{task_id}: no usable test input")
    atol = float(rec.get("atol") or 0.0)
    asserts = "\n".join(f"    {_assert(args, exp, atol)}" for args, exp in zip(inputs, results))
    return replace(
        base,
        test=f"{EVALPLUS_SETUP}\n\ndef check(candidate):\n{asserts}\n",
        source="evalplus",
        metadata={
            **base.metadata,
            "n_base": len(base_inputs),
            "n_plus": len(plus_inputs),
            "n_tests": len(inputs),
            "dropped_inputs": dropped,
            "atol": atol,
        },  # fmt: skip
    )


# ---------------------------------------------------------------------------- internals
def _problem_shell(rec: dict[str, Any], task_id: str, examples_in_prompt: int) -> CodeProblem:
    """The problem without its tests: HumanEval+'s prompt, or an MBPP-style prompt for MBPP+."""
    prompt, entry = str(rec["prompt"]), str(rec.get("entry_point") or "")
    canonical = str(rec.get("canonical_solution") or rec.get("code") or "")
    if entry and _defines(prompt, entry):  # HumanEval+
        reference = canonical if _defines(canonical, entry) else (prompt + canonical if canonical else None)
        return CodeProblem(task_id=task_id, prompt=prompt, entry_point=entry, test="",
                           canonical_solution=canonical if reference == prompt + canonical else None,
                           reference_program=reference, source="evalplus")  # fmt: skip
    text_lines = [ln for ln in prompt.strip().strip('"').strip("'").splitlines()]
    shown = [ln.strip() for ln in text_lines if ln.strip().startswith("assert ")]
    text = "\n".join(ln for ln in text_lines if not ln.strip().startswith("assert ")).strip()
    tests = [str(t) for t in rec.get("test_list") or []] or shown
    if not tests and entry:
        tests = [f"assert {entry}() is not None"]  # only names the entry point for the MBPP converter
    mbpp = mbpp_record_to_problem(
        {"task_id": task_id, "text": text, "code": canonical, "test_list": tests,
         "test_imports": rec.get("test_imports") or []},
        examples_in_prompt, challenge_tests=False,
    )  # fmt: skip
    if entry and mbpp.entry_point != entry:
        raise ValueError(f"{task_id}: the tests call {mbpp.entry_point!r}, the record names {entry!r}")
    return replace(mbpp, task_id=task_id)


def _defines(code: str, name: str) -> bool:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name for n in tree.body)


def _inputs_and_results(test: str) -> tuple[list[Any], list[Any]] | None:
    """Literal ``inputs = [...]`` and ``results = [...]`` of a Hugging Face EvalPlus ``check``."""
    if "inputs" not in test or "results" not in test:
        return None
    try:
        tree = ast.parse(test)
    except SyntaxError:
        return None
    found: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("inputs", "results") and name not in found:
                try:
                    found[name] = ast.literal_eval(node.value)
                except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                    return None
    inputs, results = found.get("inputs"), found.get("results")
    if not isinstance(inputs, list) or not isinstance(results, list) or len(inputs) != len(results):
        return None
    return inputs, results


def _reference_results(
    problem: CodeProblem, inputs: Sequence[Any], sandbox: Any
) -> tuple[list[Any], list[Any], int]:
    """Run the reference on every input in the sandbox; (results, inputs kept, number dropped)."""
    from llm_marl_envs.sandbox import AssertTest, SandboxError, default_sandbox

    box = sandbox if sandbox is not None else default_sandbox()
    tests = [
        AssertTest(f"print(repr({problem.entry_point}({_args(a)})))", name=f"in_{i}")
        for i, a in enumerate(inputs)
    ]
    result = box.run(problem.reference_program or "", tests)
    if result.infra_error is not None:
        raise SandboxError(f"{problem.task_id}: computing expected outputs failed: {result.infra_error}")
    results, kept = [], []
    for args, t in zip(inputs, result.tests):
        value = _literal_or_none(t.stdout.strip()) if t.passed else None
        if value is not None:
            results.append(value[0])
            kept.append(args)
    return results, kept, len(inputs) - len(kept)


def _literal_or_none(text: str) -> tuple[Any] | None:
    try:
        return (ast.literal_eval(text),)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        try:  # inf / nan: read with float()
            return (_eval_floats(text),)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            return None


_SPECIAL = re.compile(r"\b(?:inf|nan)\b")


def _eval_floats(text: str) -> Any:
    tree = ast.parse(_SPECIAL.sub(lambda m: f"__{m.group(0)}__", text), mode="eval")
    return _from_node(tree.body)


def _from_node(node: ast.expr) -> Any:
    if isinstance(node, ast.Name) and node.id in ("__inf__", "__nan__"):
        return float(node.id.strip("_"))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_from_node(node.operand)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_from_node(e) for e in node.elts]
        return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
    return ast.literal_eval(node)


def _lit(value: Any) -> str:
    """Python source for a value, floats ``inf`` / ``nan`` included."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, list):
        return "[" + ", ".join(_lit(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + "".join(_lit(v) + ", " for v in value) + ")"
    return repr(value)


def _args(args: Any) -> str:
    return ", ".join(_lit(a) for a in (args if isinstance(args, (list, tuple)) else [args]))


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    return isinstance(value, (list, tuple)) and any(_has_float(v) for v in value)


def _assert(args: Any, expected: Any, atol: float) -> str:
    call = f"candidate({_args(args)})"
    if atol > 0 or _has_float(expected):
        return f"assert _ep_close({call}, {_lit(expected)}, {atol or 1e-6!r})"
    return f"assert {call} == {_lit(expected)}"
