"""Question-answering examples and corpora, and loaders for the public multi-hop QA formats.

Every loader reads a user's local file (nothing is downloaded) and returns
:class:`QAExample` objects; corpora are lists of :class:`~llm_marl_envs.retrieval.Document`.

=====================  ======================================================================
Format                 Loader
=====================  ======================================================================
HotpotQA               :func:`load_hotpotqa` -- JSON list or JSONL of ``{_id, question, answer,
                       supporting_facts: [[title, sent]], context: [[title, [sentences]]]}``
2WikiMultiHopQA        :func:`load_2wiki` -- same layout as HotpotQA (``_id``, ``context``,
                       ``supporting_facts``, ``answer``; ``evidences`` are kept out)
MuSiQue                :func:`load_musique` -- JSONL of ``{id, question, answer, answer_aliases,
                       paragraphs: [{idx, title, paragraph_text, is_supporting}],
                       question_decomposition: [{question, answer, paragraph_support_idx}]}``
Search-R1 (NQ+Hotpot)  :func:`load_search_r1` -- JSONL or parquet (parquet needs ``pyarrow``) of
                       ``{id, question, golden_answers}`` (or ``reward_model.ground_truth.target``)
corpus                 :func:`load_corpus_jsonl` -- JSONL of ``{id, title, text}`` or
                       ``{id, contents}`` (Search-R1 / pyserini: ``"Title"\\ntext``)
=====================  ======================================================================

:func:`corpus_from_contexts` builds a corpus from the paragraphs that HotpotQA, 2Wiki and
MuSiQue ship with each question (the "distractor" setting); supporting passages of an
example are then known by id. With a separate corpus they are matched by title.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_marl_envs.retrieval.http import split_contents
from llm_marl_envs.retrieval.types import Document


@dataclass(frozen=True)
class SubQuestion:
    """One step of a gold decomposition; ``#k`` in ``question`` stands for step ``k``'s answer."""

    question: str
    answer: str
    supporting_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class QAExample:
    """A question with its gold answers and, where the format has them, the supporting evidence."""

    id: str
    question: str
    answers: tuple[str, ...]
    supporting_ids: tuple[str, ...] = ()
    supporting_titles: tuple[str, ...] = ()
    decomposition: tuple[SubQuestion, ...] = ()
    hops: int | None = None
    source: str = ""
    context: tuple[Document, ...] = ()  # the paragraphs shipped with the question, if any


class FormatError(ValueError):
    """A record does not look like the format it was loaded as."""


# ---------------------------------------------------------------------- file reading
def read_records(path: str | Path) -> Iterator[dict[str, Any]]:
    """Records of a ``.jsonl``, ``.json`` (a list) or ``.parquet`` file."""
    path = Path(path)
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise ImportError(
                f"reading {path} needs pyarrow (pip install pyarrow); or convert it to JSONL"
            ) from exc
        yield from pq.read_table(path).to_pylist()
        return
    with path.open(encoding="utf-8") as f:
        head = f.read(1)
        while head and head.isspace():
            head = f.read(1)
        f.seek(0)
        if head == "[":
            data = json.load(f)
            yield from data
            return
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise FormatError(f"{path}:{n}: not valid JSON ({exc.msg})") from exc


def _need(rec: dict[str, Any], key: str, fmt: str) -> Any:
    if key not in rec:
        raise FormatError(f"{fmt} record {rec.get('id', rec.get('_id', '?'))!r} has no {key!r} field")
    return rec[key]


# ---------------------------------------------------------------------- corpora
def load_corpus_jsonl(path: str | Path) -> list[Document]:
    """A corpus from JSONL of ``{id, title, text}`` or ``{id, contents}`` records."""
    docs = []
    for n, rec in enumerate(read_records(path)):
        doc_id = str(rec.get("id", rec.get("_id", n)))
        if "contents" in rec and "text" not in rec:
            title, text = split_contents(str(rec["contents"]))
        elif "text" in rec:
            title, text = str(rec.get("title", "")), str(rec["text"])
        else:
            raise FormatError(f"corpus record {doc_id!r} has neither 'text' nor 'contents'")
        docs.append(Document(doc_id, title, text))
    return docs


def corpus_from_contexts(examples: Iterable[QAExample]) -> list[Document]:
    """The union of the paragraphs shipped with ``examples`` (deduplicated by id, first wins)."""
    seen: dict[str, Document] = {}
    for ex in examples:
        for d in ex.context:
            seen.setdefault(d.id, d)
    return list(seen.values())


