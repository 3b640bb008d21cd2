"""HumanEval loader, JSONL loaders (CoopHumanEval / MBPP shape) and deterministic splits."""

from __future__ import annotations

import ast
import json

import pytest

from llm_marl_envs.data import (
    CodeProblem,
    load_code_jsonl,
    load_code_problems,
    load_humaneval,
    split_problems,
)


@pytest.fixture(scope="module")
def humaneval():
    return load_humaneval()


def test_humaneval_has_164_problems_in_order(humaneval):
    assert len(humaneval) == 164
    assert [p.task_id for p in humaneval] == [f"HumanEval/{i}" for i in range(164)]
    for p in humaneval:
        assert "def check(candidate)" in p.test
        assert p.entry_function() is not None
        assert p.reference_program == p.prompt + p.canonical_solution
        ast.parse(p.reference_program)
        ast.parse(p.prelude() or "pass")
        assert p.entry_point not in {n.name for n in ast.parse(p.prelude() or "pass").body if hasattr(n, "name")}


def test_prelude_keeps_given_helpers_and_imports(humaneval):
    p = humaneval[32]  # find_zero is given poly()
    assert "def poly(" in p.prelude() and "import math" in p.prelude()
    assert p.entry_signature() == "def find_zero(xs: list):"
    assert humaneval[0].entry_signature() == "def has_close_elements(numbers: List[float], threshold: float) -> bool:"


def test_split_is_deterministic_disjoint_and_complete(humaneval):
    train, evals = split_problems(humaneval, 0.25, seed=7)
    again = split_problems(humaneval, 0.25, seed=7)
    assert (train, evals) == again
    assert len(evals) == 41 and len(train) == 123
    assert not {p.task_id for p in train} & {p.task_id for p in evals}
    other = split_problems(humaneval, 0.25, seed=8)[1]
    assert {p.task_id for p in other} != {p.task_id for p in evals}
    with pytest.raises(ValueError):
        split_problems(humaneval, 1.5)


def test_coop_humaneval_jsonl(tmp_path, humaneval):
    path = tmp_path / "coop.jsonl"
    recs = [{k: getattr(p, k) for k in ("task_id", "prompt", "test", "entry_point")} for p in humaneval[:3]]
    recs[0]["task_id"] = "CoopHumanEval/0"
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n\n")
    problems = load_code_jsonl(path)
    assert [p.task_id for p in problems] == ["CoopHumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert problems[0].canonical_solution is None and problems[0].reference_program is None
    assert load_code_problems(path) == problems


MBPP = {
    "task_id": 3,
    "text": "Write a python function to identify non-prime numbers.",
    "code": "import math\r\ndef is_not_prime(n):\r\n    result = False\r\n    for i in range(2,int(math.sqrt(n)) + 1):\r\n"
    "        if n % i == 0:\r\n            result = True\r\n    return result",
    "test_list": ["assert is_not_prime(2) == False", "assert is_not_prime(10) == True", "assert is_not_prime(35) == True"],
    "test_setup_code": "",
}


def test_mbpp_jsonl_becomes_humaneval_shape(tmp_path):
    path = tmp_path / "mbpp.jsonl"
    path.write_text(json.dumps(MBPP) + "\n")
    (p,) = load_code_jsonl(path)
    assert isinstance(p, CodeProblem)
    assert p.task_id == "MBPP/3" and p.entry_point == "is_not_prime"
    assert p.prompt.startswith("import math")
    assert "identify non-prime numbers" in p.prompt and ">>> assert is_not_prime(2) == False" in p.prompt
    assert "is_not_prime(10)" not in p.prompt  # only the first example is shown
    assert p.test.count("assert candidate(") == 3
    assert p.entry_function() is not None
    assert p.reference_program.startswith("import math")


def test_malformed_jsonl_names_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(MBPP) + "\n{not json\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        load_code_jsonl(path)
    path.write_text(json.dumps({"task_id": 1, "question": "?"}) + "\n")
    with pytest.raises(ValueError, match="expected"):
        load_code_jsonl(path)
    with pytest.raises(FileNotFoundError):
        load_code_jsonl(tmp_path / "missing.jsonl")
