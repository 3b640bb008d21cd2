"""Scripted answers for the helper/main task: the oracle split, a main-only team, junk.

:func:`oracle_answers` turns a problem's reference solution into a genuine helper/main
split that reaches the maximum reward:

- helper 0 writes ``aux(<the entry point's parameters>)`` whose body is the reference
  solution (so the helper does the real computation and returns it);
- any further helper ``k`` writes ``aux_k(value)``, a result normalizer that returns a
  fresh copy of list results (non-trivial, pure);
- main writes the entry point: it calls the helper(s), uses their return values, and
  post-processes the result itself (returns a fresh list for list results), so by the AST
  definition it is not a thin wrapper (it has its own control flow and calls).

This split exists to check that the reward's ceiling is reachable on every problem; it is
not meant as a model of a *good* decomposition. :func:`main_only_answers` is a team where
main solves the problem alone (the helper's ``aux`` is never called) -- it scores in
between the empty team and the oracle.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Mapping

from llm_marl_envs.data.humaneval import CodeProblem

__all__ = ["main_only_answers", "oracle_answers", "reference_body"]


def _entry_node(problem: CodeProblem) -> ast.FunctionDef | ast.AsyncFunctionDef:
    if not problem.reference_program:
        raise ValueError(
            f"{problem.task_id} has no reference solution, so the oracle policy is not available"
        )
    tree = ast.parse(problem.reference_program)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == problem.entry_point:
            return node
    raise ValueError(f"{problem.task_id}: reference program does not define {problem.entry_point!r}")


def reference_body(problem: CodeProblem) -> tuple[str, str, list[str]]:
    """``(params, body, call_args)`` of the reference entry point: its parameter list source,
    its body (docstring dropped, indented 4 spaces) and the arguments to forward a call."""
    fn = _entry_node(problem)
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(
        body[0].value.value, str
    ):
        body = body[1:]
    src = "\n".join(ast.unparse(s) for s in body) or "return None"
    a = fn.args
    call = [x.arg for x in a.posonlyargs + a.args]
    if a.vararg:
        call.append(f"*{a.vararg.arg}")
    call += [f"{x.arg}={x.arg}" for x in a.kwonlyargs]
    if a.kwarg:
        call.append(f"**{a.kwarg.arg}")
    return ast.unparse(a), textwrap.indent(src, "    "), call


def oracle_answers(problem: CodeProblem, helper_functions: Mapping[str, str], main_agent: str = "main") -> dict[str, str]:
    """Answers (markdown-fenced, as an LLM would write them) of the oracle split (module doc)."""
    params, body, call = reference_body(problem)
    names = list(helper_functions.values())
    answers: dict[str, str] = {}
    for k, (agent, name) in enumerate(helper_functions.items()):
        if k == 0:
            code = f"def {name}({params}):\n{body}"
        else:
            code = (
                f"def {name}(value):\n"
                "    if isinstance(value, list):\n"
                "        return list(value)\n"
                "    return value"
            )
        answers[agent] = f"```python\n{code}\n```"
    lines = [f"def {problem.entry_point}({params}):", f"    result = {names[0]}({', '.join(call)})"]
    lines += [f"    result = {n}(result)" for n in names[1:]]
    lines += ["    if isinstance(result, list):", "        return list(result)", "    return result"]
    answers[main_agent] = "```python\n" + "\n".join(lines) + "\n```"
    return answers


def main_only_answers(
    problem: CodeProblem, helper_functions: Mapping[str, str], main_agent: str = "main"
) -> dict[str, str]:
    """The helpers write their oracle functions but main solves alone and never calls them."""
    answers = oracle_answers(problem, helper_functions, main_agent)
    params, body, _ = reference_body(problem)
    answers[main_agent] = f"```python\ndef {problem.entry_point}({params}):\n{body}\n```"
    return answers
