"""MBPP records (original and sanitized releases) as HumanEval-shaped :class:`CodeProblem` records.

See :mod:`llm_marl_envs.data.code_jsonl` for the record layout and the conversion;
:func:`mbpp_record_to_problem` is also used by :mod:`llm_marl_envs.data.evalplus` for MBPP+.
"""

from __future__ import annotations

import ast
import textwrap
from typing import Any

from llm_marl_envs.data.problems import CodeProblem

__all__ = ["MBPP_KEYS", "MBPP_SANITIZED_KEYS", "mbpp_record_to_problem"]

MBPP_KEYS = ("task_id", "text", "code", "test_list")
MBPP_SANITIZED_KEYS = ("task_id", "prompt", "code", "test_list")


def mbpp_record_to_problem(rec: dict[str, Any], examples_in_prompt: int = 1, challenge_tests: bool = True) -> CodeProblem:
    """Convert one MBPP record to a HumanEval-shaped :class:`CodeProblem` (see module doc)."""
    if "text" not in rec and "prompt" in rec:  # the sanitized release names the task text "prompt"
        rec = {**rec, "text": rec["prompt"]}
    missing = [k for k in MBPP_KEYS if k not in rec]
    if missing:
        raise KeyError(f"missing keys {missing}")
    task_id = f"MBPP/{rec['task_id']}"
    code = str(rec["code"]).replace("\r\n", "\n")
    tests = [str(t) for t in rec["test_list"]]
    if not tests:
        raise ValueError(f"{task_id}: empty test_list")
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise ValueError(f"{task_id}: reference code does not parse ({exc.msg})") from None
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    called = _called_names(tests[0])
    entry = next((name for name in called if name in functions), None)
    if entry is None:
        raise ValueError(f"{task_id}: the first test calls none of the reference functions {sorted(functions)}")
    fn = functions[entry]
    imports = [ast.get_source_segment(code, n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    ret = f" -> {ast.unparse(fn.returns)}" if fn.returns is not None else ""
    doc_lines = textwrap.wrap(str(rec["text"]).strip(), 88) or [entry]
    shown = tests[: max(examples_in_prompt, 0)]
    if shown:
        doc_lines += ["", "Examples:"] + [f">>> {t.strip()}" for t in shown]
    doc = "\n".join(f"    {ln}" if ln else "" for ln in doc_lines).replace('"""', "'''")
    prompt = ""
    if imports:
        prompt += "\n".join(s for s in imports if s) + "\n\n\n"
    prompt += f'def {entry}({ast.unparse(fn.args)}){ret}:\n    """\n{doc}\n    """\n'
    setup = "\n".join([*(str(i) for i in rec.get("test_imports") or []), str(rec.get("test_setup_code") or "")]).strip()
    challenge = [str(t) for t in rec.get("challenge_test_list") or []] if challenge_tests else []
    asserts = "\n".join(f"    {_rename_calls(t.strip(), entry)}" for t in (*tests, *challenge) if t.strip())
    test = (setup + "\n\n\n" if setup else "") + f"def check(candidate):\n{asserts}\n"
    return CodeProblem(
        task_id=task_id,
        prompt=prompt,
        entry_point=entry,
        test=test,
        canonical_solution=None,
        reference_program=code,
        source="mbpp_jsonl",
        metadata={"text": rec["text"], "test_list": tests, "challenge_test_list": rec.get("challenge_test_list") or [],
                  "n_challenge_tests": len(challenge)},  # fmt: skip
    )


def _called_names(src: str) -> list[str]:
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return []
    return [n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]


class _Rename(ast.NodeTransformer):
    def __init__(self, old: str) -> None:
        self.old = old

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id == self.old:
            return ast.copy_location(ast.Name(id="candidate", ctx=node.ctx), node)
        return node


def _rename_calls(assert_src: str, entry: str) -> str:
    """``assert f(1) == 2`` -> ``assert candidate(1) == 2`` (text kept if it does not parse)."""
    try:
        tree = ast.parse(assert_src)
    except SyntaxError:
        return assert_src
    return ast.unparse(_Rename(entry).visit(tree))