# ---------------------------------------------------------------------- formats
def _context_docs(title_sents: list, prefix: str) -> tuple[Document, ...]:
    # paragraphs are identified by title, as in the official HotpotQA/2Wiki evaluation
    return tuple(Document(f"{prefix}{title}", str(title), " ".join(map(str, sents))) for title, sents in title_sents)


def _hotpot_like(path: str | Path, source: str) -> list[QAExample]:
    out = []
    for rec in read_records(path):
        qid = str(_need(rec, "_id", source) if "_id" in rec else _need(rec, "id", source))
        context = _context_docs(rec.get("context", []), "")
        titles = tuple(dict.fromkeys(str(t) for t, _ in rec.get("supporting_facts", [])))
        ctx_titles = {d.title for d in context}
        out.append(
            QAExample(
                id=qid,
                question=str(_need(rec, "question", source)),
                answers=(str(_need(rec, "answer", source)),),
                supporting_ids=tuple(t for t in titles if t in ctx_titles),
                supporting_titles=titles,
                hops=len(titles) or None,
                source=source,
                context=context,
            )
        )
    return out


def load_hotpotqa(path: str | Path) -> list[QAExample]:
    """HotpotQA (distractor or fullwiki JSON/JSONL). Context paragraph ids are their titles."""
    return _hotpot_like(path, "hotpotqa")


def load_2wiki(path: str | Path) -> list[QAExample]:
    """2WikiMultiHopQA (JSON/JSONL, HotpotQA layout). Context paragraph ids are their titles."""
    return _hotpot_like(path, "2wikimultihopqa")


def load_musique(path: str | Path, *, answerable_only: bool = True) -> list[QAExample]:
    """MuSiQue (JSONL). Paragraph ids are ``<question id>-<idx>``; decompositions keep ``#k``."""
    out = []
    for rec in read_records(path):
        if answerable_only and rec.get("answerable") is False:
            continue
        qid = str(_need(rec, "id", "musique"))
        paras = rec.get("paragraphs", [])
        context = tuple(
            Document(f"{qid}-{p.get('idx', i)}", str(p.get("title", "")), str(p.get("paragraph_text", "")))
            for i, p in enumerate(paras)
        )
        by_idx = {p.get("idx", i): context[i].id for i, p in enumerate(paras)}
        supporting = tuple(context[i].id for i, p in enumerate(paras) if p.get("is_supporting"))
        steps = tuple(
            SubQuestion(
                str(s.get("question", "")),
                str(s.get("answer", "")),
                (by_idx[s["paragraph_support_idx"]],) if s.get("paragraph_support_idx") in by_idx else (),
            )
            for s in rec.get("question_decomposition", [])
        )
        answers = (str(_need(rec, "answer", "musique")), *map(str, rec.get("answer_aliases", [])))
        out.append(
            QAExample(
                id=qid,
                question=str(_need(rec, "question", "musique")),
                answers=tuple(dict.fromkeys(answers)),
                supporting_ids=supporting,
                supporting_titles=tuple(d.title for d in context if d.id in supporting),
                decomposition=steps,
                hops=len(steps) or None,
                source="musique",
                context=context,
            )
        )
    return out


def load_search_r1(path: str | Path) -> list[QAExample]:
    """Search-R1 training/eval data (NQ + HotpotQA; JSONL, or parquet when pyarrow is installed)."""
    out = []
    for n, rec in enumerate(read_records(path)):
        answers = rec.get("golden_answers")
        if answers is None:
            answers = ((rec.get("reward_model") or {}).get("ground_truth") or {}).get("target")
        if answers is None:
            raise FormatError(f"search-r1 record {n} has no 'golden_answers' nor reward_model.ground_truth.target")
        if isinstance(answers, str):
            answers = [answers]
        out.append(
            QAExample(
                id=str(rec.get("id", n)),
                question=str(_need(rec, "question", "search-r1")).strip(),
                answers=tuple(str(a) for a in answers),
                source=str(rec.get("data_source", "search-r1")),
            )
        )
    return out


LOADERS = {
    "hotpotqa": load_hotpotqa,
    "2wiki": load_2wiki,
    "musique": load_musique,
    "search_r1": load_search_r1,
}


def load_qa(fmt: str, path: str | Path) -> list[QAExample]:
    """Load ``path`` as format ``fmt`` (one of :data:`LOADERS`)."""
    try:
        return LOADERS[fmt](path)
    except KeyError:
        raise ValueError(f"unknown QA format {fmt!r}; known: {sorted(LOADERS)}") from None
