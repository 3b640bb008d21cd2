"""The hooks a text collaboration task implements, and what it returns when a turn ends.

:class:`TaskHooks` is a mixin of :class:`~llm_marl_envs.core.text_env.TextCollabEnv`: it holds the
default of every hook the base class calls (:meth:`~TaskHooks._setup`, :meth:`~TaskHooks._on_action`
and :meth:`~TaskHooks._end_turn` must be overridden; the others are optional), so that a task's
author reads here the whole interface to implement, apart from the PettingZoo machinery in
``text_env``. :class:`TurnOutcome` is what :meth:`~TaskHooks._end_turn` returns. Both stay
importable from :mod:`llm_marl_envs.core.text_env` and :mod:`llm_marl_envs.core`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llm_marl_envs.core.actions import Action


@dataclass
class TurnOutcome:
    """What a task returns when a turn ends.

    ``reward`` is the joint team reward of the turn (before the base class adds the format
    penalty); ``components`` explain it; ``agent_components`` hold per-agent terms
    (credit, tool validity...) that go into that agent's ``reward_components`` only.
    """

    reward: float
    components: dict[str, float] = field(default_factory=dict)
    agent_components: dict[str, dict[str, float]] = field(default_factory=dict)
    terminated: bool = False


class TaskHooks:
    """The hooks of a task, with their defaults (mixed into :class:`TextCollabEnv`)."""

    def _setup(self, rng: np.random.Generator, options: dict) -> None:
        """Draw a task instance and :meth:`tell` each agent its first observation."""
        raise NotImplementedError

    def _begin_turn(self) -> None:
        """Called at the start of every turn (after :meth:`_setup` for the first one)."""

    def _turn_agents(self) -> list[str]:
        """Who acts this turn, in order. Default: every agent, in ``possible_agents`` order."""
        return list(self.agents)

    def _on_action(self, agent: str, action: Action) -> None:
        """Take ``agent``'s answer: an :class:`Action` (``action.text`` sanitized, ``action.issues`` what was
        fixed). Use :meth:`tell`, :meth:`schedule`, :meth:`flag_format`."""
        raise NotImplementedError

    def _end_turn(self) -> TurnOutcome:
        """Score the finished turn, give feedback with :meth:`tell`, decide termination.

        ``self.turn`` is still the (0-based) number of the turn being scored; it advances after
        this returns, and the episode is truncated when it reaches ``max_turns``."""
        raise NotImplementedError

    def _hidden_state(self) -> str:
        """Task state the agents do not see (for :meth:`state`)."""
        return ""

    def return_range(self) -> tuple[float, float]:
        """The (minimum, maximum) episode return under this configuration."""
        raise NotImplementedError

    def action_words(self, agent: str) -> tuple[str, ...] | None:
        """A closed set of words every meaningful action of ``agent`` is made of, or None (free text).

        The text analogue of an action mask: a trainer may restrict a policy's output tokens
        to these words (``baselines`` does, see ``model.mask_to_action_words``). The action
        space itself stays free text; other actions are still accepted and scored.
        """
        return None

    def secrets(self, agent: str) -> tuple[str, ...]:
        """Texts ``agent`` must never be shown (gold answers, hidden tests); ``check_env`` checks it."""
        return ()

    def _detach_resource(self, name: str, value: Any) -> Any:
        """A picklable token from which :meth:`_reattach_resource` re-creates ``value``."""
        raise NotImplementedError(f"{type(self).__name__} lists {name!r} in process_attributes but does "
                                  "not implement _detach_resource")  # fmt: skip

    def _reattach_resource(self, name: str, token: Any) -> Any:
        """Re-create a process attribute in an unpickled copy (called on its first access)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _reattach_resource")

    def coalition_value(self, unmasked: frozenset[str], mode: str = "rescore") -> float:
        """Team reward of the finished episode if only ``unmasked`` agents had contributed.

        Agents outside ``unmasked`` have their contributions replaced by the task's neutral
        placeholder. Needed for SHARP's marginal and Shapley credit; tasks that support it
        list the modes in ``counterfactual_modes``.
        """
        raise NotImplementedError(f"{type(self).__name__} does not support counterfactual masking")

