"""TRL ``GRPOTrainer`` bridge (a): whole episodes with the trained model in every seat.

A row of the training dataset names one task instance and one seat, as its prompt text
(:func:`episode_prompt`): ``"llm_marl_envs task=toy/signal_game_v0 seed=3 seat=listener"``.
``GRPOTrainer`` repeats each prompt ``num_generations`` (G) times; :func:`make_rollout_func` plays
one episode per copy -- G episodes of the same seed, the trained model (shared weights) in every
seat except the ``partners`` given fixed policies -- and returns the named seat's row of each. So
a TRL group is the G rows of one seat on one seed, normalized together: the grouping of our
``dr_mas`` scheme (agent-wise groups). Every row of a seat that acts over several turns is one
sequence: its first prompt, then its answers (``env_mask`` 1) and the chat-template text of what
the task told it in between (``env_mask`` 0). The team return and its reward components (summed
over the turns) reach the reward functions as the keywords ``team_return`` and
``reward_components``; :func:`team_return_reward` and :func:`component_reward` read them.

A seat the episode never asks to act (a worker the planner does not dispatch, a tree-search seat
the selection never picks) still gets its row, so every prompt copy has one: its prompt and a
single EOS token with ``env_mask`` 0, which carries no gradient (every token is masked out of the
loss); its reward is still the team return, so it counts in its group's mean and spread. The
keyword ``acted`` (one bool per row) tells the reward functions which rows are such idle rows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from llm_marl_envs.bridges import BridgeError, advance, check_seats, make_task_env, require, task_spec

Policy = Callable[[Any, str], str]
_PROMPT = re.compile(r"llm_marl_envs task=(\S+) seed=(\d+) seat=(\S+)")


def episode_prompt(task: str, seed: int, seat: str) -> str:
    """The prompt text of one dataset row: which task, which seed, which seat's row to train."""
    return f"llm_marl_envs task={task} seed={int(seed)} seat={seat}"


def parse_prompt(prompt: Any) -> tuple[str, int, str]:
    """``(task, seed, seat)`` of a prompt made by :func:`episode_prompt` (text or chat messages)."""
    text = prompt[-1]["content"] if isinstance(prompt, list) else str(prompt)
    match = _PROMPT.search(text)
    if match is None:
        raise BridgeError(f"not an episode prompt (make the dataset with episode_dataset()): {text[:120]!r}")
    return match.group(1), int(match.group(2)), match.group(3)


def episode_dataset(task: str, seeds: Iterable[int], seats: Iterable[str] | None = None,
                    env_kwargs: Mapping[str, Any] | None = None):
    """A ``datasets.Dataset`` with one row per (seed, seat): the prompts :func:`make_rollout_func` plays."""
    require("trl")
    from datasets import Dataset

    agents = make_task_env(task, env_kwargs).possible_agents
    seats = check_seats(task, agents, seats if seats is not None else agents)
    rows = [{"prompt": episode_prompt(task, s, seat)} for s in seeds for seat in seats]
    return Dataset.from_list(rows)


def team_return_reward(completions: list, team_return: list[float], **_: Any) -> list[float]:
    """TRL reward function: the team's episode return of each row's episode."""
    return [float(r) for r in team_return]


def component_reward(name: str) -> Callable[..., list[float | None]]:
    """TRL reward function reading one reward component (None where the task has none of that name)."""

    def reward(completions: list, reward_components: list[dict], **_: Any) -> list[float | None]:
        return [c.get(name) for c in reward_components]

    reward.__name__ = f"component_{name}"
    return reward


