"""Call-based (functional) problems as function-style :class:`CodeProblem` records.

LiveCodeBench's LeetCode problems (``testtype == "functional"``, ``metadata.func_name``, a
``class Solution`` starter) and APPS / TACO call-based problems (``fn_name``) test a
function by calling it with arguments and comparing the returned value, not through
stdin/stdout. :func:`call_problem` turns one into a HumanEval-shaped problem that every
code task runs with the sandbox's ordinary assert tests:

- ``prompt``: :data:`CALL_PRELUDE` (the imports LeetCode solutions assume, as
  LiveCodeBench's harness adds) and the starter code, whose entry point gets a docstring
  holding the statement and the public cases as doctest examples
  (``>>> maxSum([1, 2], 3)`` / ``18``), which are the public tests;
- ``test``: a ``check(candidate)`` with one ``assert candidate(args) == expected`` per case
  (public and private), and, in front, a wrapper bound as the candidate: it calls
  ``Solution().<method>`` (a fresh instance per call) or the top-level function, and turns
  a returned tuple into a list (as LiveCodeBench and APPS do before comparing), so the
  comparison is the exact value comparison ``==`` of the check's asserts;
- APPS wraps most expected values in a one-element list; such a case accepts either the
  list or its element (``assert candidate(args) in (v, [v])``), as the APPS harness does.

The code tasks split the public cases (visible) from the private ones (hidden) with
:mod:`llm_marl_envs.data.test_split`. Arguments and expected values are JSON values,
written as Python literals.
"""

from __future__ import annotations

import ast
import json
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_marl_envs.data.problems import CodeProblem

_PLACEHOLDER = "__statement_placeholder__"

__all__ = ["CALL_PRELUDE", "CallCase", "apps_call_cases", "call_problem", "lcb_call_cases"]

#: imports in front of every call-based program (LeetCode code assumes ``List``, ``deque``...)
CALL_PRELUDE = (
    "from typing import *\nfrom collections import *\nfrom functools import *\nfrom itertools import *\n"
    "from heapq import *\nfrom bisect import *\nimport math\nimport string\nimport re\n"
)


@dataclass(frozen=True)
class CallCase:
    """Call the entry point with ``args``; expect ``expected`` (or ``[expected]`` if ``wrapped_ok``)."""

    args: tuple[Any, ...]
    expected: Any
    wrapped_ok: bool = False

    def call(self, name: str) -> str:
        """``name(arg, ...)`` with the arguments as Python literals."""
        return f"{name}({', '.join(_literal(a) for a in self.args)})"


def lcb_call_cases(cases: Sequence[Mapping[str, Any]]) -> list[CallCase]:
    """LiveCodeBench functional cases: ``input`` = one JSON value per line (one per argument),
    ``output`` = the JSON of the expected value."""
    out = []
    for c in cases:
        lines = [line for line in str(c["input"]).split("\n") if line.strip()]
        try:
            args = tuple(json.loads(line) for line in lines)
            expected = json.loads(str(c["output"]))
        except json.JSONDecodeError as exc:
            raise ValueError(f"functional test case is not JSON ({exc})") from None
        out.append(CallCase(args, expected))
    return out


def apps_call_cases(inputs: Sequence[Any], outputs: Sequence[Any]) -> list[CallCase]:
    """APPS / TACO call-based cases: ``inputs[i]`` is the argument list, ``outputs[i]`` the
    expected value, usually wrapped in a one-element list (either form is accepted)."""
    if len(inputs) != len(outputs):
        raise ValueError(f"{len(inputs)} test inputs but {len(outputs)} outputs")
    out = []
    for args, expected in zip(inputs, outputs):
        args = tuple(args) if isinstance(args, list) else (args,)
        if isinstance(expected, list) and len(expected) == 1:
            out.append(CallCase(args, expected[0], wrapped_ok=True))
        else:
            out.append(CallCase(args, expected))
    return out


