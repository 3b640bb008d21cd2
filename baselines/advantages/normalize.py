"""Grouping and group normalization shared by every scheme (vectorized numpy).

    A_i = (v_i - mean_{g(i)} v) / (std_{g(i)} v + eps)      scale_by_std=True
    A_i =  v_i - mean_{g(i)} v                              scale_by_std=False

Degenerate groups (decided exactly, before any arithmetic):
- size 1: ``singleton="zero"`` gives A = 0 (default, safe); ``"passthrough"`` reproduces
  the verl / Dr. MAS quirk mean = 0, std = 1, i.e. A = v / (1 + eps) (A = v without std).
- size >= 2 with all values equal (zero variance): A = 0 exactly.
``drop_zero_variance=True`` (DAPO) marks the rows of those groups ``keep=False``; a
passthrough singleton is kept, since it carries the raw reward as signal (as in verl).

Overflow: finite inputs can still overflow in the sums (|v| near 1e308) or the squares
(|v| above ~1e154); the group means, stds and advantages are checked AFTER the arithmetic
and a :class:`NonFiniteAdvantageError` names the first bad group -- never NaN advantages,
and never the silent 0 an infinite std would give.
"""

from __future__ import annotations

import numpy as np

from baselines.advantages.config import AdvantageConfig, AdvantageResult, Singleton


class NonFiniteAdvantageError(FloatingPointError, ValueError):
    """Values to normalize are not finite (the scheme's reward arithmetic overflowed, or NaN/inf
    came in), or the normalization itself overflowed (finite rewards too large to sum or square)."""


