"""The sample table: one row per agent-turn, the one interface between rollout and advantages.

A *row* is one agent's one generated response. The table is columnar: numpy arrays for the
scalar columns, Python lists for the variable-length token columns and the reward
components. Pure Python + numpy, no torch.

Tree conventions (MAGRPO, AT-GRPO, MARS2):
- ``node`` is the id of the tree node this row's (joint) action created, unique within one
  ``(task, episode)``; ``-1`` when the rollout has no tree.
- ``parent`` is the node whose state the row was generated from; ``-1`` for the task's
  initial state (the root), which every episode of the task shares. Rows generated from the
  same state are *siblings* (MAGRPO / AT-GRPO groups). A row generated after another agent's
  output in the same episode must name that output's node as its parent, or carry an
  explicit ``group`` id; otherwise it counts as generated from the initial state.
- ``group`` is an explicit sibling-group id set by the sampler (e.g. the AT-GRPO state id);
  where it is non-empty it replaces the parent-based sibling key.
- ``reward`` is the joint team reward of the node (or episode) the row belongs to; every row
  of one node carries the same value.

Sequences (actor-critic, ReMax):
- ``step`` is the index of the row's agent-step in its episode (the order of the rows within one
  ``(task, episode)``); ``-1`` where the sampler does not record it.
- ``turn_reward`` is the joint team reward of the row's turn alone (NaN = not recorded);
  ``value`` a critic's estimate of the row's state (NaN = no critic); ``baseline`` a return
  the sampler measured for the row's task and turn, e.g. ReMax's greedy rollout (NaN = none).

Build a table with :meth:`SampleTable.from_rows` (a list of :class:`Row` or dicts) or
:meth:`SampleTable.from_columns`; unknown or missing columns raise ``ValueError``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from llm_marl_envs.data.jsonl import iter_jsonl

STR_COLUMNS = ("task", "agent", "group")
INT_COLUMNS = ("episode", "branch", "turn", "node", "parent", "depth", "step")
FLOAT_COLUMNS = ("reward", "return_to_go", "local_reward", "tool_reward", "credit", "turn_reward", "value",
                 "baseline")
#: float columns where NaN means "not computed" (everything else must be finite)
NAN_ALLOWED = ("return_to_go", "credit", "turn_reward", "value", "baseline")
SEQ_COLUMNS = ("prompt_ids", "completion_ids", "old_logprobs")
DICT_COLUMNS = ("reward_components",)
REQUIRED_COLUMNS = ("task", "episode", "agent", "reward")


@dataclass
class Row:
    """One agent-turn. Only ``task``, ``episode``, ``agent`` and ``reward`` are required."""

    task: str
    episode: int
    agent: str
    reward: float
    turn: int = 0
    branch: int = -1
    node: int = -1
    parent: int = -1
    depth: int = 0
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    old_logprobs: list[float] = field(default_factory=list)
    return_to_go: float = math.nan
    reward_components: dict[str, float] = field(default_factory=dict)
    local_reward: float = 0.0
    tool_reward: float = 0.0
    credit: float = math.nan
    group: str = ""
    step: int = -1
    turn_reward: float = math.nan
    value: float = math.nan
    baseline: float = math.nan


COLUMNS: tuple[str, ...] = (
    "task", "episode", "branch", "agent", "turn", "node", "parent", "depth",
    "prompt_ids", "completion_ids", "old_logprobs",
    "reward", "return_to_go", "reward_components", "local_reward", "tool_reward", "credit",
    "group", "step", "turn_reward", "value", "baseline",
)  # fmt: skip
_SCALAR_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {"branch": -1, "turn": 0, "node": -1, "parent": -1, "depth": 0, "return_to_go": math.nan,
     "local_reward": 0.0, "tool_reward": 0.0, "credit": math.nan, "group": "", "step": -1,
     "turn_reward": math.nan, "value": math.nan, "baseline": math.nan}
)  # fmt: skip


def _default(name: str) -> Any:
    """Fresh default value of one optional column (a new list/dict for container columns)."""
    if name in SEQ_COLUMNS:
        return []
    if name in DICT_COLUMNS:
        return {}
    return _SCALAR_DEFAULTS[name]


def _as_list(seq: Any) -> list:
    """A token sequence (list, tuple, numpy array or tensor) as a plain list."""
    return seq.tolist() if hasattr(seq, "tolist") else list(seq)


def _int_array(name: str, values: Any) -> np.ndarray:
    arr = np.asarray(values)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind not in "iub":
        raise ValueError(f"column {name!r} must hold integers, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def _float_array(name: str, values: Any) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"column {name!r} must hold numbers: {err}") from None


@dataclass(eq=False)
class SampleTable:
    """Columnar table of agent-turn samples. See the module docstring for the conventions.

    The constructor takes every column; use :meth:`from_columns` / :meth:`from_rows` to get
    defaults for the optional ones. All columns are coerced and validated on construction.
    """

    task: np.ndarray  # str
    episode: np.ndarray  # int64
    branch: np.ndarray  # int64, -1 if none
    agent: np.ndarray  # str
    turn: np.ndarray  # int64
    node: np.ndarray  # int64, -1 if no tree
    parent: np.ndarray  # int64, -1 = generated from the initial state
    depth: np.ndarray  # int64
    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]
    old_logprobs: list[list[float]]  # sampling log-prob of each completion token
    reward: np.ndarray  # float64, joint team reward of the episode / node
    return_to_go: np.ndarray  # float64, NaN = not computed
    reward_components: list[dict[str, float]]
    local_reward: np.ndarray  # float64, AT-GRPO per-agent local reward
    tool_reward: np.ndarray  # float64, SHARP R_tool,k
    credit: np.ndarray  # float64, SHARP phi_k, NaN = not computed
    group: np.ndarray  # str, explicit sibling-group id set by the sampler ("" = none)
    step: np.ndarray  # int64, the agent-step's index in its episode, -1 if unknown
    turn_reward: np.ndarray  # float64, team reward of the row's turn, NaN = not recorded
    value: np.ndarray  # float64, critic value of the row's state, NaN = no critic
    baseline: np.ndarray  # float64, a measured baseline return (ReMax's greedy rollout), NaN = none

    def __post_init__(self) -> None:
        for name in STR_COLUMNS:
            values = getattr(self, name)
            setattr(self, name, np.asarray(values, dtype=np.str_) if len(values) else
                    np.zeros(0, dtype=np.str_))
        for name in INT_COLUMNS:
            setattr(self, name, _int_array(name, getattr(self, name)))
        for name in FLOAT_COLUMNS:
            setattr(self, name, _float_array(name, getattr(self, name)))
        for name in SEQ_COLUMNS:
            setattr(self, name, [_as_list(s) for s in getattr(self, name)])
        self.reward_components = [dict(d) for d in self.reward_components]
        self.validate()

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_columns(cls, **columns: Any) -> SampleTable:
        """Build from whole columns; optional columns missing here get their defaults."""
        _check_column_names(columns, "")
        n = len(columns["task"])
        full = {name: columns[name] if name in columns else [_default(name) for _ in range(n)]
                for name in COLUMNS}
        return cls(**full)

    @classmethod
    def from_rows(cls, rows: Iterable[Row | Mapping[str, Any]]) -> SampleTable:
        """Build from :class:`Row` objects or dicts (keys = column names, optional ones may be left out)."""
        dict_rows = [_row_dict(r, i) for i, r in enumerate(rows)]
        columns = {name: [r.get(name, _default(name)) if name not in REQUIRED_COLUMNS else r[name]
                          for r in dict_rows] for name in COLUMNS}
        return cls(**columns)

    @classmethod
    def empty(cls) -> SampleTable:
        return cls.from_rows([])

    @staticmethod
    def concat(tables: Sequence[SampleTable]) -> SampleTable:
        """Rows of every table, in order."""
        if not tables:
            return SampleTable.empty()
        cols: dict[str, Any] = {}
        for name in COLUMNS:
            parts = [getattr(t, name) for t in tables]
            if isinstance(parts[0], list):
                cols[name] = [x for p in parts for x in p]
            else:
                cols[name] = np.concatenate(parts)
        return SampleTable(**cols)

    def append(self, row: Row | Mapping[str, Any]) -> None:
        """Append one row in place (O(n); collect rows and use :meth:`from_rows` in bulk)."""
        merged = SampleTable.concat([self, SampleTable.from_rows([row])])
        for name in COLUMNS:
            setattr(self, name, getattr(merged, name))

    def replace(self, **columns: Any) -> SampleTable:
        """A new, validated table with some columns replaced (e.g. ``return_to_go=...``)."""
        unknown = sorted(set(columns) - set(COLUMNS))
        if unknown:
            raise ValueError(f"unknown column(s) {unknown}")
        return dataclasses.replace(self, **columns)

    # ----------------------------------------------------------------- validation
    def validate(self) -> None:
        """Raise ``ValueError`` on a length mismatch, bad value or malformed token column."""
        n = len(self.task)
        for name in COLUMNS:
            col = getattr(self, name)
            if len(col) != n:
                raise ValueError(f"column {name!r} has {len(col)} rows, column 'task' has {n}")
            if isinstance(col, np.ndarray) and col.ndim != 1:
                raise ValueError(f"column {name!r} must be 1-D, got shape {col.shape}")
        for name in FLOAT_COLUMNS:
            if name not in NAN_ALLOWED:
                bad = np.flatnonzero(~np.isfinite(getattr(self, name)))
                if bad.size:
                    raise ValueError(f"column {name!r} is not finite at row(s) {bad[:5].tolist()}")
        for name in NAN_ALLOWED:
            bad = np.flatnonzero(np.isinf(getattr(self, name)))
            if bad.size:
                raise ValueError(f"column {name!r} is infinite at row(s) {bad[:5].tolist()}")
        for i, (ids, lps) in enumerate(zip(self.completion_ids, self.old_logprobs, strict=True)):
            if len(ids) != len(lps):
                raise ValueError(f"row {i}: {len(ids)} completion tokens but {len(lps)} old_logprobs")
        if np.any(self.task == ""):
            raise ValueError("column 'task' has empty ids")
        if np.any(self.agent == ""):
            raise ValueError("column 'agent' has empty names")

    # ----------------------------------------------------------------- access
    def __len__(self) -> int:
        return len(self.task)

    def __getitem__(self, key: str | int | slice | np.ndarray | Sequence[int]) -> Any:
        """``t["reward"]`` -> column; ``t[3]`` -> :class:`Row`; mask / indices / slice -> table."""
        if isinstance(key, str):
            return self.column(key)
        if isinstance(key, (int, np.integer)):
            return self.row(int(key))
        if isinstance(key, slice):
            return self.select(np.arange(len(self))[key])
        return self.select(key)

    def column(self, name: str) -> Any:
        if name not in COLUMNS:
            raise KeyError(f"unknown column {name!r}; known columns: {list(COLUMNS)}")
        return getattr(self, name)

    def row(self, i: int) -> Row:
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"row {i} out of range for a table of {n} rows")
        return Row(**{name: _py(getattr(self, name)[i]) for name in COLUMNS})

    def rows(self) -> Iterator[Row]:
        return (self.row(i) for i in range(len(self)))

    def select(self, mask: np.ndarray | Sequence[int] | Sequence[bool]) -> SampleTable:
        """Rows picked by a boolean mask (length n) or an integer index array, in that order."""
        idx = np.asarray(mask)
        if idx.dtype == bool:
            if idx.shape != (len(self),):
                raise ValueError(f"boolean mask has shape {idx.shape}, table has {len(self)} rows")
            idx = np.flatnonzero(idx)
        elif idx.size == 0:
            idx = np.zeros(0, dtype=np.int64)
        elif idx.dtype.kind not in "iu":
            raise ValueError(f"select() takes a boolean mask or integer indices, got {idx.dtype}")
        cols = {name: ([getattr(self, name)[i] for i in idx] if name in SEQ_COLUMNS + DICT_COLUMNS
                       else getattr(self, name)[idx]) for name in COLUMNS}
        return SampleTable(**cols)

    @property
    def completion_lengths(self) -> np.ndarray:
        """Number of completion tokens of each row (int64)."""
        return np.fromiter((len(c) for c in self.completion_ids), dtype=np.int64, count=len(self))

    def equals(self, other: SampleTable) -> bool:
        """Column-wise equality (NaN equals NaN)."""
        for name in COLUMNS:
            a, b = getattr(self, name), getattr(other, name)
            if isinstance(a, np.ndarray):
                same = a.shape == b.shape and (np.array_equal(a, b, equal_nan=True)
                                               if a.dtype.kind == "f" else np.array_equal(a, b))
            else:
                same = a == b
            if not same:
                return False
        return True

    # ----------------------------------------------------------------- jsonl
    def to_jsonl(self, path: str | Path) -> None:
        """One JSON object per row; NaN is written as ``null``."""
        with open(path, "w", encoding="utf-8") as fh:
            for i in range(len(self)):
                rec = {name: _py(getattr(self, name)[i]) for name in COLUMNS}
                for name in NAN_ALLOWED:
                    if math.isnan(rec[name]):
                        rec[name] = None
                fh.write(json.dumps(rec, allow_nan=False) + "\n")

    @classmethod
    def from_jsonl(cls, path: str | Path) -> SampleTable:
        rows = []
        for _, rec in iter_jsonl(path):
            for name in NAN_ALLOWED:
                if rec.get(name, 0.0) is None:
                    rec[name] = math.nan
            rows.append(rec)
        return cls.from_rows(rows)


def _check_column_names(names: Iterable[str], where: str) -> None:
    """Refuse unknown columns and missing required ones (``where`` prefixes the message)."""
    names = set(names)
    unknown = sorted(names - set(COLUMNS))
    if unknown:
        raise ValueError(f"{where}unknown column(s) {unknown}; known columns: {list(COLUMNS)}")
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise ValueError(f"{where}missing required column(s) {missing}")


def _row_dict(row: Row | Mapping[str, Any], i: int) -> Mapping[str, Any]:
    if isinstance(row, Row):
        return {f.name: getattr(row, f.name) for f in fields(Row)}
    if not isinstance(row, Mapping):
        raise TypeError(f"row {i} is a {type(row).__name__}, expected Row or a mapping")
    _check_column_names(row, f"row {i}: ")
    return row


def _py(value: Any) -> Any:
    """numpy scalar -> Python scalar; containers are copied."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    return value
