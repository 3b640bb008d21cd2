"""The one rule for visible vs hidden tests: what an agent can see never scores it.

Every code task builds its two test sets through :func:`split_tests`; nothing else decides
which tests an agent is shown (as examples or feedback) and which decide the score.

Rule, given the tests a dataset offers as *visible* (public tests, prompt examples) and
the tests it offers as *hidden* (private tests, the full ``check``), each identified by a
``key`` (two tests with equal keys are the same test, e.g. the same call with the same
expected value, or the same stdin and expected stdout):

1. hidden = the hidden candidates whose key is not a visible key (duplicates dropped);
   the number removed is recorded (APPS lists its public tests among all tests; HumanEval's
   ``check`` repeats some docstring examples);
2. when step 1 leaves nothing hidden (every test the dataset has is one it shows, e.g. a
   stdin/stdout problem without private tests), the visible tests also score, and the
   record says ``score_tests="visible"``: the score is a visible-test score;
3. when no visible test is offered, a **seeded hold-out** moves ``min(max_held_out, n //
   2)`` of the ``n`` hidden tests to the visible set and keeps the rest hidden (the
   generator is seeded by ``seed`` and the task id, so a problem always gets the same
   split);
4. a problem with a single test and none visible cannot be split: ``too_few="no_visible"``
   (default) shows no test and scores on it; ``too_few="share"`` shows it *and* scores on
   it, with ``score_tests="visible"``.

:class:`TestSplit` is the record kept with the problem and put in the episode's final
info; :func:`assert_disjoint` is the check every builder runs before returning.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

import numpy as np

__all__ = ["TOO_FEW", "SplitConfig", "TestLeakError", "TestSplit", "assert_disjoint", "split_tests"]

T = TypeVar("T")
TOO_FEW = ("no_visible", "share")


class TestLeakError(ValueError):
    """A visible test is also a hidden (scoring) test where the split says it must not be."""

    __test__ = False  # not a pytest test class


@dataclass(frozen=True)
class SplitConfig:
    """How :func:`split_tests` holds tests out (see the module docstring).

    Attributes:
        seed: seeds the hold-out (combined with the task id).
        max_held_out: at most this many tests are moved to the visible set by a hold-out
            (0: never hold out; a problem with no visible test then shows none).
        too_few: ``"no_visible"`` or ``"share"`` for a problem with a single test.
    """

    seed: int = 0
    max_held_out: int = 3
    too_few: str = "no_visible"

    def __post_init__(self) -> None:
        if self.too_few not in TOO_FEW:
            raise ValueError(f"too_few must be one of {TOO_FEW}, got {self.too_few!r}")
        if self.max_held_out < 0:
            raise ValueError(f"max_held_out must be >= 0, got {self.max_held_out}")


@dataclass(frozen=True)
class TestSplit:
    """How a problem's tests were split; recorded with the problem and in the episode.

    Attributes:
        visible_source: where the visible tests come from: the dataset's own public tests
            or examples (the name the caller gave, e.g. ``"public"``, ``"examples"``),
            ``"held_out"`` (seeded hold-out from the hidden pool), ``"none"`` (no visible
            test) or ``"shared"`` (the single test is both, see ``too_few``).
        n_visible: number of visible tests.
        n_hidden: number of hidden (scoring) tests.
        removed_from_hidden: hidden candidates dropped because a visible test has their key.
        held_out: indices (in the pooled candidates) of the tests moved to the visible set.
        seed: the seed of the hold-out.
        score_tests: ``"hidden"`` (disjoint from the visible tests) or ``"visible"``.
        duplicates_dropped: hidden candidates dropped because an earlier one has their key
            (a test listed twice counts once).
    """

    __test__ = False  # not a pytest test class

    visible_source: str
    n_visible: int
    n_hidden: int
    removed_from_hidden: int = 0
    held_out: tuple[int, ...] = ()
    seed: int = 0
    score_tests: str = "hidden"
    duplicates_dropped: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready) for episode records."""
        out = asdict(self)
        out["held_out"] = list(self.held_out)
        return out


def split_tests(
    visible: Sequence[T],
    hidden: Sequence[T],
    key: Callable[[T], Hashable],
    task_id: str,
    visible_source: str,
    config: SplitConfig | None = None,
) -> tuple[tuple[T, ...], tuple[T, ...], TestSplit]:
    """``(visible, hidden, record)`` following the rule of the module docstring."""
    cfg = config or SplitConfig()
    shown = _unique(visible, key)
    shown_keys = {key(t) for t in shown}
    candidates = _unique(hidden, key)
    dup = len(hidden) - len(candidates)
    kept = tuple(t for t in candidates if key(t) not in shown_keys)
    removed = len(candidates) - len(kept)
    if shown and kept:
        record = TestSplit(
            visible_source, len(shown), len(kept), removed, (), cfg.seed, duplicates_dropped=dup
        )
        assert_disjoint(shown, kept, key, record)
        return shown, kept, record
    if shown:  # every hidden test is one the dataset shows: no test is left to score blind
        scored = candidates or shown  # the hidden candidates' own form (their set-up may differ)
        return (
            shown,
            scored,
            TestSplit("shared", len(shown), len(scored), removed, (), cfg.seed, "visible", dup),
        )
    pool = kept
    if len(pool) >= 2 and cfg.max_held_out > 0:
        n_out = min(cfg.max_held_out, len(pool) // 2)
        rng = np.random.default_rng([cfg.seed, zlib.crc32(task_id.encode("utf-8"))])
        chosen = tuple(sorted(int(i) for i in rng.choice(len(pool), size=n_out, replace=False)))
        out_set = set(chosen)
        vis = tuple(pool[i] for i in chosen)
        hid = tuple(t for i, t in enumerate(pool) if i not in out_set)
        record = TestSplit("held_out", len(vis), len(hid), removed, chosen, cfg.seed, duplicates_dropped=dup)
        assert_disjoint(vis, hid, key, record)
        return vis, hid, record
    if cfg.too_few == "share" and len(pool) == 1:
        return pool, pool, TestSplit("shared", len(pool), len(pool), removed, (), cfg.seed, "visible", dup)
    return (), pool, TestSplit("none", 0, len(pool), removed, (), cfg.seed, duplicates_dropped=dup)


def assert_disjoint(
    visible: Sequence[Any],
    hidden: Sequence[Any],
    key: Callable[[Any], Hashable],
    record: TestSplit | None = None,
) -> None:
    """Raise :class:`TestLeakError` if a visible test is a hidden one, unless ``record`` says
    the score is a visible-test score (``score_tests="visible"``)."""
    if record is not None and record.score_tests == "visible":
        return
    common = {key(t) for t in visible} & {key(t) for t in hidden}
    if common:
        raise TestLeakError(
            f"{len(common)} visible test(s) are also hidden tests, e.g. {sorted(map(str, common))[0]}"
        )


def _unique(tests: Sequence[T], key: Callable[[T], Hashable]) -> tuple[T, ...]:
    seen: set[Hashable] = set()
    out = []
    for t in tests:
        k = key(t)
        if k not in seen:
            seen.add(k)
            out.append(t)
    return tuple(out)
