"""How ``search/planner_worker_v0`` reads and applies each agent's message (planner, worker, answerer).

A mixin of :class:`llm_marl_envs.search.planner_worker_v0.raw_env`: tag parsing, dispatch,
searches over the retriever, reports and answers, with the format issues each can raise.
The episode lifecycle and the scoring stay in the environment module.
"""

from __future__ import annotations

from llm_marl_envs.retrieval import Passage, RetrievalError
from llm_marl_envs.search.planner_worker_text import worker_name
from llm_marl_envs.search.reward import ToolCall
from llm_marl_envs.search.tags import find_tags


class PlannerWorkerActions:
    """The per-role action handlers (mixed into the environment class)."""

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
            # Say so: otherwise the planner's next observation is its own message again, with no
            # user turn in between, and nothing tells it why nothing happened.
            self.tell("planner", f"Your message had no {usable} tag, so nothing happened this turn.")
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