@dataclass
class _Row:
    """One seat's token sequence in one episode."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    answered_at: int = -1  # index of this seat's last answer in its chat


@dataclass
class _Episode:
    env: Any
    seat: str
    rows: dict[str, _Row] = field(default_factory=dict)


def _idle_row(tokenizer, ep: _Episode) -> _Row:
    """The row of a seat that never acted: its prompt and one EOS token masked out (``env_mask`` 0), so
    it carries no gradient; it keeps its place in the group (TRL needs one row per prompt copy)."""
    prompt = _chat_ids(tokenizer, ep.env.observe_chat(ep.seat), add_generation_prompt=True)
    return _Row(prompt, [tokenizer.eos_token_id], [0])


def _chat_ids(tokenizer, messages: list[dict], **kwargs: Any) -> list[int]:
    text = tokenizer.apply_chat_template(messages, tokenize=False, **kwargs)
    return tokenizer.encode(text, add_special_tokens=False)


def _feedback_ids(tokenizer, chat: list[dict], answered_at: int) -> list[int]:
    """Tokens of what the chat template adds after the seat's last answer (the task's new messages)."""
    before = tokenizer.apply_chat_template(chat[: answered_at + 1], tokenize=False)
    after = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    if not after.startswith(before):
        raise BridgeError("the chat template renders a longer chat with a different beginning; "
                          "multi-turn rows need a prefix-consistent template")
    return tokenizer.encode(after[len(before):], add_special_tokens=False)


@dataclass
class EpisodeRollout:
    """Plays episodes for GRPOTrainer (see the module docstring); an instance is the ``rollout_func``.

    env_kwargs: keyword arguments of the task's env. partners: seat -> fixed policy
    ``policy(env, agent) -> str`` (e.g. the task module's ``best_policy``); other seats are played by
    the trained model. max_new_tokens: per answer (default: the trainer's ``max_completion_length``).
    temperature: sampling temperature (default: the trainer's). max_steps: cap on agent-steps per episode.
    """

    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    partners: Mapping[str, Policy] = field(default_factory=dict)
    max_new_tokens: int | None = None
    temperature: float | None = None
    max_steps: int = 1000

    def __call__(self, prompts: list, trainer) -> dict[str, list]:
        model = trainer.accelerator.unwrap_model(trainer.model)
        tokenizer = trainer.processing_class
        max_new = self.max_new_tokens or trainer.args.max_completion_length
        temperature = self.temperature if self.temperature is not None else trainer.args.temperature
        episodes = [self._start(parse_prompt(p)) for p in prompts]
        for _ in range(self.max_steps):
            pending = [(ep, agent) for ep in episodes for agent in self._advance(ep)]
            if not pending:
                break
            inputs = [self._input_ids(tokenizer, ep, agent) for ep, agent in pending]
            answers = _generate(model, tokenizer, inputs, max_new, temperature)
            for (ep, agent), ids in zip(pending, answers):
                row = ep.rows[agent]
                row.completion_ids += ids
                row.env_mask += [1] * len(ids)
                row.answered_at = len(ep.env.observe_chat(agent))
                ep.env.step(tokenizer.decode(ids, skip_special_tokens=True))
        else:
            raise BridgeError(f"an episode did not end within {self.max_steps} steps of generation")
        out: dict[str, list] = {k: [] for k in ("prompt_ids", "completion_ids", "env_mask", "team_return",
                                                "reward_components", "seat", "acted")}
        for ep in episodes:
            row = ep.rows.get(ep.seat)
            out["acted"].append(row is not None)
            if row is None:  # the seat was never asked to act (an undispatched worker): a row without gradient
                row = _idle_row(tokenizer, ep)
            record = ep.env.unwrapped.record
            components = record.component_totals(ep.seat)
            out["prompt_ids"].append(row.prompt_ids)
            out["completion_ids"].append(row.completion_ids)
            out["env_mask"].append(row.env_mask)
            out["team_return"].append(record.total_reward)
            out["reward_components"].append(components)
            out["seat"].append(ep.seat)
        out["logprobs"] = None  # the trainer recomputes them (no vLLM)
        return out

    def _start(self, parsed: tuple[str, int, str]) -> _Episode:
        task, seed, seat = parsed
        env = make_task_env(task, self.env_kwargs)
        check_seats(task, env.possible_agents, [seat, *self.partners], what="seat")
        if seat in self.partners:
            raise BridgeError(f"seat {seat!r} is trained, so it cannot also be a fixed partner")
        env.reset(seed=seed)
        return _Episode(env, seat)

    def _advance(self, ep: _Episode) -> list[str]:
        """Step partners and idle seats until the model must answer; the agents waiting for it."""
        agent = advance(ep.env, self.partners, self.max_steps)
        return [] if agent is None else [agent]

    def _input_ids(self, tokenizer, ep: _Episode, agent: str) -> list[int]:
        chat = ep.env.observe_chat(agent)
        row = ep.rows.get(agent)
        if row is None:
            ep.rows[agent] = _Row(_chat_ids(tokenizer, chat, add_generation_prompt=True))
            return list(ep.rows[agent].prompt_ids)
        feedback = _feedback_ids(tokenizer, chat, row.answered_at)
        row.completion_ids += feedback
        row.env_mask += [0] * len(feedback)
        return row.prompt_ids + row.completion_ids


@torch.no_grad()
def _generate(model, tokenizer, inputs: list[list[int]], max_new_tokens: int, temperature: float) -> list[list[int]]:
    """Sample one answer per input (left-padded batch); each answer's ids up to and including EOS."""
    width = max(len(ids) for ids in inputs)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    device = next(model.parameters()).device
    ids = torch.tensor([[pad] * (width - len(x)) + x for x in inputs], device=device)
    mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in inputs], device=device)
    was_training = model.training
    model.eval()
    try:
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=True,
                             temperature=temperature, top_k=0, top_p=1.0, pad_token_id=pad)
    finally:
        model.train(was_training)
    answers = []
    for seq in out[:, width:].tolist():
        if tokenizer.eos_token_id in seq:
            seq = seq[: seq.index(tokenizer.eos_token_id) + 1]
        answers.append(seq)
    return answers


def make_rollout_func(task: str, *, env_kwargs: Mapping[str, Any] | None = None,
                      partners: Mapping[str, Policy] | None = None, **kwargs: Any) -> EpisodeRollout:
    """A ``rollout_func`` for ``GRPOTrainer`` playing ``task`` (checked now: unknown task or seat raises)."""
    require("trl")
    task_spec(task)
    env = make_task_env(task, env_kwargs)
    check_seats(task, env.possible_agents, list(partners or {}), what="partner seat")
    return EpisodeRollout(env_kwargs=dict(env_kwargs or {}), partners=dict(partners or {}), **kwargs)
