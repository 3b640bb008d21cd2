"""Stdin/stdout programming problems with public and private tests, from a user's local files.

A :class:`StdioProblem` is a competitive-programming problem: a statement, public tests
(the examples an agent may see and run) and private tests (hidden, decide the final
score), each test an :class:`IOCase` (``input`` fed on stdin, expected ``output`` on
stdout), and optionally a reference solution.

Loaders (nothing is downloaded; point them at files you have):

- :func:`load_stdio_sample` -- the small sample shipped with the package
  (``llm_marl_envs/data/samples/stdio_sample.jsonl``, 8 problems with reference solutions),
  in the native format: ``task_id``, ``statement``, ``public_tests`` and ``private_tests``
  (lists of ``{"input", "output"}``), optional ``reference_solution``, ``title``.
- :func:`load_livecodebench` -- LiveCodeBench ``code_generation_lite`` JSONL:
  ``question_id``, ``question_title``, ``question_content``, ``platform``,
  ``starter_code``, ``difficulty``, ``public_test_cases`` (JSON string of a list of
  ``{"input", "output", "testtype"}``) and ``private_test_cases`` (the same JSON, or -- as
  in the released files -- base64 of zlib of a pickled JSON string; only a plain string is
  accepted from the pickle, nothing else is ever unpickled). Problems whose tests are
  ``testtype == "functional"`` (LeetCode, class ``Solution``) are skipped with
  ``skip_functional=True`` (default) or raise.
- :func:`load_apps` -- APPS JSONL: ``problem_id``, ``question``, ``solutions`` (JSON string
  of a list of programs), ``input_output`` (JSON string ``{"inputs": [...], "outputs":
  [...]}``, with ``fn_name`` for call-based problems, which are skipped or raise),
  ``difficulty``, ``starter_code``. APPS has no public/private split: the first
  ``n_public`` tests are public and the private (hidden) tests are *all* tests.
- :func:`load_code_contests` -- DeepMind CodeContests JSONL: ``name``, ``description``,
  ``public_tests`` / ``private_tests`` / ``generated_tests`` (``{"input": [...], "output":
  [...]}``), ``solutions`` (``{"language": [...], "solution": [...]}``, language 3 =
  Python 3), ``difficulty``. Private tests are ``private_tests`` (plus
  ``generated_tests`` with ``include_generated=True``).
- :func:`load_stdio_problems` -- any of these by ``format=`` ("native", "livecodebench",
  "apps", "code_contests", or "auto", which looks at the first record's fields).

Inputs and outputs given as lists of lines are joined with newlines. Malformed records
raise ``ValueError`` naming the file and line.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_marl_envs.data.jsonl import iter_jsonl

__all__ = [
    "IOCase",
    "StdioProblem",
    "SAMPLE_PATH",
    "load_apps",
    "load_code_contests",
    "load_livecodebench",
    "load_stdio_problems",
    "load_stdio_sample",
]

SAMPLE_PATH = Path(__file__).with_name("samples") / "stdio_sample.jsonl"
FORMATS = ("auto", "native", "livecodebench", "apps", "code_contests")


@dataclass(frozen=True)
class IOCase:
    """One stdin/stdout test: feed ``input``, expect ``output``."""

    input: str
    output: str


@dataclass(frozen=True)
class StdioProblem:
    """A stdin/stdout problem (see the module docstring).

    Attributes:
        task_id: unique id.
        statement: the problem text the agents see (includes the examples as written).
        public_tests: tests an agent's program is run on during the search.
        private_tests: hidden tests that decide the final score.
        reference_solution: a complete Python program solving it, or None.
        title: short name, if any.
        source: which loader produced it.
        metadata: anything else the record carried (difficulty, platform...).
    """

    task_id: str
    statement: str
    public_tests: tuple[IOCase, ...]
    private_tests: tuple[IOCase, ...]
    reference_solution: str | None = None
    title: str = ""
    source: str = "native"
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.public_tests and not self.private_tests:
            raise ValueError(f"problem {self.task_id!r} has no tests")


# ---------------------------------------------------------------------------- loaders
def load_stdio_sample() -> list[StdioProblem]:
    """The 8 stdin/stdout problems shipped with the package (with reference solutions)."""
    return load_stdio_problems(SAMPLE_PATH, format="native")


def load_stdio_problems(path: str | Path, format: str = "auto", **kwargs: Any) -> list[StdioProblem]:
    """Load a JSONL file of stdin/stdout problems in one of :data:`FORMATS`."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    if format == "auto":
        format = _detect_format(Path(path))
    loader: Callable[..., list[StdioProblem]] = {
        "native": _load_native,
        "livecodebench": load_livecodebench,
        "apps": load_apps,
        "code_contests": load_code_contests,
    }[format]
    return loader(path, **kwargs)


