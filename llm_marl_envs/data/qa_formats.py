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
Search-R1 / FlashRAG   :func:`load_search_r1` -- JSONL or parquet (parquet needs ``pyarrow``) of
(NQ, HotpotQA, TQA,    ``{id, question, golden_answers}`` (or ``reward_model.ground_truth.target``);
PopQA, Bamboogle)      raw PopQA ``possible_answers``, TriviaQA ``Answer.Aliases``, Bamboogle
                       ``Question`` / ``Answer`` too
corpus                 :func:`load_corpus_jsonl` -- JSONL of ``{id, title, text}`` or
                       ``{id, contents}`` (Search-R1 / pyserini: ``"Title"\\ntext``)
=====================  ======================================================================

:func:`corpus_from_contexts` builds a corpus from the paragraphs that HotpotQA, 2Wiki and
MuSiQue ship with each question (the "distractor" setting); supporting passages of an
example are then known by id. With a separate corpus they are matched by title.
:func:`load_qa` (``"auto"`` detects the format) and :func:`resolve_qa_data` (the search
task's ``dataset=`` / ``corpus=`` file arguments) pick the loader.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
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
    """Search-R1 / FlashRAG open-QA data (NQ, HotpotQA, TriviaQA, PopQA, Bamboogle...): JSONL,
    JSON or parquet (parquet needs pyarrow) of ``{id, question, golden_answers}`` (or
    ``reward_model.ground_truth.target``). The raw releases' answer fields are read too:
    PopQA's ``possible_answers`` (a JSON string), TriviaQA's ``Answer`` (``Value`` and
    ``Aliases``), Bamboogle's ``Question`` / ``Answer``; an ``answer`` string or list."""
    out = []
    for n, rec in enumerate(read_records(path)):
        answers = _open_qa_answers(rec)
        if not answers:
            raise FormatError(
                f"search-r1 record {n} has no answers (golden_answers, reward_model.ground_truth.target, "
                "possible_answers, answer or Answer)"
            )
        question = rec.get("question", rec.get("Question"))
        if question is None:
            raise FormatError(f"search-r1 record {n} has no 'question' field")
        out.append(
            QAExample(
                id=str(rec.get("id", rec.get("QuestionId", n))),
                question=str(question).strip(),
                answers=tuple(dict.fromkeys(str(a) for a in answers)),
                source=str(rec.get("data_source", "search-r1")),
            )
        )
    return out


def _open_qa_answers(rec: dict[str, Any]) -> list[Any]:
    if rec.get("golden_answers") is not None:
        answers = rec["golden_answers"]
    elif ((rec.get("reward_model") or {}).get("ground_truth") or {}).get("target") is not None:
        answers = rec["reward_model"]["ground_truth"]["target"]
    elif rec.get("possible_answers") is not None:  # PopQA
        answers = rec["possible_answers"]
        answers = json.loads(answers) if isinstance(answers, str) and answers.startswith("[") else answers
    elif isinstance(rec.get("Answer"), dict):  # TriviaQA
        answers = [rec["Answer"].get("Value"), *(rec["Answer"].get("Aliases") or [])]
    else:
        answers = rec.get("answer", rec.get("Answer"))
    if answers is None:
        return []
    answers = [answers] if isinstance(answers, str) else list(answers)
    return [a for a in answers if a is not None and str(a).strip()]


LOADERS = {
    "hotpotqa": load_hotpotqa,
    "2wiki": load_2wiki,
    "musique": load_musique,
    "search_r1": load_search_r1,
}


def load_qa(fmt: str, path: str | Path) -> list[QAExample]:
    """Load ``path`` as format ``fmt`` (one of :data:`LOADERS`, or ``"auto"``)."""
    if fmt == "auto":
        fmt = detect_qa_format(path)
    if fmt not in LOADERS:
        raise ValueError(f"unknown QA format {fmt!r}; known: {sorted(LOADERS)}")
    return LOADERS[fmt](path)


def detect_qa_format(path: str | Path) -> str:
    """The format of a QA file, from its first record's fields."""
    for rec in read_records(path):
        if "paragraphs" in rec and "question_decomposition" in rec:
            return "musique"
        if "supporting_facts" in rec and "context" in rec:
            return "2wiki" if "evidences" in rec else "hotpotqa"
        if _open_qa_answers(rec) and ("question" in rec or "Question" in rec):
            return "search_r1"
        raise FormatError(f"{path}: cannot tell the QA format from the fields {sorted(rec)}")
    raise FormatError(f"{path}: no records")


def resolve_qa_data(
    dataset: str | Path | None,
    dataset_format: str,
    examples: Sequence[QAExample] | None,
    corpus: Sequence[Document] | str | Path | None,
) -> tuple[list[QAExample] | None, list[Document] | None]:
    """``(examples, corpus)`` for the search task from its ``dataset=`` / ``corpus=`` arguments:
    a QA file (any format of :data:`LOADERS`, ``dataset_format="auto"`` detects it) and a
    corpus JSONL path (:func:`load_corpus_jsonl`, e.g. Search-R1's wiki-18) or documents."""
    if dataset is not None:
        if examples is not None:
            raise ValueError("pass dataset= (a file) or examples= (loaded questions), not both")
        examples = load_qa(dataset_format, dataset)
    if isinstance(corpus, (str, Path)):
        corpus = load_corpus_jsonl(corpus)
    return (list(examples) if examples is not None else None), (list(corpus) if corpus is not None else None)
