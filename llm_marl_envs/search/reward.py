"""Reward components of the planner/worker search task and its counterfactual re-scoring.

* **answer**: EM (default) or token F1 of the final answer against the gold answers after
  SQuAD normalization (:mod:`.answers`); this is the joint team reward.
* **tool validity** (SHARP's tool-process reward), per agent: the fraction of the agent's
  tool calls that were well-formed, executed and returned at least one passage. Calls that
  failed because the *retriever* broke are left out (infrastructure, not the agent).
  An agent with no tool calls has validity 0.0 and ``tool_calls`` 0.
* **supporting recall**: the fraction of gold supporting passages (by id, else by title)
  that some worker retrieved (a retrieval diagnostic: the given topic passage does not count,
  so a team that reads hop 1 off it has at most (hops - 1) / hops).

Counterfactual re-scoring ("rescore", for SHARP): :func:`rescore` re-evaluates a finished
episode with some agents masked. **Nothing is regenerated**: no agent acts again, the
recorded final answer text stays what it was. A masked agent's contributions become the
empty placeholder: a masked worker's reports are empty and its retrieved passages count
as never retrieved; a masked planner sends nothing (no dispatch, no hand-off); a masked
answer author gives no answer. *Given information* is what the environment hands out with
the question, independent of every other agent: the question itself and the topic passage
(``Evidence.given``; it goes to the planner, and in the answerer layout with the hand-off to
the answerer too). The recorded answer then still counts iff

1. its author is unmasked (otherwise there is no answer: value 0);
2. in the answerer layout, the planner is unmasked (otherwise the answerer only had the
   given information: the answer counts only if the question or the topic passage
   contains it);
3. if the answer was *supported* in the real episode (it occurs in the given information or
   in a passage some worker retrieved), it is still supported by the given information or
   by passages of unmasked workers, **and** the given topic passage together with the
   unmasked workers' passages still cover every gold supporting passage the whole team
   held (masking the worker who found a link of the chain breaks the chain; a link given
   as the topic passage needs no worker). An answer that was never supported (a guess, or
   the model's own knowledge) does not depend on the workers and keeps its score.

So ``v(all agents)`` is exactly the episode's answer score and ``v(empty set)`` is 0.
Format penalties are not part of ``v``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from llm_marl_envs.search.answers import contains_answer


@dataclass
class ToolCall:
    """One ``<search>`` by one agent and what became of it."""

    turn: int
    query: str
    status: str  #: "ok" | "no_results" | "empty_query" | "over_limit" | "retrieval_error"
    passage_ids: tuple[str, ...] = ()

    @property
    def valid(self) -> bool:
        return self.status == "ok"


@dataclass
class Evidence:
    """Passages each worker retrieved during the episode, and those the environment gave (id -> title and text)."""

    by_worker: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)
    given: dict[str, tuple[str, str]] = field(default_factory=dict)  #: the topic passage, if any

    def add(self, worker: str, pid: str, title: str, text: str) -> None:
        self.by_worker.setdefault(worker, {})[pid] = (title, text)

    def passages(self, workers: Iterable[str]) -> dict[str, tuple[str, str]]:
        out: dict[str, tuple[str, str]] = {}
        for w in workers:
            out.update(self.by_worker.get(w, {}))
        return out

    def held(self, workers: Iterable[str]) -> dict[str, tuple[str, str]]:
        """The given passages plus the passages ``workers`` retrieved."""
        return {**self.given, **self.passages(workers)}


def tool_validity(calls: Sequence[ToolCall]) -> float:
    """Fraction of valid calls, retriever failures excluded; 0.0 without calls."""
    counted = [c for c in calls if c.status != "retrieval_error"]
    return sum(c.valid for c in counted) / len(counted) if counted else 0.0


def supporting_recall(
    passages: dict[str, tuple[str, str]], gold_ids: Sequence[str], gold_titles: Sequence[str]
) -> float | None:
    """Fraction of gold supporting passages among ``passages``; None when the example has no gold."""
    if gold_ids:
        return sum(g in passages for g in gold_ids) / len(gold_ids)
    if gold_titles:
        titles = {t for t, _ in passages.values()}
        return sum(g in titles for g in gold_titles) / len(gold_titles)
    return None


def _supported(answer: str, question: str, passages: dict[str, tuple[str, str]]) -> bool:
    return contains_answer(question, answer) or any(
        contains_answer(f"{t} {x}", answer) for t, x in passages.values()
    )


def rescore(
    *,
    unmasked: frozenset[str],
    answer: str | None,
    answer_author: str | None,
    answer_score: float,
    question: str,
    evidence: Evidence,
    workers: Sequence[str],
    gold_ids: Sequence[str] = (),
    gold_titles: Sequence[str] = (),
    answerer_layout: bool = False,
) -> float:
    """The episode's answer score with only ``unmasked`` agents contributing (module docstring rule)."""
    if answer is None or answer_author is None or answer_author not in unmasked:
        return 0.0
    if answerer_layout and "planner" not in unmasked:
        return answer_score if _supported(answer, question, evidence.given) else 0.0
    everyone = evidence.held(workers)
    if not _supported(answer, question, everyone):
        return answer_score
    kept = evidence.held([w for w in workers if w in unmasked])
    if not _supported(answer, question, kept):
        return 0.0
    full = supporting_recall(everyone, gold_ids, gold_titles)
    if full is not None and supporting_recall(kept, gold_ids, gold_titles) != full:
        return 0.0
    return answer_score
