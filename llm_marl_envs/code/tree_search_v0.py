"""``code/tree_search_v0``: several agents grow one search tree of candidate programs (MARS2).

One episode = one problem and one search tree (:mod:`llm_marl_envs.code.tree`). Each turn
the **environment** decides where the next node goes and who writes it, by Thompson
sampling on the scores seen so far in this tree (:mod:`llm_marl_envs.code.selection`:
a virtual ``GEN`` arm -- write a new child here -- against going down into an existing
child, AB-MCTS style; then one draw per agent from the posterior of its own node
scores). ``agent_selection`` is that agent; it writes exactly one node per turn.

Observations (a fresh chat per node by default, ``history="node"``; ``history="full"``
keeps each agent's whole chat):

- a **draft** (new child of the problem): the problem statement;
- a **refinement** of node ``p``: the problem, ``p``'s program and ``p``'s structured
  public-test feedback (:mod:`llm_marl_envs.code.feedback`: per failing test a wrong
  answer with ``input`` / ``expected`` / ``got``, or the exception with its trimmed
  traceback, or a timeout / memory limit; or the syntax error with line and column).

Scoring. A node's score is the fraction of *public* tests its program passes
(``score_mode="binary"``: 1 if all pass, else 0). The node budget ``max_nodes`` (=
``max_turns``) ends the episode (truncation); with ``stop_when_solved=True`` the episode
ends (terminates) as soon as a node passes every public test -- the hidden tests still
decide the reward. The final joint reward is the *hidden*-test pass rate
(``final_reward="binary"``: 1 if all hidden tests pass) of the best node by public score,
ties to the earliest node (smallest id). Per-turn rewards are 0 until the last turn,
which carries the final reward, so the episode return equals the final reward.
``infos[agent]["reward_components"]`` of every turn holds the new node's ``node_score``
(and ``node_passed`` / ``node_total``); the last turn adds ``final_reward``,
``best_node`` and ``best_public_score``.

Node records. After every step ``infos[agent]["node"]`` is the record of the node just
written (id, parent_id, depth, agent, kind, program, score, passed, total, status,
prompt_feedback -- what its author was shown --, feedback -- its own public-test
feedback --, infra_error, hidden_score, children; see :mod:`llm_marl_envs.code.tree`)
and ``infos[agent]["decision"]`` how it was chosen. The whole tree is
``env.unwrapped.tree`` (``tree.to_records()``), so a MARS2 trainer can compute its
tree-wide advantage and its parent/sibling-baseline shaping; the final step's infos add
``infos[agent]["final"]`` (best node, its hidden score and counts).

Data (``dataset=``): ``"humaneval"`` (function-style: public tests = the examples in the
prompt, parsed into asserts, or a seeded hold-out of ``check`` where a prompt has none;
hidden tests = the rest of ``check``; public and hidden tests are always disjoint, see
:mod:`llm_marl_envs.code.test_sets` and :mod:`llm_marl_envs.data.test_split`),
``"stdio_sample"`` (the 8 shipped stdin/stdout problems), a path to a JSONL file
(LiveCodeBench, APPS, CodeContests, the native stdin/stdout format, or a
HumanEval/MBPP-shaped function-style file; ``dataset_format=``), or a list of
:class:`~llm_marl_envs.data.humaneval.CodeProblem` /
:class:`~llm_marl_envs.data.stdio_problems.StdioProblem`. ``reset(options={"problem":
i})`` picks problem ``i``; otherwise the seeded generator draws one.

Sandbox infrastructure errors are never scored as a wrong answer. With
``on_infra_error="flag"`` (default) a node whose public run failed for infrastructure
reasons gets ``score=None``, ``status="infra_error"``: it is excluded from the selection
posteriors and from the best-node choice, its record carries the message, and the turn's
components have ``infra_error = 1``. If the final hidden evaluation fails (or no node
could be scored) the final reward is 0 **and** ``reward_components["infra_excluded"] = 1``
and ``infos[agent]["final"]["infra_error"]`` is set: trainers must drop such episodes.
``on_infra_error="raise"`` raises :class:`~llm_marl_envs.sandbox.SandboxError` instead.

Format issues (penalized by ``format_penalty``, once per turn): an answer with no code
(empty, or only a non-Python block) becomes a node with score 0 and ``status="no_code"``
without running anything; code that does not compile (prose with no code block is taken
as code by :func:`~llm_marl_envs.code.extract.extract_code`, so it lands here) is a node with
``status="compile_error"`` and the syntax error as feedback. Programs run only inside the
sandbox; the problem's prelude (imports and helpers its prompt provides) goes in front.

Public-test validation (``validate_public=True``): the first time a problem is drawn (or
for all at once with :meth:`raw_env.validate_problems`) its reference solution is run on
the public tests and the tests it fails are dropped (``SearchProblem.dropped_public``) --
HumanEval/47, /130 and /148 have docstring examples that contradict their ``check``; if it
fails them all, new public tests are held out from the hidden tests (never shared).

Scripted policies: :func:`best_policy` (oracle: the reference solution at every node),
:func:`buggy_then_fixed_policy` (writes a wrong program; repairs it only when its
observation shows a failing *public* input in the feedback), :func:`always_fail_policy`,
:func:`random_policy`.

Module layout: the agents' instructions and node prompts are in
:mod:`llm_marl_envs.code.tree_search_text`, running programs and the final reward in
:mod:`llm_marl_envs.code.tree_search_eval`, the policies in :mod:`llm_marl_envs.code.tree_search_policies`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from llm_marl_envs.code.extract import extract_code
from llm_marl_envs.code.feedback import COMPILE_ERROR, FeedbackConfig, analyze
from llm_marl_envs.code.sandbox_handle import SandboxResource, hidden_test_texts
from llm_marl_envs.code.search_problems import (  # noqa: F401  (public names of this module)
    FUNCTION,
    STDIO,
    SearchProblem,
    function_problem,
    load_search_problems,
    stdio_problem,
)
from llm_marl_envs.code.selection import Decision, SelectionConfig, choose
from llm_marl_envs.code.tree import NO_CODE, Node, SearchTree
from llm_marl_envs.code.tree_search_eval import TreeSearchEvaluation
from llm_marl_envs.code.tree_search_policies import (  # noqa: F401
    always_fail_policy,
    best_policy,
    buggy_then_fixed_policy,
    random_policy,
    tree_json,
    wrong_program,
)
from llm_marl_envs.code.tree_search_text import (  # noqa: F401  (DEFAULT_INSTRUCTIONS: a public name of this module)
    DEFAULT_INSTRUCTIONS,
    node_prompt,
    role_instructions,
)
from llm_marl_envs.core import Action, Role, TextCollabEnv, TurnOutcome, make_env_fn, make_parallel_env_fn
from llm_marl_envs.data.humaneval import CodeProblem
from llm_marl_envs.data.stdio_problems import StdioProblem
from llm_marl_envs.data.test_split import SplitConfig
from llm_marl_envs.sandbox import default_sandbox

SCORE_MODES = ("fraction", "binary")
INFRA_POLICIES = ("flag", "raise")
HISTORY_MODES = ("node", "full")
HIDDEN_EVAL = ("best", "all")


class raw_env(SandboxResource, TreeSearchEvaluation, TextCollabEnv):
    """MARS2 multi-agent tree search over candidate programs (see the module docstring).

    Args:
        dataset: ``"humaneval"``, ``"stdio_sample"``, a JSONL path, or a list of problems.
        dataset_format: for a path: ``"auto"``, ``"native"``, ``"livecodebench"``, ``"apps"``,
            ``"code_contests"`` (stdin/stdout) or ``"humaneval"`` / ``"mbpp"`` (function-style).
        problem_ids: keep only these task ids (in this order).
        n_problems: keep only the first ``n_problems`` (after ``problem_ids``).
        n_agents: number of agents (``agent_0 .. agent_{n-1}``) unless ``agent_names`` is given.
        agent_names: explicit agent names.
        agent_instructions: one system prompt for all agents, or one per agent (heterogeneous
            agents); ``{agent}`` and ``{n}`` are filled in.
        max_nodes: node budget = ``max_turns`` (one node per turn).
        score_mode: node score, ``"fraction"`` of public tests passed or ``"binary"``.
        final_reward: ``"fraction"`` of hidden tests passed by the best node or ``"binary"``.
        stop_when_solved: end the episode once a node passes every public test.
        selection: Thompson-sampling settings (:class:`SelectionConfig`).
        feedback: what refinements are shown (:class:`FeedbackConfig`).
        history: ``"node"`` (a fresh chat per node) or ``"full"`` (each agent's whole chat).
        fallback_asserts: at most this many ``check`` tests are held out (seeded) as public
            tests where a prompt has no example; they are then not scored.
        test_split: seed and single-test policy of the visible/hidden split
            (:class:`~llm_marl_envs.data.test_split.SplitConfig`); the split is recorded in
            ``SearchProblem.test_split`` and ``infos[agent]["final"]["test_split"]``.
        validate_public: the first time a problem is drawn, run its reference solution on the
            public tests and drop those it fails (HumanEval has a few wrong docstring examples);
            if it fails them all, new public tests are held out from the hidden ones.
        hidden_eval: ``"best"`` (hidden tests run on the final best node only) or ``"all"``
            (on every node too; ``hidden_score`` in each record, for analysis).
        on_infra_error: ``"flag"`` or ``"raise"`` (see the module docstring).
        timeout_s: per-test time limit passed to the sandbox (None = its default).
        sandbox: a :class:`~llm_marl_envs.sandbox.Sandbox` (None = the shared default).
        format_penalty: added to the turn reward when the answer has a format issue.
    """

    metadata = {"render_modes": ["ansi", "human"], "name": "tree_search_v0"}
    horizon_kwarg = "max_nodes"
    shared_attributes = ("problems",)

    def __init__(
        self,
        dataset: str | Path | Sequence[CodeProblem | StdioProblem] = "humaneval",
        dataset_format: str = "auto",
        problem_ids: Sequence[str] | None = None,
        n_problems: int | None = None,
        n_agents: int = 2,
        agent_names: Sequence[str] | None = None,
        agent_instructions: str | Sequence[str] | None = None,
        max_nodes: int = 8,
        score_mode: str = "fraction",
        final_reward: str = "fraction",
        stop_when_solved: bool = False,
        selection: SelectionConfig | None = None,
        feedback: FeedbackConfig | None = None,
        history: str = "node",
        fallback_asserts: int = 3,
        test_split: SplitConfig | None = None,
        validate_public: bool = True,
        hidden_eval: str = "best",
        on_infra_error: str = "flag",
        timeout_s: float | None = None,
        sandbox: Any = None,
        format_penalty: float = 0.0,
        max_action_chars: int = 16_384,
        render_mode: str | None = None,
    ) -> None:
        for name, value, allowed in (
            ("score_mode", score_mode, SCORE_MODES),
            ("final_reward", final_reward, SCORE_MODES),
            ("history", history, HISTORY_MODES),
            ("hidden_eval", hidden_eval, HIDDEN_EVAL),
            ("on_infra_error", on_infra_error, INFRA_POLICIES),
        ):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        if max_nodes < 1:
            raise ValueError(f"max_nodes must be >= 1, got {max_nodes}")
        names = list(agent_names) if agent_names is not None else [f"agent_{i}" for i in range(n_agents)]
        if not names:
            raise ValueError("need at least one agent")
        roles = [Role(a, t) for a, t in zip(names, role_instructions(names, agent_instructions))]
        super().__init__(
            roles,
            max_turns=max_nodes,
            max_action_chars=max_action_chars,
            format_penalty=format_penalty,
            render_mode=render_mode,
        )
        problems = load_search_problems(dataset, dataset_format, fallback_asserts, test_split)
        if problem_ids is not None:
            by_id = {p.task_id: p for p in problems}
            missing = [t for t in problem_ids if t not in by_id]
            if missing:
                raise KeyError(f"unknown problem ids {missing[:5]}")
            problems = [by_id[t] for t in problem_ids]
        if n_problems is not None:
            if n_problems < 1:
                raise ValueError("n_problems must be >= 1")
            problems = problems[:n_problems]
        self.problems: list[SearchProblem] = problems
        self.max_nodes = max_nodes
        self.score_mode = score_mode
        self.final_reward_mode = final_reward
        self.stop_when_solved = stop_when_solved
        self.selection = selection or SelectionConfig()
        self.feedback_config = feedback or FeedbackConfig()
        self.history = history
        self.hidden_eval = hidden_eval
        self.validate_public = validate_public
        self.split_config = replace(test_split or SplitConfig(), max_held_out=max(0, fallback_asserts))
        self.on_infra_error = on_infra_error
        self.timeout_s = timeout_s
        self.sandbox = sandbox if sandbox is not None else default_sandbox()
        self.tree = SearchTree()
        self.problem: SearchProblem = problems[0]
        self.problem_index = 0
        self.decision: Decision | None = None
        self.decisions: list[Decision] = []
        self.final: dict[str, Any] = {}
        self._new_node: Node | None = None
        self._hidden_runs: dict[int, tuple[float | None, int, int, str | None]] = {}

    # ------------------------------------------------------------------ hooks
    def _setup(self, rng: np.random.Generator, options: dict) -> None:
        if "problem" in options:
            index = int(options["problem"])
            if not 0 <= index < len(self.problems):
                raise IndexError(f"problem index {index} out of range [0, {len(self.problems)})")
        else:
            index = int(rng.integers(len(self.problems)))
        if self.validate_public and not self.problems[index].validated:
            self.problems[index] = self._validated(self.problems[index])
        self.problem_index = index
        self.problem = self.problems[index]
        self.tree = SearchTree()
        self.decision = None
        self.decisions = []
        self.final = {}
        self._new_node = None
        self._hidden_runs = {}

    def _begin_turn(self) -> None:
        decision = choose(self.tree, self.agents, self.turn, self.selection, self.np_random)
        self.decision = decision
        self.decisions.append(decision)
        agent = decision.agent
        if self.history == "node":
            self.forget(agent)
        self.tell(agent, node_prompt(self.problem, self.tree, decision.parent_id))

    def _turn_agents(self) -> list[str]:
        assert self.decision is not None
        return [self.decision.agent]

    def _on_action(self, agent: str, action: Action) -> None:
        assert self.decision is not None
        parent_id = self.decision.parent_id
        shown = self.tree[parent_id].feedback if parent_id >= 0 else ""
        code = extract_code(action.text).code
        common = dict(parent_id=parent_id, agent=agent, turn=self.turn, prompt_feedback=shown, program=code)
        if not code.strip():
            self.flag_format(agent, "no Python code found in the answer")
            total = len(self.problem.public_tests)
            self._new_node = self.tree.add(
                **common, score=0.0, passed=0, total=total, status=NO_CODE,
                feedback=f"{self.feedback_config.label}: 0/{total} passed. No Python code was found in the answer.",
            )  # fmt: skip
            return
        result = self._run(code, self.problem.public_setup, self.problem.public_tests)
        fb = analyze(result)
        if fb.is_infra_error:
            self._infra(f"public tests of node {len(self.tree)}: {fb.infra_error}")
            self._new_node = self.tree.add(
                **common, score=None, passed=0, total=fb.total, status=fb.status,
                feedback=fb.render(self.feedback_config), infra_error=fb.infra_error,
            )  # fmt: skip
            return
        if fb.status == COMPILE_ERROR:
            self.flag_format(agent, "the program does not compile")
        self._new_node = self.tree.add(
            **common, score=self._score(fb.passed, fb.total, self.score_mode), passed=fb.passed,
            total=fb.total, status=fb.status, feedback=fb.render(self.feedback_config),
        )  # fmt: skip
        if self.hidden_eval == "all":
            self._hidden_runs[self._new_node.id] = self._hidden(self._new_node)
            self._new_node.hidden_score = self._hidden_runs[self._new_node.id][0]

    def _end_turn(self) -> TurnOutcome:
        node = self._new_node
        assert node is not None
        components = {
            "node_score": node.score if node.score is not None else 0.0,
            "node_passed": float(node.passed),
            "node_total": float(node.total),
            "infra_error": float(node.infra_error is not None),
        }
        solved = node.score is not None and node.total > 0 and node.passed == node.total
        stop = self.stop_when_solved and solved
        if not (stop or self.turn + 1 >= self.max_turns):
            return TurnOutcome(0.0, components)
        reward = self._finish()
        components.update(
            final_reward=reward,
            best_node=float(self.final.get("best_node", -1)),
            best_public_score=float(self.final.get("best_public_score", 0.0)),
            infra_excluded=float(bool(self.final.get("infra_error"))),
        )
        return TurnOutcome(reward, components, terminated=stop)

    def step(self, action: Any) -> None:
        self._new_node = None
        super().step(action)
        node = self._new_node
        if node is None:
            return
        decision = self.decisions[node.id]
        for a in self.infos:
            self.infos[a]["node"] = node.to_record()
            self.infos[a]["decision"] = {"parent_id": decision.parent_id, "agent": decision.agent,
                                         "path": list(decision.path)}  # fmt: skip
            if self.final:
                self.infos[a]["final"] = dict(self.final)

    def secrets(self, agent: str) -> tuple[str, ...]:
        """The hidden tests (those that are not also public) and the reference solution."""
        return hidden_test_texts(self.problem.hidden_tests, self.problem.public_tests, self.problem.reference)

    def _hidden_state(self) -> str:
        return (
            f"problem {self.problem.task_id} ({self.problem.kind}, {len(self.problem.public_tests)} public / "
            f"{len(self.problem.hidden_tests)} hidden tests)\n{self.tree.render(self.final.get('best_node'))}"
        )

    def return_range(self) -> tuple[float, float]:
        low = self.format_penalty * self.max_nodes if self.format_penalty < 0 else 0.0
        return (low, 1.0)

    def render(self) -> str | None:
        best = self.tree.best()
        text = (
            f"{self.transcript()}\n\nSearch tree for {self.problem.task_id} "
            f"({len(self.tree)}/{self.max_nodes} nodes):\n{self.tree.render(best.id if best else None)}"
        )
        if self.render_mode == "human":
            print(text)
            return None
        return text


env = make_env_fn(raw_env)
parallel_env = make_parallel_env_fn(raw_env)
