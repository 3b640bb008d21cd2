"""The search tree of candidate programs grown in one ``code/tree_search_v0`` episode.

One :class:`Node` per candidate program. Node ids are ``0, 1, 2, ...`` in creation order
(= the turn that created the node). Nodes written from scratch ("drafts") are children of
the problem itself: they have ``parent_id = -1`` and ``depth = 0``; a refinement of node
``p`` has ``parent_id = p`` and ``depth = depth(p) + 1``. These are exactly the ``node`` /
``parent`` / ``depth`` columns a MARS2 trainer needs for its tree-wide advantage and its
parent/sibling-baseline shaping.

Node record fields (:meth:`Node.to_record`, also ``infos[agent]["node"]`` after each step
and :meth:`SearchTree.to_records` for the whole tree):

================  ========================================================================
``id``            node id (int, creation order, = the turn that created it)
``parent_id``     parent node id, ``-1`` for a draft (a child of the problem)
``depth``         0 for drafts, parent depth + 1 for refinements
``agent``         the agent that wrote the node
``turn``          the environment turn that created it
``kind``          ``"draft"`` or ``"refine"``
``program``       the code extracted from the agent's answer (``""`` when none was found)
``score``         public-test score: fraction passed (or 0/1 in binary mode); ``None``
                  when the sandbox failed (infrastructure error: the node is excluded)
``passed``        public tests passed / ``total`` public tests run
``status``        ``passed`` / ``failed`` / ``compile_error`` / ``no_code`` / ``infra_error``
``prompt_feedback``  the feedback the author was shown (its parent's feedback; ``""`` for drafts)
``feedback``      this node's own public-test feedback (what its children are shown)
``infra_error``   the sandbox's error message, or ``None``
``hidden_score``  hidden-test score, filled for the final best node (for every node with
                  ``hidden_eval="all"``); ``None`` otherwise
``children``      ids of the node's children
================  ========================================================================

The best node (:meth:`SearchTree.best`) is the node with the highest public score,
ties broken by the earliest node (smallest id); nodes with an infrastructure error are
never chosen.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

DRAFT = "draft"
REFINE = "refine"
NO_CODE = "no_code"


@dataclass
class Node:
    """One candidate program in the tree (see the module docstring for the fields)."""

    id: int
    parent_id: int
    depth: int
    agent: str
    turn: int
    kind: str
    program: str
    score: float | None
    passed: int
    total: int
    status: str
    prompt_feedback: str = ""
    feedback: str = ""
    infra_error: str | None = None
    hidden_score: float | None = None
    children: list[int] = field(default_factory=list)

    @property
    def scored(self) -> bool:
        """Whether the node has a real score (no infrastructure error)."""
        return self.score is not None

    def to_record(self) -> dict[str, Any]:
        """A plain-dict copy of the node (JSON-serializable)."""
        rec = asdict(self)
        rec["children"] = list(self.children)
        return rec


class SearchTree:
    """The candidate programs of one episode, with parent/child links.

    ``nodes[i].id == i``. The tree is a forest under the (implicit) problem root: the drafts
    are its top-level nodes.
    """

    def __init__(self) -> None:
        self.nodes: list[Node] = []

    def __len__(self) -> int:
        return len(self.nodes)

    def __getitem__(self, node_id: int) -> Node:
        return self.nodes[node_id]

    def add(
        self,
        *,
        parent_id: int,
        agent: str,
        turn: int,
        program: str,
        score: float | None,
        passed: int,
        total: int,
        status: str,
        prompt_feedback: str = "",
        feedback: str = "",
        infra_error: str | None = None,
    ) -> Node:
        """Append a node under ``parent_id`` (``-1`` = a draft) and return it."""
        if parent_id >= len(self.nodes) or parent_id < -1:
            raise ValueError(f"parent {parent_id} is not a node of this tree (size {len(self.nodes)})")
        depth = 0 if parent_id < 0 else self.nodes[parent_id].depth + 1
        node = Node(
            id=len(self.nodes),
            parent_id=parent_id,
            depth=depth,
            agent=agent,
            turn=turn,
            kind=DRAFT if parent_id < 0 else REFINE,
            program=program,
            score=score,
            passed=passed,
            total=total,
            status=status,
            prompt_feedback=prompt_feedback,
            feedback=feedback,
            infra_error=infra_error,
        )
        self.nodes.append(node)
        if parent_id >= 0:
            self.nodes[parent_id].children.append(node.id)
        return node

    def children_of(self, node_id: int) -> list[Node]:
        """Children of ``node_id``; ``-1`` gives the drafts (children of the problem)."""
        if node_id < 0:
            return [n for n in self.nodes if n.parent_id < 0]
        return [self.nodes[i] for i in self.nodes[node_id].children]

    def subtree(self, node_id: int) -> list[Node]:
        """``node_id`` and all its descendants, in id order."""
        out, stack = [], [node_id]
        while stack:
            i = stack.pop()
            out.append(self.nodes[i])
            stack.extend(self.nodes[i].children)
        return sorted(out, key=lambda n: n.id)

    def depth_counts(self) -> dict[int, int]:
        """``c_d``: how many nodes the tree has at each depth."""
        counts: dict[int, int] = {}
        for n in self.nodes:
            counts[n.depth] = counts.get(n.depth, 0) + 1
        return counts

    def best(self) -> Node | None:
        """Highest public score, earliest node on ties; ``None`` if no node has a score."""
        best: Node | None = None
        for n in self.nodes:
            if n.score is not None and (best is None or n.score > best.score):
                best = n
        return best

    def to_records(self) -> list[dict[str, Any]]:
        """Every node as a plain dict, in id order (see the module docstring for the fields)."""
        return [n.to_record() for n in self.nodes]

    def render(self, best_id: int | None = None) -> str:
        """An ASCII drawing of the tree: one line per node, children indented under parents."""
        lines = ["problem"]

        def draw(nodes: list[Node], prefix: str) -> None:
            for k, n in enumerate(nodes):
                last = k == len(nodes) - 1
                score = "infra-error" if n.score is None else f"score={n.score:.2f} ({n.passed}/{n.total})"
                mark = "  <- best" if n.id == best_id else ""
                hidden = "" if n.hidden_score is None else f" hidden={n.hidden_score:.2f}"
                lines.append(
                    f"{prefix}{'`-- ' if last else '|-- '}#{n.id} {n.agent} {score} {n.status}{hidden}{mark}"
                )
                draw(self.children_of(n.id), prefix + ("    " if last else "|   "))

        draw(self.children_of(-1), "")
        return "\n".join(lines)
