"""Configuration and result types shared by every advantage scheme."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

Singleton = Literal["zero", "passthrough"]


@dataclass(frozen=True)
class AdvantageConfig:
    """Options of the advantage schemes (shared ones first, then per scheme).

    ``scale_by_std=None`` means the scheme's paper default: divide by the group std for
    every scheme except MAGRPO (whose paper uses ``A = R - mean``).
    """

    # --- shared (see normalize.group_normalize)
    eps: float = 1e-6
    scale_by_std: bool | None = None
    unbiased_std: bool = False
    singleton: Singleton = "zero"
    drop_zero_variance: bool = False
    #: if set, every group must hold exactly this many rows (guards AT-GRPO/MAGRPO keys)
    expected_group_size: int | None = None
    # --- MAGRPO: discount used to fill return_to_go when the column is all NaN; GAE's discount (IAC, MAAC)
    gamma: float = 0.9
    # --- IAC / MAAC: GAE's lambda (1 = the discounted return minus V, 0 = the one-step TD error)
    gae_lambda: float = 0.95
    # --- AT-GRPO: r = alpha * r_team + r_local
    alpha: float = 1.0
    # --- MARS2: tree-consistent shaping r' = r + shaping_gamma * (r - b),
    #     b = (1 - shaping_lambda) * r_parent + shaping_lambda * mean(siblings excluding self)
    shaping: bool = False
    shaping_gamma: float = 0.5
    shaping_lambda: float = 0.5
    # --- MARS2: DAPO-style soft overlong penalty (off when overlong_max_len is None)
    overlong_max_len: int | None = None
    overlong_buffer: int = 0
    overlong_penalty: float = 1.0
    # --- SHARP: R_k = R_global + lambda_s * phi_k + lambda_p * R_tool,k (paper weights unpublished)
    lambda_s: float = 1.0
    lambda_p: float = 0.1

    def __post_init__(self) -> None:
        if self.eps < 0:
            raise ValueError(f"eps must be >= 0, got {self.eps}")
        if self.singleton not in ("zero", "passthrough"):
            raise ValueError(f"singleton must be 'zero' or 'passthrough', got {self.singleton!r}")
        if self.expected_group_size is not None and self.expected_group_size < 1:
            raise ValueError(f"expected_group_size must be >= 1, got {self.expected_group_size}")
        if self.overlong_max_len is not None and not 0 <= self.overlong_buffer <= self.overlong_max_len:
            raise ValueError("overlong_buffer must be in [0, overlong_max_len]")
        if not 0 <= self.gae_lambda <= 1:
            raise ValueError(f"gae_lambda must be in [0, 1], got {self.gae_lambda}")

    def refuse_group_options(self, scheme: str) -> None:
        """Schemes whose baseline is not the group's (ReMax, REINFORCE, GAE) have no group std to divide by
        and no zero-variance group to drop: asking for either is an error, never a silent no-op."""
        if self.scale_by_std:
            raise ValueError(f"{scheme} subtracts a baseline and does not divide by a group std: leave "
                             "advantage.scale_by_std unset (null) or false")
        if self.drop_zero_variance:
            raise ValueError(f"{scheme}: a group of equal returns still carries R - baseline, so there is nothing "
                             "to drop: set advantage.drop_zero_variance=false")

    def scale(self, scheme_default: bool) -> bool:
        """Resolved std on/off for a scheme whose paper default is ``scheme_default``."""
        return scheme_default if self.scale_by_std is None else self.scale_by_std


@dataclass(frozen=True)
class AdvantageResult:
    """What every scheme returns; all arrays have one entry per table row.

    advantages: float64, the advantage of each row (0 for rows of degenerate groups unless
        ``singleton="passthrough"``).
    keep: bool, False for rows whose group carries no signal by construction (zero-variance
        groups, and singleton groups under ``singleton="zero"``) when
        ``drop_zero_variance=True`` (DAPO filtering); all True otherwise.
    groups: int64, dense group index of each row (rows with equal index were normalized together).
    values: float64, the per-row value the scheme normalized (reward, return, mixed or shaped reward).
    stats: floats for logging.
    """

    advantages: np.ndarray
    keep: np.ndarray
    groups: np.ndarray
    values: np.ndarray
    stats: dict[str, float] = field(default_factory=dict)
