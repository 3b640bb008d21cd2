"""Credit from counterfactual coalition values (SHARP, algorithms.md section 5).

A finished episode exposes ``coalition_value(frozenset_of_unmasked_agents) -> float``: the
outcome re-scored with every agent outside the set masked (its output replaced by a neutral
placeholder). These functions turn that callable into one credit phi_k per agent.

    exact:        phi_k = sum_{S subset of N minus k} |S|! (N-|S|-1)! / N! * (v(S + k) - v(S))
    single mask:  phi_k = v(N) - v(N minus k)

They live in the environment package so that users of the environments alone can compute
credit; ``baselines.credit`` re-exports them for the trainers.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Literal

CoalitionValue = Callable[[frozenset[str]], float]
CreditMethod = Literal["shapley", "single_mask"]

#: exact Shapley calls the value function 2^N times
MAX_EXACT_AGENTS = 12


def _check_agents(agents: Sequence[str]) -> list[str]:
    names = list(agents)
    if not names:
        raise ValueError("credit needs at least one agent")
    if len(set(names)) != len(names):
        raise ValueError(f"agent names must be unique, got {names}")
    return names


def shapley_values(value: CoalitionValue, agents: Sequence[str]) -> dict[str, float]:
    """Exact Shapley value of each agent; ``value`` is called once per coalition (2^N times)."""
    names = _check_agents(agents)
    n = len(names)
    if n > MAX_EXACT_AGENTS:
        raise ValueError(f"exact Shapley over {n} agents needs 2^{n} evaluations; use single_mask_credit")
    v = {frozenset(s): float(value(frozenset(s)))
         for size in range(n + 1) for s in itertools.combinations(names, size)}
    phi = {}
    for k in names:
        others = [a for a in names if a != k]
        total = 0.0
        for size in range(n):
            weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
            for s in itertools.combinations(others, size):
                total += weight * (v[frozenset(s) | {k}] - v[frozenset(s)])
        phi[k] = total
    return phi


def single_mask_credit(value: CoalitionValue, agents: Sequence[str]) -> dict[str, float]:
    """phi_k = v(all) - v(all minus k): N + 1 evaluations."""
    names = _check_agents(agents)
    everyone = frozenset(names)
    v_all = float(value(everyone))
    return {k: v_all - float(value(everyone - {k})) for k in names}


def compute_credit(
    value: CoalitionValue, agents: Sequence[str], method: CreditMethod = "shapley"
) -> dict[str, float]:
    """Dispatch on ``method``: "shapley" (exact) or "single_mask"."""
    if method == "shapley":
        return shapley_values(value, agents)
    if method == "single_mask":
        return single_mask_credit(value, agents)
    raise ValueError(f"unknown credit method {method!r}; use 'shapley' or 'single_mask'")
