"""Make a check's asserts report input / expected / got when they fail (for "full" feedback).

``tests_from_check`` turns ``def check(candidate)`` into one assert test each; a failing
``assert candidate([1, 2]) == 3`` only says ``AssertionError``. :func:`instrument_tests`
rewrites every test whose last statement is a message-less ``assert <left> <op> <right>``
(one comparison) into the equivalent::

    _hm_got = <left>
    assert _hm_got <op> <right>, _hm_io("<left source>", "<right source>", _hm_got)

``<left>`` is evaluated exactly once, before ``<right>``, as in the original, so pass/fail
is unchanged. The message is ``IO_MESSAGE_PREFIX + json`` with ``input`` (the call, with
the check's ``candidate`` shown as the entry point's name), ``expected`` (the right-hand
side, prefixed by the operator when it is not ``==``) and ``got`` (``repr`` of the value,
cut to 300 characters), which :mod:`llm_marl_envs.code.feedback` renders as a wrong
answer with those three fields. Other tests (loops of asserts, ``assert not f(x)``...) are
left as they are. Nothing is executed here.
"""

from __future__ import annotations

import ast
import json

from llm_marl_envs.code.feedback import IO_MESSAGE_PREFIX

__all__ = ["IO_SETUP", "instrument_tests"]

#: appended to the setup: builds the failure message (never raises)
IO_SETUP = f'''

def _hm_io(call, expected, got):
    import json as _hm_json
    try:
        shown = repr(got)
    except Exception as exc:  # a hostile __repr__ must not hide the failure
        shown = "<unprintable " + type(exc).__name__ + ">"
    if len(shown) > 300:
        shown = shown[:300] + "..."
    return {IO_MESSAGE_PREFIX!r} + _hm_json.dumps({{"input": call, "expected": expected, "got": shown}})
'''

_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
        ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}  # fmt: skip


class _Show(ast.NodeTransformer):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return ast.Name(id=self.new, ctx=node.ctx) if node.id == self.old else node


def _instrument(code: str, entry_point: str, param: str) -> str | None:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    if not tree.body:
        return None
    last = tree.body[-1]
    if not (isinstance(last, ast.Assert) and last.msg is None and isinstance(last.test, ast.Compare)):
        return None
    cmp = last.test
    if len(cmp.ops) != 1 or type(cmp.ops[0]) not in _OPS:
        return None
    left_src = ast.unparse(cmp.left)
    right_src = ast.unparse(cmp.comparators[0])
    shown_call = ast.unparse(_Show(param, entry_point).visit(ast.parse(left_src, mode="eval")))
    op = _OPS[type(cmp.ops[0])]
    expected = right_src if op == "==" else f"{op} {right_src}"
    head = "\n".join(ast.unparse(s) for s in tree.body[:-1])
    new = (
        f"_hm_got = {left_src}\n"
        f"assert _hm_got {op} {right_src}, _hm_io({json.dumps(shown_call)}, {json.dumps(expected)}, _hm_got)"
    )
    return f"{head}\n{new}" if head else new


def instrument_tests(setup: str, tests: list, entry_point: str, param: str = "candidate") -> tuple[str, list]:
    """``(setup, tests)`` with the failure-reporting rewrite applied (see the module doc)."""
    from llm_marl_envs.sandbox import AssertTest

    out = []
    for t in tests:
        new = _instrument(t.code, entry_point, param) if isinstance(t, AssertTest) else None
        out.append(AssertTest(new, name=t.name) if new is not None else t)
    return setup + IO_SETUP, out
