"""Where to expand the search tree next, and which agent writes the node (MARS2 / AB-MCTS).

Every turn of ``code/tree_search_v0`` makes two Thompson-sampling choices with the
environment's seeded generator, in this order (so the same seed and the same scores give
the same sequence of choices):

1. **Where** (:func:`choose_parent`), in the spirit of AB-MCTS-A. Start at the problem
   (the implicit root, id ``-1``). At the current position the arms are

   - ``GEN``: write a new child here -- a new draft at the problem, a refinement of the
     current node otherwise. Its observations are the scores of the current position's
     existing children (how good new children here have been);
   - one arm per existing child ``c`` (in id order): go down into ``c``. Its observations
     are the scores of every node in ``c``'s subtree.

   One value is drawn from each arm's posterior (``GEN`` first, then the children); the
   largest wins, ties going to the earlier arm. ``GEN`` stops the descent and returns the
   current position as the parent of the new node; a child arm moves down into that child
   and repeats. Nodes whose score is ``None`` (sandbox infrastructure error) are not arms
   and their scores are never observations. With ``max_depth`` set, a child at depth
   ``max_depth`` is not an arm (it could not be refined), so every descent ends at a node
   that may be refined.

2. **Who** (:func:`choose_agent`): one draw per agent (in agent order) from the posterior
   of that agent's node scores in this tree; the largest wins, ties to the earlier agent.
   ``agent_choice="round_robin"`` instead takes ``agents[turn % n]`` (no draw).

Posteriors (:class:`SelectionConfig`), over an arm's mean score from observations
``x_1..x_n`` in ``[0, 1]``:

- ``"gaussian"`` (default; the authors' AB-MCTS choice): a Normal prior
  ``N(prior_mean, prior_std^2)`` on the mean, Normal observations with known standard
  deviation ``noise_std``: precision ``1/prior_std^2 + n/noise_std^2``, mean
  ``(prior_mean/prior_std^2 + sum(x)/noise_std^2) / precision``.
- ``"beta"``: ``Beta(alpha + sum(x), beta + sum(1 - x))`` (fractional scores count as
  fractional successes).

Depth-guided weighting (MARS2's test-time variant, ``depth_weighting=True``): every node
score used as an observation is multiplied by ``gamma(d) ** c_d`` where ``d`` is the node's
depth, ``c_d`` the number of nodes at that depth, and ``gamma(d) = max(gamma_min,
gamma_root - gamma_decay * d)`` (0.98 at the root, smaller deeper): crowded and deep levels
look worse, which pushes the search towards less explored levels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from llm_marl_envs.code.tree import Node, SearchTree

POSTERIORS = ("gaussian", "beta")
AGENT_CHOICES = ("thompson", "round_robin")


@dataclass(frozen=True)
class SelectionConfig:
    """Thompson-sampling settings (see the module docstring for the formulas).

    Args:
        posterior: ``"gaussian"`` or ``"beta"``.
        prior_mean, prior_std: Gaussian prior on an arm's mean score.
        noise_std: Gaussian known standard deviation of one score around the arm's mean.
        beta_alpha, beta_beta: Beta prior pseudo-counts.
        agent_choice: ``"thompson"`` or ``"round_robin"``.
        depth_weighting: multiply observed scores by ``gamma(d) ** c_d``.
        gamma_root, gamma_decay, gamma_min: ``gamma(d) = max(gamma_min, gamma_root - gamma_decay * d)``.
        max_depth: deepest allowed node (drafts have depth 0); ``None`` = unlimited.
    """

    posterior: str = "gaussian"
    prior_mean: float = 0.5
    prior_std: float = 0.5
    noise_std: float = 0.3
    beta_alpha: float = 1.0
    beta_beta: float = 1.0
    agent_choice: str = "thompson"
    depth_weighting: bool = False
    gamma_root: float = 0.98
    gamma_decay: float = 0.02
    gamma_min: float = 0.5
    max_depth: int | None = None

    def __post_init__(self) -> None:
        if self.posterior not in POSTERIORS:
            raise ValueError(f"posterior must be one of {POSTERIORS}, got {self.posterior!r}")
        if self.agent_choice not in AGENT_CHOICES:
            raise ValueError(f"agent_choice must be one of {AGENT_CHOICES}, got {self.agent_choice!r}")
        if self.prior_std <= 0 or self.noise_std <= 0:
            raise ValueError("prior_std and noise_std must be > 0")
        if self.beta_alpha <= 0 or self.beta_beta <= 0:
            raise ValueError("beta_alpha and beta_beta must be > 0")
        if not 0 < self.gamma_min <= self.gamma_root <= 1 or self.gamma_decay < 0:
            raise ValueError("need 0 < gamma_min <= gamma_root <= 1 and gamma_decay >= 0")
        if self.max_depth is not None and self.max_depth < 0:
            raise ValueError("max_depth must be >= 0 or None")

    def gamma(self, depth: int) -> float:
        """The depth discount ``gamma(d)``."""
        return max(self.gamma_min, self.gamma_root - self.gamma_decay * depth)


@dataclass(frozen=True)
class Decision:
    """The outcome of one turn's choices (kept for inspection and tests)."""

    parent_id: int  #: where the new node goes: -1 = a new draft, else the node it refines
    agent: str  #: who writes it
    path: tuple[int, ...]  #: the nodes descended through, top down (ends with ``parent_id`` unless -1)


