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
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from llm_marl_envs.core import Action, Role, TextCollabEnv, TurnOutcome, make_env_fn, make_parallel_env_fn
from llm_marl_envs.data.multihop import WorldConfig, generate_world
from llm_marl_envs.data.qa_formats import QAExample, corpus_from_contexts, resolve_qa_data
from llm_marl_envs.retrieval import BM25Retriever, Document, Passage, Retriever
from llm_marl_envs.search.answers import (
    AnswerNormalization,
    exact_match,
    f1_score,
    get_normalization,
    score_answer,
)
from llm_marl_envs.search.planner_worker_actions import PlannerWorkerActions
from llm_marl_envs.search.planner_worker_policies import (  # noqa: F401  (public names of this module)
    _passages_in,
    best_policy,
    no_search_policy,
    random_policy,
)
from llm_marl_envs.search.planner_worker_text import (  # noqa: F401
    _FINISH_HANDOFF,
    _FINISH_PLANNER,
    _GIVEN_ANSWERER,
    _GIVEN_PLANNER,
    _PASSAGE,
    _TOPIC_HEADER,
    ANSWERER_INSTRUCTIONS,
    PLANNER_INSTRUCTIONS,
    WORKER_INSTRUCTIONS,
    _topic_passages,
    worker_name,
)
from llm_marl_envs.search.reward import Evidence, ToolCall, rescore, supporting_recall, tool_validity


class raw_env(PlannerWorkerActions, TextCollabEnv):
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
        corpus: documents to index with BM25 (default: the world's, or the examples' contexts),
            or the path of a corpus JSONL (``{id, title, text}`` or Search-R1's wiki-18
            ``{id, contents}``).
        dataset: a QA file instead of ``examples`` (HotpotQA, 2Wiki, MuSiQue, Search-R1 /
            FlashRAG layouts; ``dataset_format="auto"`` detects it). Search-R1 recipe:
            ``make("search/planner_worker_v0", dataset="nq_hotpotqa.jsonl",
            corpus="wiki-18.jsonl", topic_passage=False)`` (its records carry no
            supporting passage, so there is no topic passage to hand out).
        answer_normalization: how answers are compared: ``"squad"`` (default, SQuAD v1.1),
            ``"squad_fold_accents"`` (also Röntgen == Rontgen) or an
            :class:`~llm_marl_envs.search.answers.AnswerNormalization`.
            Topic passages are looked up (by the first supporting id, else title) in the
            world's documents, else in ``corpus``, then in each example's own context.
        retriever: any :class:`~llm_marl_envs.retrieval.Retriever`; overrides ``corpus`` indexing.
        cache_dir: BM25 index cache (None: the user cache dir; False: memory only).
        passage_chars, max_report_chars, max_query_chars: length limits (longer is cut).
        format_penalty: added per flagged agent and turn (<= 0).
    """

    metadata = {"render_modes": ["ansi", "human"], "name": "planner_worker_v0"}
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
        corpus: Sequence[Document] | str | Path | None = None,
        dataset: str | Path | None = None,
        dataset_format: str = "auto",
        answer_normalization: str | AnswerNormalization = "squad",
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
        examples, corpus = resolve_qa_data(dataset, dataset_format, examples, corpus)
        self.normalization = get_normalization(answer_normalization)
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

    # ------------------------------------------------------------------ scoring
    def _end_turn(self) -> TurnOutcome:
        if self.turn_reports:
            lines = [f"{w} was asked: {q}\n{w} reported: {r}" for w, q, r in self.turn_reports]
            self.tell("planner", "Reports:\n" + "\n".join(lines))
        ex = self.example
        em = f1 = 0.0
        if self.finished and self.answer is not None:
            em, f1 = (exact_match(self.answer, ex.answers, self.normalization),
                      f1_score(self.answer, ex.answers, self.normalization))  # fmt: skip
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
        return score_answer(self.answer, golds, self.metric, self.normalization)

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

    def secrets(self, agent: str) -> tuple[str, ...]:
        """The gold answers, except those the question or the given topic passage already contain."""
        if self.example is None:
            return ()
        given = self._question_text().lower()
        return tuple(a for a in self.example.answers if a.strip() and a.lower() not in given)

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
parallel_env = make_parallel_env_fn(raw_env)
