"""TRL ``GRPOTrainer`` bridge (b): train one seat against fixed partners with ``environment_factory``.

:func:`seat_environment` returns a class for ``GRPOTrainer(environment_factory=...)``. Each
instance plays one episode: ``reset(**row)`` builds the task at the row's ``seed`` and returns the
trained seat's first observation (the new part of its chat, appended to the prompt by TRL); the
model answers by calling the tool ``answer(text)``, which steps the seat and the partners and
returns what the seat is told next; ``get_reward()`` finishes the episode (the seat saying nothing
if the model stopped answering) and returns the team return. Partners: a scripted policy
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
            self.env = None
            self._seen = 0

        def reset(self, seed: int = 0, **_: Any) -> str:
            self.env = make_task_env(task, kwargs)
            self.env.reset(seed=int(seed))
            self._seen = 0
            return self._advance()

        def answer(self, text: str) -> str:
            """Send your reply to the task; returns what you are told next.

            Args:
                text: your full reply for this turn.

            Returns:
                The new messages of your turn, or the end of the episode with the team return.
            """
            if self.env is None or self.env.unwrapped.record.done:
                return "The episode is over."
            self.env.step(str(text))
            return self._advance()

        def get_reward(self) -> float:
            """The team return of the episode (finished with empty answers if the model stopped answering)."""
            if self.env is None:
                return 0.0
            for _ in range(max_steps):
                if self.env.unwrapped.record.done:
                    break
                self.env.step("")
                self._advance()
            return self.env.unwrapped.record.total_reward

        def _advance(self) -> str:
            env = self.env
            if advance(env, partner_map, max_steps) is None:
                return f"The episode is over. Team return: {env.unwrapped.record.total_reward:g}"
            chat = env.observe_chat(seat)
            new, self._seen = chat[self._seen:], len(chat)
            return "\n\n".join(m["content"] for m in new if m["role"] != "assistant")

    SeatEnvironment.__name__ = SeatEnvironment.__qualname__ = f"SeatEnvironment_{seat}"
    return SeatEnvironment
