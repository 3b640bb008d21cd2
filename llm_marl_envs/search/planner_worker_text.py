"""The texts of ``search/planner_worker_v0``: role instructions, passage markup, topic passages.

Kept apart from the environment so that the scripted policies (which read observations)
and the environment (which writes them) share one definition of the wire format.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from llm_marl_envs.data.qa_formats import QAExample
from llm_marl_envs.retrieval import Document

PLANNER_INSTRUCTIONS = """You are the planner of a research team answering a question from a document collection.
{given}You cannot search yourself. Each turn write one of:
- <dispatch worker="i">a self-contained sub-question</dispatch> to send worker i (0..{last}) a sub-question
  (several dispatches to different workers are allowed in one turn); the workers' reports arrive next turn;
- {finish}
There are at most {turns} turns; the last one must {finish_short}."""

WORKER_INSTRUCTIONS = """You are {name}, a search worker. The planner sends you sub-questions.
For each: search the collection with <search>query</search> (at most {calls} searches per sub-question;
each returns the top {k} passages), then write <report>your finding, as short as possible</report>.
Only you see the passages you retrieve; the planner sees only your report."""

ANSWERER_INSTRUCTIONS = """You are the answerer. You receive the question{given} and notes from the planner.
Write the final answer as <answer>short answer</answer>."""

_FINISH_PLANNER = "<answer>short final answer</answer> when you know the answer (this ends the episode)"
_FINISH_HANDOFF = (
    "<handoff>notes with everything the answerer needs</handoff> when enough is known; "
    "the answerer then writes the final answer (this ends the episode)"
)

_GIVEN_PLANNER = "With the question you get the passage about its topic entity (no search needed for it).\n"
_GIVEN_ANSWERER = ", the passage about its topic entity"
_TOPIC_HEADER = "Passage about the question's topic entity:"

_PASSAGE = re.compile(r'<passage id="(.*?)" title="(.*?)">\n(.*?)\n</passage>', re.DOTALL)


def worker_name(i: int) -> str:
    return f"worker_{i}"


def _topic_passages(examples: Sequence[QAExample], documents: Sequence[Document]) -> list[Document | None]:
    """Each example's topic passage: its first supporting passage (by id, else by title).

    Looked up in ``documents``, then in the example's own context; an example without one
    is a clear error (pass ``topic_passage=False`` for data without supporting evidence).
    """
    by_id = {d.id: d for d in documents}
    by_title: dict[str, Document] = {}
    for d in documents:
        by_title.setdefault(d.title, d)
    out: list[Document | None] = []
    missing = []
    for ex in examples:
        ctx_id = {d.id: d for d in ex.context}
        ctx_title = {d.title: d for d in reversed(ex.context)}
        doc = None
        if ex.supporting_ids:
            doc = by_id.get(ex.supporting_ids[0]) or ctx_id.get(ex.supporting_ids[0])
        if doc is None and ex.supporting_titles:
            doc = by_title.get(ex.supporting_titles[0]) or ctx_title.get(ex.supporting_titles[0])
        if doc is None:
            missing.append(ex.id)
        out.append(doc)
    if missing:
        raise ValueError(
            f"topic_passage=True but {len(missing)} question(s) have no findable first supporting passage "
            f"(e.g. {missing[:3]}): pass corpus= (or examples with context) holding them, or topic_passage=False"
        )
    return out
