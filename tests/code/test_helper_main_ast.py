"""AST checks and joint-program assembly of the helper/main task (no code is run here)."""

from __future__ import annotations

import ast

import pytest

from llm_marl_envs.code.ast_checks import (
    call_usage,
    is_thin_wrapper,
    is_trivial,
    returns_value,
    split_top_level,
)
from llm_marl_envs.code.helper_main_reward import RewardConfig, assemble, score_assembly
from llm_marl_envs.data import CodeProblem

PROBLEM = CodeProblem(
    task_id="T/0",
    prompt='from typing import List\n\n\ndef total(xs: List[int]) -> int:\n    """Sum of squares."""\n',
    entry_point="total",
    test="def check(candidate):\n    assert candidate([1, 2]) == 5\n    assert candidate([]) == 0\n",
)
HELPERS = {"helper": "aux"}


def fn(src: str) -> ast.FunctionDef:
    return ast.parse(src).body[0]


def test_returns_value_ignores_nested_functions():
    assert returns_value(fn("def a(x):\n    return x * 2"))
    assert returns_value(fn("def a(x):\n    yield x"))
    assert not returns_value(fn("def a(x):\n    print(x)\n    return"))
    assert not returns_value(fn("def a(x):\n    def b():\n        return 1\n    b()"))


@pytest.mark.parametrize(
    "src, used, ignored",
    [
        ("def m(x):\n    return aux(x) + 1", True, False),
        ("def m(x):\n    aux(x)\n    return x", True, True),
        ("def m(x):\n    y = aux(x)\n    return x", True, True),
        ("def m(x):\n    y = aux(x)\n    return y", True, False),
        ("def m(xs):\n    return list(map(aux, xs))", True, False),
        ("def m(xs):\n    t = 0\n    for x in xs:\n        if t:\n            return t\n        t = aux(x)\n    return 0", True, False),
        ("def m(x):\n    return x  # aux(x) in a comment is not a call", False, False),
        ("def m(x):\n    s = 'aux(x)'\n    return s", False, False),
    ],
)
def test_call_usage(src, used, ignored):
    u = call_usage(fn(src), "aux")
    assert u.used is used
    assert u.result_ignored is ignored


@pytest.mark.parametrize(
    "src, thin",
    [
        ("def m(x):\n    return aux(x)", True),
        ("def m(x):\n    '''doc'''\n    r = aux(x)\n    return r", True),
        ("def m(x, *a, **k):\n    return aux(x, *a, key=1, **k)", True),
        ("def m(x):\n    return aux(x) + 1", False),
        ("def m(x):\n    return sorted(aux(x))", False),
        ("def m(xs):\n    return [aux(x) for x in xs]", False),
        ("def m(x):\n    if x:\n        return aux(x)\n    return 0", False),
        ("def m(x):\n    return x + 1", False),  # no helper call: not a wrapper at all
    ],
)
def test_thin_wrapper(src, thin):
    assert is_thin_wrapper(fn(src), {"aux"}) is thin


def test_trivial_helpers():
    assert is_trivial(fn("def aux(x):\n    return x"))
    assert is_trivial(fn("def aux(x):\n    '''doc'''\n    return None"))
    assert is_trivial(fn("def aux(x):\n    pass"))
    assert not is_trivial(fn("def aux(x):\n    return x * x"))


def test_split_top_level_survives_a_broken_function():
    chunks = split_top_level("import math\n\ndef aux(x):\n    return x\n\ndef total(xs:\n    return 1\n")
    kinds = [(c.kind, c.name) for c in chunks]
    assert ("function", "aux") in kinds and ("broken", None) in kinds and kinds[0] == ("import", None)


def test_assembly_drops_foreign_definitions_and_reports_them():
    helper = "def aux(x):\n    return x * x\n\ndef total(xs):\n    return 0\n\nprint(aux(3))"
    main = "def aux(x):\n    return 0\n\ndef total(xs):\n    return sum(aux(x) for x in xs)"
    asm = assemble(PROBLEM, {"helper": helper}, main, HELPERS)
    assert asm.program.count("def aux(") == 1 and "return x * x" in asm.program
    assert asm.program.count("def total(") == 1 and "sum(aux(x)" in asm.program
    assert "print(aux(3))" not in asm.program
    assert asm.program.startswith("from typing import List")
    assert any("entry point belongs to the main agent" in n for n in asm.notes["helper"])
    assert any("top-level statement dropped" in n for n in asm.notes["helper"])
    assert any("helper's is used" in n for n in asm.notes["main"])
    assert asm.structure_passed and asm.parses


def test_structure_and_syntax_levels_are_gated():
    cfg = RewardConfig()
    no_helper = assemble(PROBLEM, {"helper": "x = 1"}, "def total(xs):\n    return 0", HELPERS)
    s = score_assembly(no_helper, None, cfg)
    assert s.total == pytest.approx(0.6) and s.components["syntax"] == 0.0
    no_return = assemble(PROBLEM, {"helper": "def aux(x):\n    print(x)"}, "def total(xs):\n    return 0", HELPERS)
    assert score_assembly(no_return, None, cfg).total == pytest.approx(0.6)
    assert "no `return <value>`" in no_return.missing["helper"][0]
    broken = assemble(PROBLEM, {"helper": "def aux(x):\n    return x"}, "def total(xs:\n    return 0", HELPERS)
    s = score_assembly(broken, None, cfg)
    assert s.total == pytest.approx(0.4) and not broken.parses and "line" in broken.syntax_error
    ungated = score_assembly(no_helper, None, RewardConfig(gated=False))
    assert ungated.total == pytest.approx(0.6 + 0.5)


def test_masked_agents_become_raising_stubs_without_structure_credit():
    asm = assemble(PROBLEM, {"helper": "def aux(x):\n    return x * x"}, "def total(xs):\n    return 1", HELPERS,
                   masked=frozenset({"helper", "main"}))  # fmt: skip
    assert "raise NotImplementedError" in asm.program and "x * x" not in asm.program
    assert asm.parses and not asm.structure_passed
    assert score_assembly(asm, None, RewardConfig()).total == 0.0


def test_reward_config_validation_and_max():
    assert RewardConfig().max_score == pytest.approx(4.0)
    with pytest.raises(ValueError):
        RewardConfig(helper_result_ignored=0.5)
    with pytest.raises(ValueError):
        RewardConfig(cooperation_min_passed=0)
