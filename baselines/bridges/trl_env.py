"""TRL ``GRPOTrainer`` bridge (b): train one seat against fixed partners with ``environment_factory``.

:func:`seat_environment` returns a class for ``GRPOTrainer(environment_factory=...)``. Each
instance plays one episode: ``reset(**row)`` builds the task at the row's ``seed`` and returns the
trained seat's first observation (the new part of its chat, appended to the prompt by TRL); the
model answers by calling the tool ``answer(text)``, which steps the seat and the partners and
returns what the seat is told next; ``get_reward()`` returns the team return. When the model stops
calling the tool, the episode is not over yet: TRL has no end-of-rollout hook, so every read-only
accessor -- ``team_return``, ``reward_components``, ``record`` (properties, which TRL does not offer
the model as tools) and ``get_reward`` -- first finishes it (the seat says nothing more, the partners
play on), and a reward function of yours, which TRL calls before ``get_reward``, sees the finished
episode through them (:func:`seat_reward` makes such functions). Partners: a scripted policy
``policy(env, agent) -> str`` (a task module's ``best_policy``), any callable on the partner's chat
messages (:func:`chat_partner`: another model), or :func:`openai_partner` (an OpenAI-compatible endpoint).
The dataset is :func:`seat_dataset` (one row per seed). TRL needs a chat template that renders tool
calls and a response parser for it (TRL's ``add_response_schema`` knows the common families).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from llm_marl_envs.bridges import BridgeError, advance, check_seats, make_task_env, require

Policy = Callable[[Any, str], str]


def chat_partner(generate: Callable[[list[dict]], str]) -> Policy:
    """A partner policy from ``generate(chat_messages) -> text`` (e.g. another model's chat pipeline)."""

    def policy(env, agent: str) -> str:
        return str(generate(env.observe_chat(agent))) if env.observe(agent)["acting"] else ""

    return policy


def openai_partner(base_url: str, model: str, *, api_key: str = "EMPTY", timeout: float = 60.0,
                   **sampling: Any) -> Policy:
    """A partner played by an OpenAI-compatible ``/v1/chat/completions`` endpoint (vLLM, SGLang, ...)."""
    url = base_url.rstrip("/") + "/chat/completions"

    def generate(messages: list[dict]) -> str:
        body = json.dumps({"model": model, "messages": messages, **sampling}).encode()
        request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json",
                                                                  "Authorization": f"Bearer {api_key}"})
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (user-given URL)
            return json.load(response)["choices"][0]["message"]["content"] or ""

    return chat_partner(generate)


def seat_reward(name: str | None = None) -> Callable[..., list[float | None]]:
    """A TRL reward function over :func:`seat_environment` instances: the team return (``name=None``) or
    one reward component (None where the episode has none of that name). Each episode is finished first."""

    def reward(environments: list, **_: Any) -> list[float | None]:
        if name is None:
            return [e.team_return for e in environments]
        return [e.reward_components.get(name) for e in environments]

    reward.__name__ = "team_return" if name is None else f"component_{name}"
    return reward


def seat_dataset(seeds: Iterable[int], prompt: str = "Play your seat: call the answer tool with your reply."):
    """A ``datasets.Dataset`` with one row per seed (``prompt`` and ``seed`` columns) for :func:`seat_environment`."""
    require("trl")
    from datasets import Dataset

    return Dataset.from_list([{"prompt": [{"role": "user", "content": prompt}], "seed": int(s)} for s in seeds])


def seat_environment(task: str, seat: str, partners: Mapping[str, Policy],
                     env_kwargs: Mapping[str, Any] | None = None, max_steps: int = 1000) -> type:
    """The ``environment_factory`` class training ``seat`` of ``task``; every other seat needs a partner."""
    agents = make_task_env(task, env_kwargs).possible_agents
    check_seats(task, agents, [seat], what="seat")
    check_seats(task, agents, list(partners), what="partner seat")
    missing = [a for a in agents if a != seat and a not in partners]
    if seat in partners or missing:
        raise BridgeError(f"{task}: seat {seat!r} is trained; give a partner policy for each other seat, "
                          f"missing {missing}" if missing else f"seat {seat!r} cannot also be a partner")
    kwargs = dict(env_kwargs or {})
    partner_map = dict(partners)

    class SeatEnvironment:
        """One episode of the task, seen from the trained seat (see the module docstring)."""

        def __init__(self) -> None:
            self._env = None
            self._seen = 0

        def reset(self, seed: int = 0, **_: Any) -> str:
            self._env = make_task_env(task, kwargs)
            self._env.reset(seed=int(seed))
            self._seen = 0
            return self._advance()

        def answer(self, text: str) -> str:
            """Send your reply to the task; returns what you are told next.

            Args:
                text: your full reply for this turn.

            Returns:
                The new messages of your turn, or the end of the episode with the team return.
            """
            if self._env is None or self._env.unwrapped.record.done:
                return "The episode is over."
            self._env.step(str(text))
            return self._advance()

        def get_reward(self) -> float:
            """The team return of the finished episode (TRL's reward column named after this class)."""
            return self.team_return

        # Read-only accessors (properties, so TRL does not offer them to the model as tools). Each finishes
        # the episode first: the seat says nothing more, the partners play on to the end.
        @property
        def record(self):
            """The finished episode's :class:`~llm_marl_envs.core.record.EpisodeRecord` (None before ``reset``)."""
            self._finish()
            return None if self._env is None else self._env.unwrapped.record

        @property
        def team_return(self) -> float:
            """The team return of the finished episode (0.0 before ``reset``)."""
            record = self.record
            return 0.0 if record is None else float(record.total_reward)

        @property
        def reward_components(self) -> dict[str, float]:
            """The finished episode's reward components summed over its turns, with the trained seat's own."""
            record = self.record
            return {} if record is None else dict(record.component_totals(seat))

        def _finish(self) -> None:
            if self._env is None:
                return
            for _ in range(max_steps):
                if self._env.unwrapped.record.done:
                    return
                self._env.step("")
                self._advance()
            raise BridgeError(f"{task}: the episode did not end within {max_steps} steps")

        def _advance(self) -> str:
            env = self._env
            if advance(env, partner_map, max_steps) is None:
                return f"The episode is over. Team return: {env.unwrapped.record.total_reward:g}"
            chat = env.observe_chat(seat)
            new, self._seen = chat[self._seen:], len(chat)
            return "\n\n".join(m["content"] for m in new if m["role"] != "assistant")

    SeatEnvironment.__name__ = SeatEnvironment.__qualname__ = f"SeatEnvironment_{seat}"
    return SeatEnvironment