def load_livecodebench(path: str | Path, skip_functional: bool = True) -> list[StdioProblem]:
    """LiveCodeBench ``code_generation_lite`` records (see the module docstring)."""

    def convert(rec: Mapping[str, Any]) -> StdioProblem | None:
        public = _lcb_cases(rec["public_test_cases"])
        private = _lcb_cases(rec.get("private_test_cases") or "[]")
        kinds = {c.get("testtype", "stdin") for c in public + private}
        if kinds - {"stdin"}:
            if skip_functional:
                return None
            raise ValueError(f"{rec['question_id']}: functional (call-based) tests are not stdin/stdout")
        return StdioProblem(
            task_id=str(rec["question_id"]),
            statement=str(rec["question_content"]),
            public_tests=tuple(IOCase(_text(c["input"]), _text(c["output"])) for c in public),
            private_tests=tuple(IOCase(_text(c["input"]), _text(c["output"])) for c in private),
            title=str(rec.get("question_title", "")),
            source="livecodebench",
            metadata={k: rec[k] for k in ("platform", "contest_id", "contest_date", "difficulty") if k in rec},
        )

    return _load(path, convert)


def load_apps(path: str | Path, n_public: int = 1, skip_call_based: bool = True) -> list[StdioProblem]:
    """APPS records: first ``n_public`` tests public, all tests private (see the module docstring)."""
    if n_public < 1:
        raise ValueError("n_public must be >= 1")

    def convert(rec: Mapping[str, Any]) -> StdioProblem | None:
        io_spec = _maybe_json(rec["input_output"])
        if not isinstance(io_spec, Mapping):
            raise ValueError("input_output must be a JSON object with inputs and outputs")
        if io_spec.get("fn_name"):
            if skip_call_based:
                return None
            raise ValueError(f"problem {rec['problem_id']}: call-based (fn_name) problems are not stdin/stdout")
        cases = _pairs(io_spec["inputs"], io_spec["outputs"])
        solutions = _maybe_json(rec.get("solutions") or "[]")
        return StdioProblem(
            task_id=f"apps/{rec['problem_id']}",
            statement=str(rec["question"]),
            public_tests=tuple(cases[:n_public]),
            private_tests=tuple(cases),
            reference_solution=solutions[0] if solutions else None,
            source="apps",
            metadata={k: rec[k] for k in ("difficulty", "url") if k in rec},
        )

    return _load(path, convert)


def load_code_contests(path: str | Path, include_generated: bool = False) -> list[StdioProblem]:
    """DeepMind CodeContests records (see the module docstring)."""

    def convert(rec: Mapping[str, Any]) -> StdioProblem | None:
        public = _pairs(rec["public_tests"]["input"], rec["public_tests"]["output"])
        private = _pairs(rec["private_tests"]["input"], rec["private_tests"]["output"])
        if include_generated and rec.get("generated_tests"):
            private += _pairs(rec["generated_tests"]["input"], rec["generated_tests"]["output"])
        sols = rec.get("solutions") or {}
        py3 = [s for lang, s in zip(sols.get("language", []), sols.get("solution", [])) if lang == 3]
        return StdioProblem(
            task_id=str(rec["name"]),
            statement=str(rec["description"]),
            public_tests=tuple(public),
            private_tests=tuple(private),
            reference_solution=py3[0] if py3 else None,
            title=str(rec["name"]),
            source="code_contests",
            metadata={k: rec[k] for k in ("difficulty", "source", "cf_contest_id") if k in rec},
        )

    return _load(path, convert)