def group_index(*keys: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense int64 group id per row for the composite key ``keys`` (one array per key column).

    Each column is coded with ``np.unique(..., return_inverse=True)``, then the codes are
    combined pairwise and re-coded, so ids follow the lexicographic order of the key tuples.
    """
    if not keys:
        raise ValueError("group_index needs at least one key column")
    n = len(keys[0])
    codes = np.zeros(n, dtype=np.int64)
    n_groups = 1 if n else 0
    for key in keys:
        key = np.asarray(key)
        if key.shape != (n,):
            raise ValueError(f"key columns must all have shape ({n},), got {key.shape}")
        uniq, inv = np.unique(key, return_inverse=True)
        _, codes = np.unique(codes * len(uniq) + inv.reshape(-1), return_inverse=True)
        codes = codes.reshape(-1).astype(np.int64)
        n_groups = int(codes.max()) + 1 if n else 0
    return codes, n_groups


def group_normalize(
    values: np.ndarray,
    groups: np.ndarray,
    *,
    eps: float = 1e-6,
    scale_by_std: bool = True,
    unbiased_std: bool = False,
    singleton: Singleton = "zero",
    drop_zero_variance: bool = False,
    expected_group_size: int | None = None,
) -> AdvantageResult:
    """Normalize ``values`` within the groups given by integer labels ``groups``."""
    values = np.array(values, dtype=np.float64)  # a copy: result.values never aliases the table
    if values.ndim != 1 or np.shape(groups) != values.shape:
        raise ValueError(f"values {values.shape} and groups {np.shape(groups)} must be equal 1-D shapes")
    if not np.all(np.isfinite(values)):
        rows = np.flatnonzero(~np.isfinite(values))[:5].tolist()
        raise NonFiniteAdvantageError(
            f"values to normalize must be finite; rows {rows} are not (NaN/inf rewards, or the scheme's mix of "
            "them -- alpha * r_team + r_local, shaping, credit, return-to-go -- overflowed)")
    if singleton not in ("zero", "passthrough"):
        raise ValueError(f"singleton must be 'zero' or 'passthrough', got {singleton!r}")
    _, g = np.unique(np.asarray(groups), return_inverse=True)
    g = g.reshape(-1)
    n_groups = int(g.max()) + 1 if g.size else 0

    count = np.bincount(g, minlength=n_groups)
    if expected_group_size is not None and np.any(count != expected_group_size):
        sizes = sorted(set(count.tolist()))
        raise ValueError(f"every group must hold {expected_group_size} rows, found sizes {sizes}")
    with np.errstate(over="ignore", invalid="ignore"):  # checked right below, after the arithmetic
        mean = np.bincount(g, weights=values, minlength=n_groups) / np.maximum(count, 1)
        centered = values - mean[g]
        ddof = 1 if unbiased_std else 0
        sq = np.bincount(g, weights=centered**2, minlength=n_groups)
        std = np.sqrt(sq / np.maximum(count - ddof, 1))
    _check_finite(values, g, mean, std if scale_by_std else mean, centered)

    gmax = np.full(n_groups, -np.inf)
    gmin = np.full(n_groups, np.inf)
    np.maximum.at(gmax, g, values)
    np.minimum.at(gmin, g, values)
    is_single = count == 1
    is_flat = (count >= 2) & (gmax == gmin)

    degenerate = is_single | is_flat
    denom = np.where(degenerate, 1.0, std + eps)  # degenerate groups are set below, avoid 0/0
    adv = centered / denom[g] if scale_by_std else centered
    adv[is_flat[g]] = 0.0
    single_rows = is_single[g]
    if singleton == "passthrough":
        adv[single_rows] = values[single_rows] / (1.0 + eps) if scale_by_std else values[single_rows]
    else:
        adv[single_rows] = 0.0

    dead = degenerate if singleton == "zero" else is_flat
    keep = ~dead[g] if drop_zero_variance else np.ones(len(values), dtype=bool)
    stats = _stats(values, adv, keep, count, is_single, is_flat)
    return AdvantageResult(advantages=adv, keep=keep, groups=g.astype(np.int64), values=values, stats=stats)


def normalize_with_config(
    values: np.ndarray, groups: np.ndarray, config: AdvantageConfig, *, scale_default: bool = True
) -> AdvantageResult:
    """:func:`group_normalize` with the shared options of ``config``."""
    return group_normalize(
        values,
        groups,
        eps=config.eps,
        scale_by_std=config.scale(scale_default),
        unbiased_std=config.unbiased_std,
        singleton=config.singleton,
        drop_zero_variance=config.drop_zero_variance,
        expected_group_size=config.expected_group_size,
    )


def with_advantages(result: AdvantageResult, advantages: np.ndarray, *, keep_all: bool = False) -> AdvantageResult:
    """``result`` (a :func:`group_normalize` output: its groups, values and group statistics) with other
    ``advantages`` (and every row kept with ``keep_all``); the advantage statistics are recomputed."""
    advantages = np.asarray(advantages, dtype=np.float64)
    if not np.all(np.isfinite(advantages)):
        rows = np.flatnonzero(~np.isfinite(advantages))[:5].tolist()
        raise NonFiniteAdvantageError(f"advantages are not finite at rows {rows} (a baseline or value overflowed)")
    keep = np.ones(len(advantages), dtype=bool) if keep_all else result.keep
    n = len(advantages)
    stats = {**result.stats, "keep_frac": float(keep.mean()) if n else 1.0,
             "adv_mean": float(advantages.mean()) if n else 0.0, "adv_std": float(advantages.std()) if n else 0.0,
             "adv_abs_max": float(np.abs(advantages).max()) if n else 0.0}
    return AdvantageResult(advantages=advantages, keep=keep, groups=result.groups, values=result.values, stats=stats)


def _check_finite(values, g, mean, std, centered) -> None:
    bad = ~np.isfinite(mean) | ~np.isfinite(std)
    bad_rows = ~np.isfinite(centered)
    if bad.any() or bad_rows.any():
        group = int(np.flatnonzero(bad)[0]) if bad.any() else int(g[np.flatnonzero(bad_rows)[0]])
        big = float(np.abs(values[g == group]).max())
        raise NonFiniteAdvantageError(
            f"group normalization overflowed in group {group} (largest |value| {big:.3g}): its mean or std is "
            "not finite; rescale the rewards (e.g. divide by their range) before computing advantages"
        )


def _stats(values, adv, keep, count, is_single, is_flat) -> dict[str, float]:
    n = len(values)
    return {
        "n_rows": float(n),
        "n_groups": float(len(count)),
        "group_size_mean": float(count.mean()) if len(count) else 0.0,
        "n_singleton_groups": float(is_single.sum()),
        "n_zero_variance_groups": float(is_flat.sum()),
        "keep_frac": float(keep.mean()) if n else 1.0,
        "value_mean": float(values.mean()) if n else 0.0,
        "value_std": float(values.std()) if n else 0.0,
        "adv_mean": float(adv.mean()) if n else 0.0,
        "adv_std": float(adv.std()) if n else 0.0,
        "adv_abs_max": float(np.abs(adv).max()) if n else 0.0,
    }
