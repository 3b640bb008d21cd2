"""Math problems: the problem type, offline seeded generators, and GSM8K / MATH loaders.

:class:`MathProblem` is a question with its gold final answer (a string that
``math-verify`` can parse: an integer, a fraction ``3/4``, a LaTeX expression).

Generators (no download, no dependency; every problem is a pure function of its seed, so
train and test splits use disjoint seed ranges, see :mod:`llm_marl_envs.data.seed_splits`):

- ``"arithmetic"``: one expression over integers and fractions (``(7 - 3) * 5 + 1/2``);
  the gold answer is the exact value (a fraction when not an integer).
- ``"word"``: GSM-style word problems of two to four steps (buying, sharing, rates),
  answer an integer.

Loaders for users who have the files (nothing is downloaded):

- :func:`load_gsm8k`: GSM8K JSONL, ``{"question", "answer"}`` where the answer's last line is
  ``#### <number>``;
- :func:`load_math`: MATH / MATH-500 JSONL, ``{"problem", "solution"}`` (gold = the last
  ``\\boxed{}`` of the solution) or ``{"problem", "answer"}``; ``level`` / ``type`` /
  ``unique_id`` kept when present.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from llm_marl_envs.data.jsonl import iter_jsonl
from llm_marl_envs.math.answers import last_boxed

__all__ = ["GENERATORS", "MathProblem", "generate_problem", "load_gsm8k", "load_math", "load_math_jsonl"]


@dataclass(frozen=True)
class MathProblem:
    """A question, its gold final answer, and where it came from."""

    task_id: str
    question: str
    answer: str
    source: str = ""


def _fraction_text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _arithmetic(rng: np.random.Generator) -> tuple[str, str]:
    """A random expression of 2-4 operations over small integers and one fraction at most."""
    n_ops = int(rng.integers(2, 5))
    value = Fraction(int(rng.integers(1, 20)))
    text = str(value.numerator)
    used_fraction = False
    for i in range(n_ops):
        op = str(rng.choice(["+", "-", "*", "/"]))
        if not used_fraction and rng.random() < 0.3:
            operand = Fraction(int(rng.integers(1, 6)), int(rng.integers(2, 7)))
            shown = f"{operand.numerator}/{operand.denominator}"
            used_fraction = True
            operand_text = f"({shown})"
        else:
            operand = Fraction(int(rng.integers(1, 13)))
            operand_text = str(operand.numerator)
        if op == "+":
            value += operand
        elif op == "-":
            value -= operand
        elif op == "*":
            value *= operand
        else:
            value /= operand
        text = f"({text} {op} {operand_text})" if i < n_ops - 1 else f"{text} {op} {operand_text}"
    return f"Compute {text}. Give the exact value.", _fraction_text(value)


_NAMES = ("Ava", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana", "Ines", "Jomo", "Kai", "Lena")
_ITEMS = ("apples", "stickers", "marbles", "pencils", "cookies", "stamps", "shells", "cards")


def _word(rng: np.random.Generator) -> tuple[str, str]:
    """A GSM-style problem from one of four templates, with random names and numbers."""
    name = str(rng.choice(_NAMES))
    item = str(rng.choice(_ITEMS))
    kind = int(rng.integers(4))
    if kind == 0:
        start, bags, per, given = (int(rng.integers(a, b)) for a, b in ((5, 40), (2, 7), (3, 13), (1, 20)))
        q = (f"{name} has {start} {item}. {name} buys {bags} bags with {per} {item} in each bag, "
             f"then gives {given} {item} to a friend. How many {item} does {name} have now?")
        return q, str(start + bags * per - given)
    if kind == 1:
        friends = int(rng.integers(2, 7))
        each = int(rng.integers(2, 15))
        left = int(rng.integers(0, friends))
        total = friends * each + left
        q = (f"{name} shares {total} {item} equally among {friends} friends and keeps the "
             f"{item} that are left over. How many {item} does each friend get?")
        return q, str(each)
    if kind == 2:
        price, count, paid_extra = int(rng.integers(2, 12)), int(rng.integers(2, 9)), int(rng.integers(1, 30))
        paid = price * count + paid_extra
        q = (f"{item.capitalize()} cost {price} dollars each. {name} buys {count} {item} and pays "
             f"with {paid} dollars. How much change, in dollars, does {name} get?")
        return q, str(paid_extra)
    per_hour, hours, days = int(rng.integers(3, 25)), int(rng.integers(2, 9)), int(rng.integers(2, 6))
    broken = int(rng.integers(1, per_hour))
    q = (f"{name} makes {per_hour} {item} per hour and works {hours} hours a day for {days} days. "
         f"Each day {broken} of the {item} made that day are damaged and thrown away. "
         f"How many {item} are left at the end?")
    return q, str((per_hour * hours - broken) * days)


GENERATORS = {"arithmetic": _arithmetic, "word": _word}


def generate_problem(kind: str, seed: int) -> MathProblem:
    """The problem of generator ``kind`` ("arithmetic", "word", or "mixed") for ``seed``."""
    rng = np.random.default_rng(seed)
    if kind == "mixed":
        kind = ("arithmetic", "word")[int(rng.integers(2))]
    if kind not in GENERATORS:
        raise ValueError(f"unknown generator {kind!r}; known: {sorted(GENERATORS)} or 'mixed'")
    question, answer = GENERATORS[kind](rng)
    return MathProblem(f"{kind}/{seed}", question, answer, source=kind)


def load_gsm8k(path: str | Path) -> list[MathProblem]:
    """GSM8K JSONL (``question``, ``answer`` ending in ``#### <number>``)."""
    problems = []
    for line_no, rec in iter_jsonl(path):
        if "question" not in rec or "answer" not in rec:
            raise ValueError(f"{path}:{line_no}: a GSM8K record needs 'question' and 'answer'")
        text = str(rec["answer"])
        if "####" not in text:
            raise ValueError(f"{path}:{line_no}: GSM8K answer has no '#### <number>' line")
        gold = text.rsplit("####", 1)[1].strip().replace(",", "")
        problems.append(MathProblem(str(rec.get("id", f"gsm8k/{line_no}")), str(rec["question"]), gold, "gsm8k"))
    return problems


def load_math(path: str | Path) -> list[MathProblem]:
    """MATH / MATH-500 JSONL (``problem`` plus ``answer``, or a ``solution`` with a ``\\boxed{}``)."""
    problems = []
    for line_no, rec in iter_jsonl(path):
        if "problem" not in rec:
            raise ValueError(f"{path}:{line_no}: a MATH record needs 'problem'")
        gold = rec.get("answer")
        if gold is None:
            gold = last_boxed(str(rec.get("solution", "")))
        if gold is None or not str(gold).strip():
            raise ValueError(f"{path}:{line_no}: no 'answer' and no \\boxed{{}} in 'solution'")
        task_id = str(rec.get("unique_id", f"math/{line_no}"))
        problems.append(MathProblem(task_id, str(rec["problem"]), str(gold).strip(), "math"))
    return problems


def load_math_jsonl(path: str | Path, format: str = "auto") -> list[MathProblem]:
    """Either format by ``format`` ("gsm8k", "math", or "auto": by the first record's fields)."""
    if format == "auto":
        first = next(iter_jsonl(path), None)
        if first is None:
            raise ValueError(f"{path}: empty file")
        format = "gsm8k" if "question" in first[1] else "math"
    if format == "gsm8k":
        return load_gsm8k(path)
    if format == "math":
        return load_math(path)
    raise ValueError(f"format must be 'gsm8k', 'math' or 'auto', got {format!r}")
