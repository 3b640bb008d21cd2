"""``search/planner_worker_v0``: a planner and N search workers answer multi-hop questions over BM25.

Retrieval-augmented QA split across roles, as Dr. MAS (router / search agent / answer
agent) and SHARP (planner + N tool-using workers) set it up. Works offline out of the box:
by default the questions and the corpus come from a generated synthetic world
(:mod:`llm_marl_envs.data.multihop`) indexed with BM25 (:mod:`llm_marl_envs.retrieval`).

Roles: ``planner``, ``worker_0`` .. ``worker_{N-1}``, and with ``answer_by="answerer"`` an
``answerer`` (Dr. MAS layout); with ``answer_by="planner"`` (default, SHARP layout) the
planner answers itself.

Protocol (one environment turn = one planning round; at most ``max_turns`` rounds):

0. At reset the ``planner`` is told the question and, with ``topic_passage=True``
   (default), the *topic passage*: the gold first supporting passage, i.e. the passage of
   the question's topic entity (entity linking given, as in KBQA setups). It stands for
   what an LLM already knows about the question's subject -- the reason single-hop
   questions are often answerable without search (Search-R1, Dr. MAS) -- while hop 2 and
   later still need retrieval. The topic passage travels with the question: in the
   answerer layout the ``answerer`` gets both with the hand-off; workers get neither.
1. The ``planner`` acts first in every turn. It sees the question, the topic passage, its
   own messages and the workers' reports. It writes either
   * ``<dispatch worker="i">sub-question</dispatch>`` (one per worker per turn, several
     workers per turn allowed; without ``worker=`` the next idle worker is used), or
   * ``<answer>final answer</answer>`` (planner layout): the episode ends, or
   * ``<handoff>notes</handoff>`` (answerer layout): the ``answerer`` is told the question
     and the notes, acts in the same turn, and its ``<answer>`` ends the episode.
2. Each dispatched worker is queued (``schedule``) in index order. It sees the
   sub-question, and acts repeatedly within the turn: ``<search>query</search>`` returns
   the top-``top_k`` passages to that worker only and queues it again; at most
   ``max_tool_calls`` searches per dispatch; ``<report>findings</report>`` ends its part.
3. When every dispatched worker has reported, the turn ends and the planner is told each
   report ("worker_i was asked: ... / worker_i reported: ...").

Partial observability: an agent sees its role instructions, its own messages, and what is
sent to it: the planner the question, the topic passage and the reports; a worker its
sub-questions and the passages *it* retrieved; the answerer the question, the topic passage
and the planner's hand-off.

Format issues (``flag_format``, penalized by ``format_penalty`` per flagged agent and turn;
0 by default, e.g. -0.1 for training; listed in ``infos[agent]["format_issues"]``):
no usable tag; unclosed tags; several answers/reports/searches in one message (the first
counts); dispatch to an unknown or already busy worker, or an empty sub-question; answer
and dispatch together (the answer wins); an empty answer; an answer by the planner in the answerer layout;
an empty query; a search beyond ``max_tool_calls`` (not run; the worker's part ends with
an empty report); a report or query over its length limit (cut); a worker message with
neither ``<search>`` nor ``<report>`` (an empty report); huge actions (the base class cuts
them at ``max_action_chars``).

Reward: 0 every turn until the answer; then EM (``metric="em"``) or F1 of the answer.
``infos[a]["reward_components"]``: ``answer_em``, ``answer_f1``, ``answered``,
``supporting_recall`` (where the gold is known; worker retrievals only), ``tool_calls`` (this turn, all workers),
``retrieval_errors``, ``format_penalty``; per agent: ``tool_validity`` and
``agent_tool_calls`` (the episode so far). Local reward (``local_reward_components``, AT-GRPO's
r_local): each worker's ``tool_validity``; the planner and answerer have none. Counterfactual masking: ``coalition_value(unmasked,
mode="rescore")`` -- see :mod:`llm_marl_envs.search.reward` for exactly what is and is not
re-evaluated.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from llm_marl_envs.core import Action, Role, TextCollabEnv, TurnOutcome, make_env_fn
from llm_marl_envs.data.multihop import WorldConfig, generate_world, parse_subquestion
from llm_marl_envs.data.qa_formats import QAExample, corpus_from_contexts
from llm_marl_envs.retrieval import BM25Retriever, Document, Passage, RetrievalError, Retriever
from llm_marl_envs.search.answers import exact_match, f1_score, normalize_answer
from llm_marl_envs.search.reward import Evidence, ToolCall, rescore, supporting_recall, tool_validity
from llm_marl_envs.search.tags import find_tags

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


class raw_env(TextCollabEnv):
    """Planner / search-worker multi-hop QA (see the module docstring for the protocol).

    Args:
        n_workers: number of search workers (1..8).
        answer_by: "planner" (SHARP layout) or "answerer" (Dr. MAS layout: a separate role).
        max_turns: planning rounds; on the synthetic world at least ``max_hops`` (``max_hops + 1``
            with ``topic_passage=False``).
        max_tool_calls: searches per worker per dispatch.
        top_k: passages returned per search.
        metric: "em" (default) or "f1" for the team reward.
        topic_passage: hand the question's topic-entity passage (the gold first supporting
            passage) to whoever is told the question (planner; answerer in its layout).
        n_entities, n_questions, min_hops, max_hops, decoys_per_entity, world_seed: the
            synthetic world (used when ``examples`` is None).
        examples: your own questions (e.g. from :mod:`llm_marl_envs.data.qa_formats`).
        corpus: documents to index with BM25 (default: the world's, or the examples' contexts).
            Topic passages are looked up (by the first supporting id, else title) in the
            world's documents, else in ``corpus``, then in each example's own context.
        retriever: any :class:`~llm_marl_envs.retrieval.Retriever`; overrides ``corpus`` indexing.
        cache_dir: BM25 index cache (None: the user cache dir; False: memory only).
        passage_chars, max_report_chars, max_query_chars: length limits (longer is cut).
        format_penalty: added per flagged agent and turn (<= 0).
    """

    metadata = {"render_modes": ["ansi", "human"], "name": "planner_worker_v0", "is_parallelizable": False}
    shared_attributes = ("retriever", "examples", "world", "topic_passages")
    counterfactual_modes = ("rescore",)

    def __init__(
        self,
        n_workers: int = 2,
        answer_by: str = "planner",
        max_turns: int = 6,
        max_tool_calls: int = 3,
        top_k: int = 3,
        metric: str = "em",
        topic_passage: bool = True,
        n_entities: int = 300,
        n_questions: int = 200,
        min_hops: int = 1,
        max_hops: int = 4,
        decoys_per_entity: int = 1,
        world_seed: int = 0,
        examples: Sequence[QAExample] | None = None,
        corpus: Sequence[Document] | None = None,
        retriever: Retriever | None = None,
        cache_dir: str | Path | None | bool = None,
        passage_chars: int = 600,
        max_report_chars: int = 1000,
        max_query_chars: int = 300,
        format_penalty: float = 0.0,
        max_action_chars: int = 8192,
        render_mode: str | None = None,
    ) -> None:
        if not 1 <= n_workers <= 8:
            raise ValueError(f"n_workers must be in [1, 8], got {n_workers}")
        if answer_by not in ("planner", "answerer"):
            raise ValueError(f"answer_by must be 'planner' or 'answerer', got {answer_by!r}")
        if metric not in ("em", "f1"):
            raise ValueError(f"metric must be 'em' or 'f1', got {metric!r}")
        if max_tool_calls < 1 or top_k < 1:
            raise ValueError("max_tool_calls and top_k must be >= 1")
        if format_penalty > 0:
            raise ValueError(f"format_penalty must be <= 0, got {format_penalty}")
        self.world = None
        if examples is None:
            # one dispatch per hop not given by the topic passage, then the answer
            need = max_hops if topic_passage else max_hops + 1
            if max_turns < need:
                raise ValueError(
                    f"max_turns={max_turns} cannot fit a {max_hops}-hop chain (one dispatch per hop"
                    f"{' after the first, which the topic passage answers' if topic_passage else ''}, then the "
                    f"answer): use max_turns >= {need}"
                )
            self.world = generate_world(
                WorldConfig(n_entities, n_questions, min_hops, max_hops, decoys_per_entity, world_seed)
            )
            examples, corpus = self.world.questions, corpus or self.world.documents
        self.examples: list[QAExample] = list(examples)
        if not self.examples:
            raise ValueError("no questions: pass examples or n_questions >= 1")
        corpus = list(corpus) if corpus is not None else None
        self.topic_passages: list[Document | None] = [None] * len(self.examples)
        if topic_passage:
            self.topic_passages = _topic_passages(
                self.examples, self.world.documents if self.world is not None else corpus or ()
            )
        if retriever is None:
            corpus = corpus if corpus is not None else corpus_from_contexts(self.examples)
            if not corpus:
                raise ValueError("no corpus to index: pass corpus=, retriever=, or examples with contexts")
            retriever = BM25Retriever(corpus, cache_dir=cache_dir)
        self.retriever: Retriever = retriever
        self.workers = [worker_name(i) for i in range(n_workers)]
        #: agent -> the per-agent components that form its local reward (never the raw call count)
        self.local_reward_components = {w: ("tool_validity",) for w in self.workers}
        self.answer_by = answer_by
        finish = _FINISH_PLANNER if answer_by == "planner" else _FINISH_HANDOFF
        roles = [
            Role(
                "planner",
                PLANNER_INSTRUCTIONS.format(
                    given=_GIVEN_PLANNER if topic_passage else "",
                    last=n_workers - 1, finish=finish, turns=max_turns,
                    finish_short="answer" if answer_by == "planner" else "hand off",
                ),
            ),
            *(Role(w, WORKER_INSTRUCTIONS.format(name=w, calls=max_tool_calls, k=top_k)) for w in self.workers),
        ]  # fmt: skip
        if answer_by == "answerer":
            given = _GIVEN_ANSWERER if topic_passage else ""
            roles.append(Role("answerer", ANSWERER_INSTRUCTIONS.format(given=given)))
        super().__init__(
            roles,
            max_turns=max_turns,
            max_action_chars=max_action_chars,
            format_penalty=format_penalty,
            render_mode=render_mode,
        )
        self.max_tool_calls = max_tool_calls
        self.top_k = top_k
        self.metric = metric
        self.topic_passage = topic_passage
        self.passage_chars = passage_chars
        self.max_report_chars = max_report_chars
        self.max_query_chars = max_query_chars
        self._reset_episode_state()

    # ------------------------------------------------------------------ episode state
    def _reset_episode_state(self) -> None:
        self.example: QAExample | None = None
        self.topic: Document | None = None
        self.answer: str | None = None
        self.answer_author: str | None = None
        self.handoff: str | None = None
        self.finished = False
        self.dispatched: dict[str, str] = {}
        self.calls_left: dict[str, int] = {}
        self.turn_reports: list[tuple[str, str, str]] = []
        self.reports: list[tuple[int, str, str, str]] = []
        self.tool_calls: dict[str, list[ToolCall]] = {a: [] for a in self.possible_agents}
        self.evidence = Evidence()
        self.retrieval_errors = 0
        self._turn_tool_calls = 0

    def _setup(self, rng: np.random.Generator, options: dict) -> None:
        self._reset_episode_state()
        if "question_index" in options:
            index = int(options["question_index"]) % len(self.examples)
        elif "question_id" in options:
            matches = [i for i, e in enumerate(self.examples) if e.id == options["question_id"]]
            if not matches:
                raise KeyError(f"no question with id {options['question_id']!r}")
            index = matches[0]
        else:
            index = int(rng.integers(len(self.examples)))
        self.example, self.topic = self.examples[index], self.topic_passages[index]
        if self.topic is not None:
            self.evidence.given[self.topic.id] = (self.topic.title, self.topic.text)
        self.tell("planner", self._question_text())

    def _question_text(self) -> str:
        """The question, with the topic passage when it is given."""
        text = f"Question: {self.example.question}"
        if self.topic is not None:
            text += f"\n{_TOPIC_HEADER}\n{self._passage_block(self.topic)}"
        return text

    def _passage_block(self, p: Document | Passage) -> str:
        return (
            f'<passage id="{html.escape(p.id)}" title="{html.escape(p.title)}">\n'
            f"{self._fit(p.text, self.passage_chars)}\n</passage>"
        )

    def _begin_turn(self) -> None:
        self.dispatched, self.calls_left, self.turn_reports = {}, {}, []
        self._turn_tool_calls = 0
        if self.turn == self.max_turns - 1 and self.turn > 0:
            action = "answer" if self.answer_by == "planner" else "hand off to the answerer"
            self.tell("planner", f"This is the last turn: {action} now.")

    def _turn_agents(self) -> list[str]:
        return ["planner"]

    # ------------------------------------------------------------------ actions
    def _on_action(self, agent: str, action: Action) -> None:
        if agent == "planner":
            self._planner_action(action.text)
        elif agent == "answerer":
            self._answerer_action(action.text)
        else:
            self._worker_action(agent, action.text)

    def _first(self, agent: str, text: str, name: str) -> str | None:
        tags, unclosed = find_tags(text, name)
        if unclosed:
            self.flag_format(agent, f"{unclosed} unclosed <{name}> tag(s)")
        if len(tags) > 1:
            self.flag_format(agent, f"{len(tags)} <{name}> tags; only the first counts")
        return tags[0].content if tags else None

    def _planner_action(self, text: str) -> None:
        answer = self._first("planner", text, "answer")
        dispatches, unclosed = find_tags(text, "dispatch")
        if unclosed:
            self.flag_format("planner", f"{unclosed} unclosed <dispatch> tag(s)")
        if self.answer_by == "planner":
            if answer is not None:
                if dispatches:
                    self.flag_format("planner", "<dispatch> ignored: an <answer> ends the episode")
                if not answer:
                    self.flag_format("planner", "empty <answer>")
                self.answer, self.answer_author, self.finished = answer, "planner", True
                return
        else:
            if answer is not None:
                self.flag_format("planner", "the planner cannot <answer> in this layout; use <handoff>")
            handoff = self._first("planner", text, "handoff")
            if handoff is not None:
                if dispatches:
                    self.flag_format("planner", "<dispatch> ignored: a <handoff> ends the episode")
                self.handoff, self.finished = handoff, True
                self.tell("answerer", f"{self._question_text()}\nNotes from the planner: {handoff}")
                self.schedule("answerer")
                return
        if not dispatches:
            usable = "<dispatch> or <answer>" if self.answer_by == "planner" else "<dispatch> or <handoff>"
            self.flag_format("planner", f"no {usable} tag: nothing happens this turn")
            return
        for tag in dispatches:
            self._dispatch(tag.attrs.get("worker"), tag.content)
        for w in self.workers:  # queue in index order
            if w in self.dispatched:
                self.schedule(w)

    def _dispatch(self, target: str | None, question: str) -> None:
        if target is None:
            free = [w for w in self.workers if w not in self.dispatched]
            if not free:
                self.flag_format("planner", "dispatch without worker= but every worker is busy; ignored")
                return
            worker = free[0]
        else:
            t = target.strip().lower().removeprefix("worker_").removeprefix("worker")
            worker = worker_name(int(t)) if t.isdigit() else ""
            if worker not in self.workers:
                self.flag_format("planner", f"dispatch to unknown worker {target[:40]!r}; ignored")
                return
        if worker in self.dispatched:
            self.flag_format("planner", f"second dispatch to {worker} in one turn; ignored")
            return
        if not question:
            self.flag_format("planner", f"empty sub-question for {worker}; ignored")
            return
        if len(question) > self.max_report_chars:
            self.flag_format("planner", f"sub-question of {len(question)} chars cut to {self.max_report_chars}")
            question = question[: self.max_report_chars]
        self.dispatched[worker] = question
        self.calls_left[worker] = self.max_tool_calls
        self.tell(
            worker,
            f"Sub-question from the planner: {question}\n"
            f"Search with <search>query</search> (up to {self.max_tool_calls} times), "
            "then write <report>...</report>.",
        )

    def _worker_action(self, worker: str, text: str) -> None:
        report = self._first(worker, text, "report")
        searches, unclosed = find_tags(text, "search")
        if unclosed:
            self.flag_format(worker, f"{unclosed} unclosed <search> tag(s)")
        if report is not None:
            if searches:
                self.flag_format(worker, "<search> ignored: a <report> ends your part of the turn")
            self._report(worker, report)
            return
        if not searches:
            self.flag_format(worker, "neither <search> nor <report>: treated as an empty report")
            self._report(worker, "")
            return
        if len(searches) > 1:
            self.flag_format(worker, f"{len(searches)} <search> tags; only the first is run")
        query = searches[0].content
        self._turn_tool_calls += 1
        if self.calls_left[worker] <= 0:
            self.tool_calls[worker].append(ToolCall(self.turn, query[:200], "over_limit"))
            self.flag_format(worker, f"tool-call limit of {self.max_tool_calls} reached; search not run")
            self.tell(worker, "Tool-call limit reached: your part ends with an empty report.")
            self._report(worker, "")
            return
        self.calls_left[worker] -= 1
        self._search(worker, query)
        self.schedule(worker)

    def _search(self, worker: str, query: str) -> None:
        if not any(ch.isalnum() for ch in query):
            self.tool_calls[worker].append(ToolCall(self.turn, query[:200], "empty_query"))
            self.flag_format(worker, "empty search query")
            self.tell(worker, f"Empty query: nothing was searched. Searches left: {self.calls_left[worker]}.")
            return
        if len(query) > self.max_query_chars:
            self.flag_format(worker, f"query of {len(query)} chars cut to {self.max_query_chars}")
            query = query[: self.max_query_chars]
        try:
            hits: list[Passage] = self.retriever.search(query, self.top_k)
        except RetrievalError as exc:
            self.retrieval_errors += 1
            self.tool_calls[worker].append(ToolCall(self.turn, query, "retrieval_error"))
            self.tell(worker, f"[retrieval failed, not your fault: {str(exc)[:200]}]")
            return
        status = "ok" if hits else "no_results"
        self.tool_calls[worker].append(ToolCall(self.turn, query, status, tuple(p.id for p in hits)))
        for p in hits:
            self.evidence.add(worker, p.id, p.title, p.text)
        left = f"Searches left: {self.calls_left[worker]}."
        if not hits:
            self.tell(worker, f"No passage matched {query!r}. {left}")
            return
        self.tell(worker, "\n".join(self._passage_block(p) for p in hits) + f"\n{left}")

    def _report(self, worker: str, report: str) -> None:
        if len(report) > self.max_report_chars:
            self.flag_format(worker, f"report of {len(report)} chars cut to {self.max_report_chars}")
            report = report[: self.max_report_chars]
        self.turn_reports.append((worker, self.dispatched.get(worker, ""), report))
        self.reports.append((self.turn, worker, self.dispatched.get(worker, ""), report))

    def _answerer_action(self, text: str) -> None:
        answer = self._first("answerer", text, "answer")
        if answer is None:
            self.flag_format("answerer", "no <answer> tag: no answer given")
            return
        if not answer:
            self.flag_format("answerer", "empty <answer>")
        self.answer, self.answer_author = answer, "answerer"

    # ------------------------------------------------------------------ scoring
    def _end_turn(self) -> TurnOutcome:
        if self.turn_reports:
            lines = [f"{w} was asked: {q}\n{w} reported: {r}" for w, q, r in self.turn_reports]
            self.tell("planner", "Reports:\n" + "\n".join(lines))
        ex = self.example
        em = f1 = 0.0
        if self.finished and self.answer is not None:
            em, f1 = exact_match(self.answer, ex.answers), f1_score(self.answer, ex.answers)
        components = {
            "answer_em": em,
            "answer_f1": f1,
            "answered": float(self.answer is not None),
            "tool_calls": float(self._turn_tool_calls),
            "retrieval_errors": float(self.retrieval_errors),
        }
        recall = supporting_recall(self.evidence.passages(self.workers), ex.supporting_ids, ex.supporting_titles)
        if recall is not None:
            components["supporting_recall"] = recall
        per_agent = {
            a: {"tool_validity": tool_validity(self.tool_calls[a]), "agent_tool_calls": float(len(self.tool_calls[a]))}
            for a in self.possible_agents
        }
        reward = (em if self.metric == "em" else f1) if self.finished else 0.0
        return TurnOutcome(reward, components, per_agent, terminated=self.finished)

    def _answer_score(self) -> float:
        if self.answer is None or not self.finished:
            return 0.0
        golds = self.example.answers
        return exact_match(self.answer, golds) if self.metric == "em" else f1_score(self.answer, golds)

    def coalition_value(self, unmasked: frozenset[str], mode: str = "rescore") -> float:
        if mode not in self.counterfactual_modes:
            raise ValueError(f"unsupported counterfactual mode {mode!r}; supported: {self.counterfactual_modes}")
        unknown = set(unmasked) - set(self.possible_agents)
        if unknown:
            raise KeyError(f"unknown agents {sorted(unknown)}")
        return rescore(
            unmasked=frozenset(unmasked),
            answer=self.answer if self.finished else None,
            answer_author=self.answer_author,
            answer_score=self._answer_score(),
            question=self.example.question,
            evidence=self.evidence,
            workers=self.workers,
            gold_ids=self.example.supporting_ids,
            gold_titles=self.example.supporting_titles,
            answerer_layout=self.answer_by == "answerer",
        )

    def return_range(self) -> tuple[float, float]:
        worst_flagged_per_turn = len(self.possible_agents)
        return (self.format_penalty * worst_flagged_per_turn * self.max_turns, 1.0)

    def _hidden_state(self) -> str:
        ex = self.example
        if ex is None:
            return ""
        steps = "; ".join(f"{s.question} -> {s.answer}" for s in ex.decomposition)
        return (
            f"question: {ex.question}\ngold answers: {list(ex.answers)}\nsupporting: {list(ex.supporting_ids)}\n"
            f"topic passage given: {self.topic.id if self.topic is not None else None}\n"
            f"decomposition: {steps}\nanswer so far: {self.answer!r}"
        )


env = make_env_fn(raw_env)


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


# ---------------------------------------------------------------------- scripted policies
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


def best_policy(env, agent: str) -> str:
    """The scripted team: the planner follows the gold decomposition (from the hidden state),
    reading step 1 off the topic passage when it is given; workers really search BM25 for
    every later step and extract the answer from the passages they retrieved."""
    if agent == "planner":
        return _scripted_planner(env)
    if agent == "answerer":
        return _scripted_answerer(env)
    return _scripted_worker(env, agent)


def no_search_policy(env, agent: str) -> str:
    """The scripted planner with workers that never search (they report "unknown"): the team
    answers from the given information only -- the topic passage, read like a worker reads."""
    if agent == "planner":
        return _scripted_planner(env)
    if agent == "answerer":
        return _scripted_answerer(env)
    return "<report>unknown</report>"


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
