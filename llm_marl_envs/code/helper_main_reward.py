"""The helper/main joint program and its gated reward (MAGRPO's levels, checked with the AST).

Assembly (:func:`assemble`) -- how the agents' answers become one program:

1. the problem's *prelude* (the prompt without the entry point's stub: imports and any
   functions the prompt gives, e.g. HumanEval/32's ``poly``);
2. each helper's code, in helper order: top-level functions, classes, imports and
   assignments are kept; a definition of the entry point (a helper "also writing main")
   or of another helper's function is **dropped and reported**; other top-level statements
   (example calls, prints, ``if __name__ == ...``) are dropped and reported;
3. the main agent's code, with the same rules; a definition of any name a helper owns or
   defines (main "redefining aux") is **dropped and reported: the helper's version is
   used**, so main can neither bypass nor overwrite its teammate.

Code that does not parse is kept as is (it is cut into chunks at column-0 ``def`` lines so
the well-formed parts are still recognized), so the syntax level sees the error.

Masking (for counterfactual credit): a masked helper's code is replaced by a stub of its
function that raises ``NotImplementedError``; a masked main by a stub of the entry point
that raises. A masked agent earns no structure points (a placeholder is not a definition);
the stubs only keep the other agents' code runnable.

Reward (:class:`RewardConfig`, defaults = the paper's 4.0 scale), levels gated in order
(``gated=True``: a level is scored only if the previous one passed):

==============  ===============================================================================
structure       ``helper_defined`` (0.4) x fraction of helpers whose function is defined at top
                level with ``return <value>`` (or ``yield``); ``main_defined`` (0.6) if the entry
                point is defined. Passed when all helpers and main are defined.
syntax          ``syntax`` (0.5) if the combined program parses. Passed when it parses.
tests           ``tests`` (1.0) x fraction of the check's asserts that pass (sandbox).
                Passed when at least ``cooperation_min_passed`` (1) tests pass.
cooperation     ``main_calls_helper`` (+0.5) x fraction of helpers the entry point calls (or
                references, e.g. ``map(aux, xs)``) *and* that do non-trivial work (not just
                ``return <constant or parameter>``); ``main_not_thin`` (+1.0) if the entry point
                uses a helper and is not a thin wrapper (:func:`~.ast_checks.is_thin_wrapper`);
                ``helper_result_ignored`` (-0.5) x fraction of helpers with a call whose value
                the entry point throws away. "The entry point" includes main's own
                top-level functions it reaches by direct calls; those that are themselves
                thin wrappers count as helpers in the thin-wrapper check.
==============  ===============================================================================

With several helpers the fractions keep the maximum at 4.0. With ``gated=False`` each level
is scored whenever it can be computed (tests need a parsing program; cooperation still
needs a passing test). The score of an empty answer is 0 and no score is negative.

A sandbox infrastructure failure raises :class:`SandboxInfraError` (a
``llm_marl_envs.sandbox.SandboxError``, itself a ``RuntimeError``):
it is never scored as a wrong answer.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from llm_marl_envs.code.ast_checks import (
    Chunk,
    call_usage,
    is_thin_wrapper,
    is_trivial,
    parse_or_none,
    returns_value,
    split_top_level,
    syntax_error_of,
)
from llm_marl_envs.data.humaneval import CodeProblem
from llm_marl_envs.sandbox import SandboxError

__all__ = [
    "Assembly",
    "RewardConfig",
    "SandboxInfraError",
    "Score",
    "assemble",
    "score_assembly",
    "stub_function",
]

MASKED_MESSAGE = "masked contribution (counterfactual placeholder)"


class SandboxInfraError(SandboxError):
    """The sandbox failed to run the program: an infrastructure failure, not a wrong answer."""


@dataclass(frozen=True)
class RewardConfig:
    """Weights of the gated helper/main reward (defaults: the paper's 4.0 scale)."""

    helper_defined: float = 0.4
    main_defined: float = 0.6
    syntax: float = 0.5
    tests: float = 1.0
    main_calls_helper: float = 0.5
    main_not_thin: float = 1.0
    helper_result_ignored: float = -0.5
    gated: bool = True
    cooperation_min_passed: int = 1

    def __post_init__(self) -> None:
        if self.cooperation_min_passed < 1:
            raise ValueError("cooperation_min_passed must be >= 1")
        positive = (self.helper_defined, self.main_defined, self.syntax, self.tests,
                    self.main_calls_helper, self.main_not_thin)  # fmt: skip
        if min(positive) < 0 or self.helper_result_ignored > 0:
            raise ValueError("reward weights must be >= 0, except helper_result_ignored <= 0")
        if self.main_calls_helper + self.helper_result_ignored < 0:
            raise ValueError("main_calls_helper + helper_result_ignored must be >= 0 (scores stay >= 0)")

    @property
    def max_score(self) -> float:
        return (self.helper_defined + self.main_defined + self.syntax + self.tests
                + self.main_calls_helper + self.main_not_thin)  # fmt: skip


@dataclass
class Assembly:
    """The joint program of one turn plus the AST facts the reward needs.

    ``notes[agent]`` says what assembly did with that agent's code (dropped definitions...).
    """

    program: str
    helper_functions: dict[str, str]  #: helper agent -> the function name it owns
    main_agent: str
    entry_point: str
    masked: frozenset[str]
    helper_ok: dict[str, bool]  #: helper defined at top level with a return (and unmasked)
    helper_trivial: dict[str, bool]
    main_ok: bool
    main_fn: ast.FunctionDef | ast.AsyncFunctionDef | None
    syntax_error: str | None
    notes: dict[str, list[str]] = field(default_factory=dict)
    missing: dict[str, list[str]] = field(default_factory=dict)  #: agent -> structure problems
    #: main's own top-level functions the entry point reaches by direct calls (entry first)
    main_fns: list[ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=list)

    @property
    def structure_passed(self) -> bool:
        return self.main_ok and all(self.helper_ok.values())

    @property
    def parses(self) -> bool:
        return self.syntax_error is None


@dataclass(frozen=True)
class Score:
    """The reward of one joint program, explained."""

    total: float
    components: dict[str, float]
    passed: int
    n_tests: int
    ran_tests: bool


def stub_function(name: str, params: str = "*args, **kwargs", signature: str | None = None) -> str:
    """Source of a placeholder function ``name`` that raises ``NotImplementedError``."""
    head = signature or f"def {name}({params}):"
    return f'{head}\n    raise NotImplementedError("{name}: {MASKED_MESSAGE}")'


def _clean(code: str, agent: str, drop: Mapping[str, str], notes: list[str]) -> tuple[str, dict[str, Chunk]]:
    """Keep definitions/imports/assignments of ``code``; drop names in ``drop`` (name -> why)."""
    kept: list[str] = []
    defs: dict[str, Chunk] = {}
    for chunk in split_top_level(code):
        name = chunk.name
        if name is not None and name in drop:
            notes.append(f"{agent} defines `{name}`: {drop[name]}")
            continue
        if chunk.kind == "other":
            first = chunk.text.strip().split("\n", 1)[0][:60]
            notes.append(f"{agent}: top-level statement dropped: `{first}`")
            continue
        if name is not None and chunk.kind == "function":
            if name in defs:
                notes.append(f"{agent} defines `{name}` twice; the last definition is used")
            defs[name] = chunk
        kept.append(chunk.text)
    return "\n\n".join(kept), defs


def assemble(
    problem: CodeProblem,
    helper_codes: Mapping[str, str],
    main_code: str,
    helper_functions: Mapping[str, str],
    main_agent: str = "main",
    masked: frozenset[str] = frozenset(),
) -> Assembly:
    """Build the joint program from extracted code (see the module docstring)."""
    entry = problem.entry_point
    owned = dict(helper_functions)
    notes: dict[str, list[str]] = {a: [] for a in [*owned, main_agent]}
    missing: dict[str, list[str]] = {a: [] for a in [*owned, main_agent]}
    parts = [problem.prelude()]
    helper_ok: dict[str, bool] = {}
    helper_trivial: dict[str, bool] = {}
    helper_defined_names: set[str] = set()
    for agent, fn_name in owned.items():
        if agent in masked:
            parts.append(stub_function(fn_name))
            helper_ok[agent], helper_trivial[agent] = False, True
            missing[agent].append(f"`{fn_name}` masked")
            continue
        drop = {entry: "the entry point belongs to the main agent; ignored"}
        drop.update({n: f"`{n}` belongs to {a}; ignored" for a, n in owned.items() if a != agent})
        text, defs = _clean(helper_codes.get(agent, ""), agent, drop, notes[agent])
        parts.append(text)
        helper_defined_names.update(defs)
        chunk = defs.get(fn_name)
        fn = chunk.node if chunk is not None else None
        has_return = isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and returns_value(fn)
        helper_ok[agent] = has_return
        helper_trivial[agent] = fn is None or is_trivial(fn)  # type: ignore[arg-type]
        if fn is None:
            missing[agent].append(f"no top-level function `{fn_name}` defined")
        elif not has_return:
            missing[agent].append(f"`{fn_name}` has no `return <value>` statement")
    main_fn = None
    main_fns: list = []
    if main_agent in masked:
        parts.append(stub_function(entry, signature=problem.entry_signature()))
        missing[main_agent].append(f"`{entry}` masked")
    else:
        drop = {n: f"`{n}` belongs to {a}; main's version dropped, the helper's is used" for a, n in owned.items()}
        drop.update({
            n: "already defined by a helper; main's version dropped, the helper's is used"
            for n in helper_defined_names if n not in drop and n != entry
        })  # fmt: skip
        text, defs = _clean(main_code, main_agent, drop, notes[main_agent])
        parts.append(text)
        chunk = defs.get(entry)
        if chunk is not None and isinstance(chunk.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            main_fn = chunk.node
            main_fns = _reachable(main_fn, {n: c.node for n, c in defs.items()})
        else:
            missing[main_agent].append(f"no top-level function `{entry}` defined")
    program = "\n\n\n".join(p.strip("\n") for p in parts if p.strip()) + "\n"
    error = syntax_error_of(program)
    if error is not None:
        error = _locate(error, parts)
    return Assembly(
        program=program,
        helper_functions=owned,
        main_agent=main_agent,
        entry_point=entry,
        masked=frozenset(masked),
        helper_ok=helper_ok,
        helper_trivial=helper_trivial,
        main_ok=main_fn is not None,
        main_fn=main_fn,
        main_fns=main_fns,
        syntax_error=error,
        notes=notes,
        missing=missing,
    )


def _locate(error: str, parts: Sequence[str]) -> str:
    """Say which part of the joint program holds the first syntax error (with its own line)."""
    for part in parts:
        if part.strip() and parse_or_none(part) is None:
            own = syntax_error_of(part)
            return f"{error} (in the part: {own})" if own else error
    return error


def score_assembly(asm: Assembly, result, config: RewardConfig) -> Score:
    """Score an assembly given the sandbox ``ExecResult`` of its program (None if not run).

    Raises :class:`SandboxInfraError` when ``result`` reports an infrastructure error.
    """
    c = config
    n_helpers = max(len(asm.helper_functions), 1)
    comp: dict[str, float] = {
        "structure_helper": c.helper_defined * sum(asm.helper_ok.values()) / n_helpers,
        "structure_main": c.main_defined * float(asm.main_ok),
        "syntax": 0.0,
        "tests": 0.0,
        "coop_calls_helper": 0.0,
        "coop_not_thin": 0.0,
        "coop_result_ignored": 0.0,
    }
    passed = total = 0
    ran = False
    if asm.parses and (asm.structure_passed or not c.gated):
        comp["syntax"] = c.syntax
        if result is not None:
            if getattr(result, "infra_error", None):
                raise SandboxInfraError(f"sandbox infrastructure error (not a wrong answer): {result.infra_error}")
            ran = True
            total = int(result.total)
            passed = int(result.passed)
            comp["tests"] = c.tests * (passed / total if total else 0.0)
    if passed >= c.cooperation_min_passed and asm.main_fn is not None and (asm.structure_passed or not c.gated):
        fns = asm.main_fns or [asm.main_fn]
        usage = {a: [call_usage(f, n) for f in fns] for a, n in asm.helper_functions.items()}
        used = [a for a, us in usage.items() if any(u.used for u in us)]
        calls = [a for a in used if not asm.helper_trivial.get(a, True) and a not in asm.masked]
        comp["coop_calls_helper"] = c.main_calls_helper * len(calls) / n_helpers
        if used and not _thin(fns, set(asm.helper_functions.values())):
            comp["coop_not_thin"] = c.main_not_thin
        ignored = [a for a, us in usage.items() if any(u.result_ignored for u in us)]
        if ignored:
            comp["coop_result_ignored"] = c.helper_result_ignored * len(ignored) / n_helpers
    total_score = max(sum(comp.values()), 0.0)
    return Score(total_score, comp, passed, total, ran)


def _reachable(entry: ast.AST, defs: Mapping[str, ast.AST | None]) -> list:
    """``entry`` plus main's own top-level functions it reaches by direct calls, transitively."""
    out, seen, stack = [entry], {getattr(entry, "name", "")}, [entry]
    while stack:
        fn = stack.pop()
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in seen:
                target = defs.get(node.func.id)
                if isinstance(target, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    seen.add(node.func.id)
                    out.append(target)
                    stack.append(target)
    return out


def _thin(fns: Sequence[ast.AST], helpers: set[str]) -> bool:
    """Whether the entry point (``fns[0]``) is a thin wrapper; main's own functions that are
    thin wrappers around the helpers count as helpers (so wrapping twice does not help)."""
    wrappers = set(helpers)
    changed = True
    while changed:
        changed = False
        for fn in fns[1:]:
            if fn.name not in wrappers and is_thin_wrapper(fn, wrappers):
                wrappers.add(fn.name)
                changed = True
    return is_thin_wrapper(fns[0], wrappers)


def needs_run(asm: Assembly, config: RewardConfig) -> bool:
    """Whether scoring ``asm`` needs the sandbox (the program parses and structure allows it)."""
    return asm.parses and (asm.structure_passed or not config.gated)
