"""Scripted policies of ``search/planner_worker_v0``: the gold-following team, no-search and random play.

They read only what an agent could read -- its own observation -- except the planner of
:func:`best_policy`, which follows the gold decomposition from the hidden state.
"""

from __future__ import annotations

import html
import re

import numpy as np

from llm_marl_envs.core.cycles import noop_when_idle
from llm_marl_envs.data.multihop import parse_subquestion
from llm_marl_envs.search.answers import normalize_answer
from llm_marl_envs.search.planner_worker_text import _PASSAGE, _TOPIC_HEADER


def _chat_text(env, agent: str) -> list[str]:
    return [m["content"] for m in env.unwrapped.observe_chat(agent)]


def _reports_seen(env) -> list[str]:
    out = []
    for msg in _chat_text(env, "planner"):
        out.extend(m.strip() for m in re.findall(r"^worker_\d+ reported: (.*)$", msg, re.MULTILINE))
    return out


def _passages_in(text: str) -> list[tuple[str, str, str]]:
    return [(html.unescape(i), html.unescape(t), x) for i, t, x in _PASSAGE.findall(text)]


def _read_off(question: str, passages: list[tuple[str, str, str]]) -> str | None:
    """The answer to a sub-question read off its subject's passage with the relation's pattern."""
    for rel, subject in parse_subquestion(question):
        subject = normalize_answer(subject)
        for _, title, text in passages:
            if normalize_answer(title) == subject:
                value = rel.extract(text)
                if value:
                    return value
    return None


def _topic_answer(env) -> str | None:
    """Step 1 of the gold decomposition read off the topic passage in the planner's observation."""
    steps = env.unwrapped.example.decomposition
    given = next((m for m in _chat_text(env, "planner") if m.startswith("Question:")), "")
    if not steps or _TOPIC_HEADER not in given:
        return None
    return _read_off(steps[0].question, _passages_in(given))


def _scripted_planner(env) -> str:
    """Follow the gold decomposition: step 1 from the topic passage when it answers it, every
    other step dispatched to a worker, one per turn (filling #k with what is known), then answer."""
    inner = env.unwrapped
    steps = inner.example.decomposition
    reports = _reports_seen(env)
    topic = _topic_answer(env)
    answers = ([topic] if topic is not None else []) + reports
    if len(answers) < len(steps):
        q = steps[len(answers)].question
        for k in range(len(answers), 0, -1):
            q = q.replace(f"#{k}", answers[k - 1])
        worker = inner.workers[len(reports) % len(inner.workers)]
        return f'<dispatch worker="{worker.split("_")[1]}">{q}</dispatch>'
    final = answers[-1] if answers else ""
    if inner.answer_by == "planner":
        return f"<answer>{final}</answer>"
    return f"<handoff>The answer is: {final}</handoff>"


def _scripted_answerer(env) -> str:
    notes = _chat_text(env, "answerer")[-1]
    m = re.search(r"The answer is: (.*)", notes)
    return f"<answer>{m.group(1).strip() if m else ''}</answer>"


def _current_task(env, agent: str) -> tuple[str, list[tuple[str, str, str]], int]:
    """The worker's latest sub-question, the passages it retrieved since, and its searches since."""
    chat = env.unwrapped.observe_chat(agent)
    start = max(i for i, m in enumerate(chat) if m["content"].startswith("Sub-question from the planner:"))
    question = chat[start]["content"].split("\n", 1)[0].removeprefix("Sub-question from the planner:").strip()
    passages, searches = [], 0
    for m in chat[start + 1 :]:
        if m["role"] == "assistant":
            searches += "<search>" in m["content"]
        else:
            passages += _passages_in(m["content"])
    return question, passages, searches


def _scripted_worker(env, agent: str) -> str:
    """Search BM25 with the sub-question (then with the bare subject), read the answer off the subject's passage."""
    question, passages, searches = _current_task(env, agent)
    value = _read_off(question, passages)
    if value:
        return f"<report>{value}</report>"
    readings = parse_subquestion(question)
    if searches == 0:
        return f"<search>{question}</search>"
    if searches == 1 and readings:
        return f"<search>{readings[0][1]}</search>"
    return "<report>unknown</report>"


@noop_when_idle
def best_policy(env, agent: str) -> str:
    """The scripted team: the planner follows the gold decomposition (from the hidden state),
    reading step 1 off the topic passage when it is given; workers really search BM25 for
    every later step and extract the answer from the passages they retrieved."""
    if agent == "planner":
        return _scripted_planner(env)
    if agent == "answerer":
        return _scripted_answerer(env)
    return _scripted_worker(env, agent)


@noop_when_idle
def no_search_policy(env, agent: str) -> str:
    """The scripted planner with workers that never search (they report "unknown"): the team
    answers from the given information only -- the topic passage, read like a worker reads."""
    if agent == "planner":
        return _scripted_planner(env)
    if agent == "answerer":
        return _scripted_answerer(env)
    return "<report>unknown</report>"


@noop_when_idle
def random_policy(env, agent: str, rng: np.random.Generator) -> str:
    """Well-formed tags with random words from the agent's own observation (or, sometimes, junk)."""
    words = re.findall(r"[A-Za-z]\w+", env.observe(agent)["text"][-2000:]) or ["x"]

    def some() -> str:
        return " ".join(words[int(i)] for i in rng.integers(len(words), size=int(rng.integers(1, 4))))

    roll = rng.random()
    if roll < 0.1:
        return some()
    if agent == "planner":
        inner = env.unwrapped
        if roll < 0.7:
            return f'<dispatch worker="{int(rng.integers(len(inner.workers)))}">{some()}</dispatch>'
        return f"<answer>{some()}</answer>" if inner.answer_by == "planner" else f"<handoff>{some()}</handoff>"
    if agent == "answerer":
        return f"<answer>{some()}</answer>"
    return f"<search>{some()}</search>" if roll < 0.6 else f"<report>{some()}</report>"