def sample_posterior(values: Sequence[float], config: SelectionConfig, rng: np.random.Generator) -> float:
    """One Thompson draw of an arm's mean score given its observed ``values``."""
    x = np.asarray(values, dtype=np.float64)
    if config.posterior == "beta":
        x = np.clip(x, 0.0, 1.0)
        return float(rng.beta(config.beta_alpha + x.sum(), config.beta_beta + (1.0 - x).sum()))
    precision = 1.0 / config.prior_std**2 + len(x) / config.noise_std**2
    mean = (config.prior_mean / config.prior_std**2 + x.sum() / config.noise_std**2) / precision
    return float(rng.normal(mean, 1.0 / np.sqrt(precision)))


def node_weights(tree: SearchTree, config: SelectionConfig) -> list[float]:
    """Per-node multiplier of the score: ``gamma(d) ** c_d`` with weighting on, else 1."""
    if not config.depth_weighting:
        return [1.0] * len(tree)
    counts = tree.depth_counts()
    return [config.gamma(n.depth) ** counts[n.depth] for n in tree.nodes]


def choose_parent(tree: SearchTree, config: SelectionConfig, rng: np.random.Generator) -> tuple[int, tuple[int, ...]]:
    """Where the next node goes: ``(parent_id, path)``; ``parent_id = -1`` is a new draft."""
    weights = node_weights(tree, config)

    def observed(nodes: Sequence[Node]) -> list[float]:
        return [n.score * weights[n.id] for n in nodes if n.score is not None]

    current, path = -1, []
    while True:
        children = tree.children_of(current)
        arms = [
            c
            for c in children
            if c.score is not None and (config.max_depth is None or c.depth < config.max_depth)
        ]
        best_value = sample_posterior(observed(children), config, rng)
        best_child: Node | None = None
        for child in arms:
            value = sample_posterior(observed(tree.subtree(child.id)), config, rng)
            if value > best_value:
                best_value, best_child = value, child
        if best_child is None:
            return current, tuple(path)
        current = best_child.id
        path.append(current)


def choose_agent(
    tree: SearchTree, agents: Sequence[str], turn: int, config: SelectionConfig, rng: np.random.Generator
) -> str:
    """Who writes the next node (Thompson on each agent's scores in this tree, or round robin)."""
    if not agents:
        raise ValueError("no agents to choose from")
    if config.agent_choice == "round_robin":
        return agents[turn % len(agents)]
    weights = node_weights(tree, config)
    best_agent, best_value = agents[0], -np.inf
    for agent in agents:
        scores = [n.score * weights[n.id] for n in tree.nodes if n.agent == agent and n.score is not None]
        value = sample_posterior(scores, config, rng)
        if value > best_value:
            best_agent, best_value = agent, value
    return best_agent


def choose(
    tree: SearchTree, agents: Sequence[str], turn: int, config: SelectionConfig, rng: np.random.Generator
) -> Decision:
    """Both choices of one turn, in the documented order (where, then who)."""
    parent_id, path = choose_parent(tree, config, rng)
    agent = choose_agent(tree, agents, turn, config, rng)
    return Decision(parent_id=parent_id, agent=agent, path=path)