# ---------------------------------------------------------------------------- internals
def _load_native(path: str | Path) -> list[StdioProblem]:
    def convert(rec: Mapping[str, Any]) -> StdioProblem:
        return StdioProblem(
            task_id=str(rec["task_id"]),
            statement=str(rec["statement"]),
            public_tests=tuple(IOCase(_text(c["input"]), _text(c["output"])) for c in rec["public_tests"]),
            private_tests=tuple(IOCase(_text(c["input"]), _text(c["output"])) for c in rec["private_tests"]),
            reference_solution=rec.get("reference_solution"),
            title=str(rec.get("title", "")),
            source=str(rec.get("source", "native")),
            metadata=dict(rec.get("metadata", {})),
        )

    return _load(path, convert)


def _load(path: str | Path, convert: Callable[[Mapping[str, Any]], StdioProblem | None]) -> list[StdioProblem]:
    path = Path(path)
    out: list[StdioProblem] = []
    for lineno, rec in iter_jsonl(path):
        try:
            problem = convert(rec)
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise ValueError(f"{path}:{lineno}: {detail}") from None
        if problem is not None:
            out.append(problem)
    if not out:
        raise ValueError(f"{path}: no usable stdin/stdout problems")
    return out


def _detect_format(path: Path) -> str:
    for _, rec in iter_jsonl(path):
        if "question_content" in rec and "public_test_cases" in rec:
            return "livecodebench"
        if "input_output" in rec and "question" in rec:
            return "apps"
        if "description" in rec and "public_tests" in rec and "name" in rec:
            return "code_contests"
        if "statement" in rec and "public_tests" in rec:
            return "native"
        raise ValueError(f"{path}: cannot tell the format from the fields {sorted(rec)}")
    raise ValueError(f"{path}: empty file")


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "\n".join(str(v) for v in value)
    raise TypeError(f"test input/output must be text or a list of lines, got {type(value).__name__}")


def _pairs(inputs: Sequence[Any], outputs: Sequence[Any]) -> list[IOCase]:
    if len(inputs) != len(outputs):
        raise ValueError(f"{len(inputs)} test inputs but {len(outputs)} outputs")
    return [IOCase(_text(i), _text(o)) for i, o in zip(inputs, outputs)]


def _maybe_json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


class _StringsOnlyUnpickler(pickle.Unpickler):
    """Unpickles plain data only: any class or function reference is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a dataset file")


def _lcb_cases(value: Any) -> list[dict]:
    if isinstance(value, list):
        return value
    if not isinstance(value, str):
        raise TypeError("LiveCodeBench test cases must be a JSON string or a list")
    try:
        cases = json.loads(value)
    except json.JSONDecodeError:
        try:
            raw = zlib.decompress(base64.b64decode(value.encode("utf-8")))
            payload = _StringsOnlyUnpickler(io.BytesIO(raw)).load()
        except (ValueError, zlib.error, pickle.UnpicklingError, EOFError) as exc:
            raise ValueError(f"private_test_cases is neither JSON nor base64/zlib/pickle JSON ({exc})") from None
        if not isinstance(payload, (str, bytes)):
            raise ValueError("compressed test cases must hold a JSON string") from None
        cases = json.loads(payload)
    if not isinstance(cases, list) or not all(isinstance(c, Mapping) for c in cases):
        raise ValueError("test cases must be a list of {input, output} objects")
    return cases
