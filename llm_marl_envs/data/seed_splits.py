"""Disjoint seed ranges for generated tasks' train and test splits (as in AT-GRPO).

A generated task (math word problems, grid puzzles) draws each instance from its own seed.
Train instances use seeds in ``[0, SPLIT_SIZE)``, test instances in
``[TEST_OFFSET, TEST_OFFSET + SPLIT_SIZE)``, so no test seed is ever a train seed, whatever
the environment's reset seed. :func:`instance_seed` maps an environment's RNG to one.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SPLITS", "SPLIT_SIZE", "TEST_OFFSET", "instance_seed", "split_of_seed"]

SPLITS = ("train", "test")
SPLIT_SIZE = 10**6
TEST_OFFSET = 10**9


def instance_seed(rng: np.random.Generator, split: str) -> int:
    """Draw an instance seed of ``split`` ("train" or "test") from ``rng``."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    index = int(rng.integers(SPLIT_SIZE))
    return index if split == "train" else TEST_OFFSET + index


def split_of_seed(seed: int) -> str:
    """Which split an instance seed belongs to; ValueError outside both ranges."""
    if 0 <= seed < SPLIT_SIZE:
        return "train"
    if TEST_OFFSET <= seed < TEST_OFFSET + SPLIT_SIZE:
        return "test"
    raise ValueError(f"instance seed {seed} is in neither the train nor the test range")