def call_problem(
    task_id: str,
    statement: str,
    func_name: str,
    public: Sequence[CallCase],
    private: Sequence[CallCase],
    starter_code: str = "",
    reference: str | None = None,
    source: str = "call_based",
    metadata: Mapping[str, Any] | None = None,
) -> CodeProblem:
    """The :class:`CodeProblem` of a call-based problem (see the module docstring)."""
    if not func_name.isidentifier():
        raise ValueError(f"{task_id}: func_name {func_name!r} is not a Python identifier")
    if not public and not private:
        raise ValueError(f"{task_id}: no test cases")
    stub, method_of = _stub(starter_code, func_name, statement, public)
    prompt = f"{CALL_PRELUDE}\n\n{stub}\n"
    if method_of:
        head, call = "", f"{method_of}().{func_name}"
    else:  # keep the program's own function before the wrapper takes its name
        head, call = f"_call_target = globals().get({func_name!r})\n\n\n", "_call_target"
    wrapper = (
        f"{head}def {func_name}(*args):\n"
        + ("" if method_of else
           f"    if _call_target is None:\n        raise NameError('the program defines no function {func_name}')\n")
        + f"    result = {call}(*args)\n"
        "    return list(result) if isinstance(result, tuple) else result\n"
    )  # fmt: skip
    asserts = "\n".join(f"    {_assert(c)}" for c in (*public, *private))
    return CodeProblem(
        task_id=task_id,
        prompt=prompt,
        entry_point=func_name,
        test=f"{wrapper}\n\ndef check(candidate):\n{asserts}\n",
        canonical_solution=None,
        reference_program=reference or None,
        source=source,
        metadata={
            "call_based": True,
            "n_public": len(public),
            "n_private": len(private),
            **dict(metadata or {}),
        },
    )


# ---------------------------------------------------------------------------- internals
def _literal(value: Any) -> str:
    return repr(tuple(value) if isinstance(value, tuple) else value)


def _assert(case: CallCase) -> str:
    call = case.call("candidate")
    if case.wrapped_ok:
        return f"assert {call} in ({_literal(case.expected)}, {_literal([case.expected])})"
    return f"assert {call} == {_literal(case.expected)}"


def _stub(starter: str, func_name: str, statement: str, public: Sequence[CallCase]) -> tuple[str, str | None]:
    """(the starter code with a docstring, the class holding the entry point or None)."""
    examples = "".join(f"\n>>> {c.call(func_name)}\n{_literal(c.expected)}" for c in public)
    doc = statement.strip().replace("\\", "\\\\").replace('"""', "'''")
    if examples:
        doc += "\n\nExamples:" + examples
    tree = _parse_starter(starter)
    found = _find(tree, func_name) if tree is not None else None
    if found is None:
        tree = ast.parse(f"def {func_name}(*args):\n    pass\n")
        found = (None, tree.body[0])
    owner, fn = found
    fn.body = [ast.Expr(ast.Constant(_PLACEHOLDER))]
    body_indent = " " * (fn.col_offset + 4)
    block = '"""\n' + textwrap.indent(doc, body_indent) + "\n" + body_indent + '"""'
    return ast.unparse(tree).replace(f'"""{_PLACEHOLDER}"""', block, 1), owner


def _parse_starter(starter: str) -> ast.Module | None:
    """The starter code (a signature with no body, as LeetCode's) parsed, or None."""
    lines = starter.replace("\t", "    ").rstrip().split("\n")
    if not lines[-1].strip():
        return None
    indent = len(lines[-1]) - len(lines[-1].lstrip())
    try:
        return ast.parse("\n".join(lines) + "\n" + " " * (indent + 4) + "pass\n")
    except SyntaxError:
        try:
            return ast.parse("\n".join(lines) + "\n")
        except SyntaxError:
            return None


def _find(tree: ast.Module, name: str) -> tuple[str | None, ast.FunctionDef] | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return None, node
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return node.name, item
    return None
