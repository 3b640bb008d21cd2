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
  ``starter_code``, ``difficulty``, ``metadata`` (JSON string, ``func_name`` for
  LeetCode problems), ``public_test_cases`` (JSON string of a list of ``{"input",
  "output", "testtype"}``) and ``private_test_cases`` (the same JSON, or -- as in the
  released files -- base64 of zlib of a pickled JSON string; only a plain string is
  accepted from the pickle, nothing else is ever unpickled). Problems whose tests are
  ``testtype == "functional"`` (LeetCode, class ``Solution``) are converted to call-based
  :class:`~llm_marl_envs.data.problems.CodeProblem` records (:mod:`.call_based`) with
  ``functional="convert"`` (default), or skipped (``"skip"``), or raise (``"raise"``).
- :func:`load_apps` -- APPS JSONL: ``problem_id``, ``question``, ``solutions`` (JSON string
  of a list of programs), ``input_output`` (JSON string ``{"inputs": [...], "outputs":
  [...]}``, with ``fn_name`` for call-based problems, converted like LiveCodeBench's
  functional ones), ``difficulty``, ``starter_code``. APPS has no public/private split:
  the first ``n_public`` tests are public and the others private.
- :func:`load_taco` -- TACO JSONL: APPS' fields (``question``, ``solutions``,
  ``input_output``, ``starter_code``...) plus ``name``, ``source``, ``tags``,
  ``skill_types``..., without ``problem_id``; ids are ``taco/<record index>``.
- :func:`load_code_contests` -- DeepMind CodeContests JSONL: ``name``, ``description``,
  ``public_tests`` / ``private_tests`` / ``generated_tests`` (``{"input": [...], "output":
  [...]}``), ``solutions`` (``{"language": [...], "solution": [...]}``, language 3 =
  Python 3), ``difficulty``. Private tests are ``private_tests`` (plus
  ``generated_tests`` with ``include_generated=True``).
