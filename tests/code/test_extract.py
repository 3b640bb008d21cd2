"""Code extraction from messy LLM answers (llm_marl_envs.code.extract)."""

from __future__ import annotations

import ast

from hypothesis import given, settings
from hypothesis import strategies as st

from llm_marl_envs.code.extract import extract_code, parses

FN = "def f(x):\n    return x + 1"


def test_single_fenced_block_with_prose_around():
    out = extract_code(f"Here you go:\n```python\n{FN}\n```\nThis adds one.")
    assert out.code == FN
    assert out.fenced and out.notes == ()


def test_unfenced_code_with_prose_before_and_after():
    out = extract_code(f"Sure! Here is the function.\n{FN}\n\nIt returns x plus one.")
    assert out.code == FN
    assert not out.fenced
    assert "no code block found, used raw text" in out.notes
    assert "prose before the code dropped" in out.notes
    assert "text after the code dropped" in out.notes


def test_plain_code_without_fence_is_used_as_is():
    out = extract_code(FN + "\n")
    assert out.code == FN
    assert out.notes == ("no code block found, used raw text",)


def test_several_python_blocks_are_joined_and_other_languages_dropped():
    text = f"```python\n{FN}\n```\nRun it:\n```bash\npython f.py\n```\n```py\ndef g():\n    return 2\n```"
    out = extract_code(text)
    assert out.code == FN + "\n\ndef g():\n    return 2"
    assert any("joined" in n for n in out.notes)
    assert any("another language" in n for n in out.notes)


def test_python_tagged_blocks_win_over_untagged_output_blocks():
    out = extract_code(f"```python\n{FN}\n```\nOutput:\n```\n>>> f(1)\n2\n```")
    assert out.code == FN
    assert any("untagged" in n for n in out.notes)


def test_blocks_that_do_not_parse_are_dropped_when_others_parse():
    out = extract_code(f"```\n{FN}\n```\n```\nf(1) -> 2 !!\n```")
    assert out.code == FN
    assert any("do not parse" in n for n in out.notes)


def test_unterminated_block_runs_to_the_end():
    out = extract_code(f"```python\n{FN}\n")
    assert out.code == FN
    assert any("unterminated" in n for n in out.notes)


def test_think_blocks_are_removed():
    out = extract_code(f"<think>maybe def g(): pass</think>\n```python\n{FN}\n```")
    assert out.code == FN
    assert "<think> block(s) removed" in out.notes


def test_indented_block_is_dedented():
    out = extract_code("```python\n    def f(x):\n        return x\n```")
    assert out.code == "def f(x):\n    return x"


def test_empty_and_prose_only_answers():
    assert extract_code("").empty and extract_code("").notes == ("empty answer",)
    assert extract_code("   \n ").empty
    out = extract_code("I do not know how to solve this problem.")
    assert not parses(out.code)  # kept as text so the syntax error is reported, not hidden


def test_broken_code_is_kept_so_the_error_can_be_reported():
    out = extract_code("```python\ndef f(x:\n    return x\n```")
    assert out.code == "def f(x:\n    return x"
    assert not parses(out.code)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_never_raises_and_returns_text(text):
    out = extract_code(text)
    assert isinstance(out.code, str)
    assert all(isinstance(n, str) for n in out.notes)


@settings(max_examples=30, deadline=None)
@given(prefix=st.text(alphabet="abcdefgh ,.!", max_size=40), suffix=st.text(alphabet="abcdefgh ,.!", max_size=40))
def test_fenced_code_survives_any_prose(prefix, suffix):
    out = extract_code(f"{prefix}\n```python\n{FN}\n```\n{suffix}")
    assert ast.dump(ast.parse(out.code)) == ast.dump(ast.parse(FN))