- :func:`load_stdio_problems` -- any of these by ``format=`` ("native", "livecodebench",
  "apps", "taco", "code_contests", or "auto", which looks at the first record's fields).

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

from llm_marl_envs.data.call_based import apps_call_cases, call_problem, lcb_call_cases
from llm_marl_envs.data.jsonl import iter_jsonl
from llm_marl_envs.data.problems import CodeProblem

__all__ = [
    "IOCase",
    "StdioProblem",
    "SAMPLE_PATH",
    "load_apps",
    "load_code_contests",
    "load_livecodebench",
    "load_taco",
    "load_stdio_problems",
    "load_stdio_sample",
]

SAMPLE_PATH = Path(__file__).with_name("samples") / "stdio_sample.jsonl"
FORMATS = ("auto", "native", "livecodebench", "apps", "taco", "code_contests")
FUNCTIONAL = ("convert", "skip", "raise")


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


def load_stdio_problems(path: str | Path, format: str = "auto", **kwargs: Any) -> list[StdioProblem | CodeProblem]:
    """Load a JSONL file of competitive-programming problems in one of :data:`FORMATS`
    (call-based problems come back as :class:`CodeProblem`, see :mod:`.call_based`)."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    if format == "auto":
        format = _detect_format(Path(path))
    loader: Callable[..., list[Any]] = {
        "native": _load_native,
        "livecodebench": load_livecodebench,
        "apps": load_apps,
        "taco": load_taco,
        "code_contests": load_code_contests,
    }[format]
    return loader(path, **kwargs)


def load_livecodebench(path: str | Path, functional: str = "convert") -> list[StdioProblem | CodeProblem]:
    """LiveCodeBench ``code_generation_lite`` records (see the module docstring)."""
    _check_functional(functional)

    def convert(rec: Mapping[str, Any]) -> StdioProblem | CodeProblem | None:
        public = _lcb_cases(rec["public_test_cases"])
        private = _lcb_cases(rec.get("private_test_cases") or "[]")
        kinds = {c.get("testtype", "stdin") for c in public + private}
        meta = {k: rec[k] for k in ("platform", "contest_id", "contest_date", "difficulty") if k in rec}
        if kinds - {"stdin"}:
            if functional == "skip":
                return None
            if functional == "raise":
                raise ValueError(f"{rec['question_id']}: functional (call-based) tests are not stdin/stdout")
            func_name = _maybe_json(rec.get("metadata") or "{}").get("func_name")
            if not func_name:
                raise ValueError(f"{rec['question_id']}: functional tests but no metadata.func_name")
            return call_problem(
                str(rec["question_id"]), str(rec["question_content"]), str(func_name), lcb_call_cases(public),
                lcb_call_cases(private), starter_code=str(rec.get("starter_code") or ""), source="livecodebench",
                metadata={"title": str(rec.get("question_title", "")), **meta},
            )  # fmt: skip
        return StdioProblem(
            task_id=str(rec["question_id"]),
            statement=str(rec["question_content"]),
            public_tests=tuple(IOCase(_text(c["input"]), _text(c["output"])) for c in public),
            private_tests=tuple(IOCase(_text(c["input"]), _text(c["output"])) for c in private),
            title=str(rec.get("question_title", "")),
            source="livecodebench",
            metadata=meta,
        )

    return _load(path, convert)


def load_apps(path: str | Path, n_public: int = 1, functional: str = "convert") -> list[StdioProblem | CodeProblem]:
    """APPS records: the first ``n_public`` tests public, the others private (see the module docstring)."""
    return _load(path, _apps_converter("apps", n_public, functional, lambda rec, i: f"apps/{rec['problem_id']}"))


def load_taco(path: str | Path, n_public: int = 1, functional: str = "convert") -> list[StdioProblem | CodeProblem]:
    """TACO records (APPS' layout without ``problem_id``): ids are ``taco/<record index>``."""
    return _load(path, _apps_converter("taco", n_public, functional, lambda rec, i: f"taco/{i}"))


def _apps_converter(
    source: str, n_public: int, functional: str, task_id: Callable[[Mapping[str, Any], int], str]
) -> Callable[[Mapping[str, Any]], StdioProblem | CodeProblem | None]:
    if n_public < 1:
        raise ValueError("n_public must be >= 1")
    _check_functional(functional)
    count = iter(range(1 << 62))

    def convert(rec: Mapping[str, Any]) -> StdioProblem | CodeProblem | None:
        tid = task_id(rec, next(count))
        io_spec = _maybe_json(rec["input_output"])
        if not isinstance(io_spec, Mapping):
            raise ValueError("input_output must be a JSON object with inputs and outputs")
        solutions = _maybe_json(rec.get("solutions") or "[]")
        meta = {k: rec[k] for k in ("difficulty", "url", "name", "source", "tags", "skill_types") if k in rec}
        if io_spec.get("fn_name"):
            if functional == "skip":
                return None
            if functional == "raise":
                raise ValueError(f"problem {tid}: call-based (fn_name) problems are not stdin/stdout")
            cases = apps_call_cases(io_spec["inputs"], io_spec["outputs"])
            return call_problem(
                tid, str(rec["question"]), str(io_spec["fn_name"]), cases[:n_public], cases[n_public:],
                starter_code=str(rec.get("starter_code") or ""), reference=solutions[0] if solutions else None,
                source=source, metadata=meta,
            )  # fmt: skip
        cases = _pairs(io_spec["inputs"], io_spec["outputs"])
        return StdioProblem(
            task_id=tid,
            statement=str(rec["question"]),
            public_tests=tuple(cases[:n_public]),
            private_tests=tuple(cases[n_public:]),
            reference_solution=solutions[0] if solutions else None,
            source=source,
            metadata=meta,
        )

    return convert


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


def _check_functional(functional: str) -> None:
    if functional not in FUNCTIONAL:
        raise ValueError(f"functional must be one of {FUNCTIONAL}, got {functional!r}")


def _load(path: str | Path, convert: Callable[[Mapping[str, Any]], Any]) -> list[Any]:
    path = Path(path)
    out: list[Any] = []
    for lineno, rec in iter_jsonl(path):
        try:
            problem = convert(rec)
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise ValueError(f"{path}:{lineno}: {detail}") from None
        if problem is not None:
            out.append(problem)
    if not out:
        raise ValueError(f"{path}: no usable problems")
    return out


def _detect_format(path: Path) -> str:
    for _, rec in iter_jsonl(path):
        if "question_content" in rec and "public_test_cases" in rec:
            return "livecodebench"
        if "input_output" in rec and "question" in rec:
            return "apps" if "problem_id" in rec else "taco"
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
